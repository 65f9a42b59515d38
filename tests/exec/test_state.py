"""Session state through the amanda/core variable ops: pruning, control-edge order, persistence."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from amanda import Container, op
from amanda.errors import ExecutionError
from amanda.exec import Session
from amanda.exec.dispatch import OpContext
from amanda.exec.kernels.registry import kernel
from amanda.exec.state import VariableRef, state_key, stateful_kernel

CORE = {"namespace": "amanda/core"}
ONNX = {"namespace": "amanda/onnx/17"}


def counter(name: str, start: float = 0.0) -> Container:
    return op("Variable", name, outputs=["ref"], attrs={"value": np.float32(start), "shared_name": name, **CORE})


def const(name: str, value: float) -> Container:
    return op("Constant", name, outputs=["output"], attrs={"value": np.float32(value), **ONNX})


def bump(name: str) -> Container:
    return op("AssignAdd", name, inputs=["ref", "delta"], outputs=["value"], attrs=CORE)


def read(name: str) -> Container:
    return op("Read", name, inputs=["ref"], outputs=["value"], attrs=CORE)


def model(control: tuple[str, str] | None) -> Container:
    """A counter ``n``, an op ``inc`` adding 1 to it, a ``Read`` of it, and y = relu(x)
    unrelated to the counter; ``control`` adds one control edge between two of them."""
    edges: list[Any] = [
        ("n:ref", "inc:ref"), ("one:output", "inc:delta"), ("n:ref", "get:ref"),
        ("g:x", "r:X"), ("r:Y", "g:y"), ("get:value", "g:seen"), ("inc:value", "g:after"),
    ]
    if control:
        edges.append((f"{control[0]}:-1", f"{control[1]}:-1"))
    return Container(
        "G", "g", inputs=["x"], outputs=["y", "seen", "after"],
        children=[counter("n"), const("one", 1), bump("inc"), read("get"), op("Relu", "r", ["X"], ["Y"], attrs=ONNX)],
        edges=edges,
    )


@pytest.mark.parametrize("threads", [1, 2])
def test_an_op_no_fetch_needs_does_not_run(threads: int) -> None:
    """Fetching y, which does not depend on inc, leaves the counter untouched."""
    with Session(model(None), threads=threads) as s:
        for _ in range(3):
            s.run(["y"], {"x": np.float32([1])})
        assert s.run(["seen"])[0] == 0
        assert ("inc",) not in s.plan(["y"], ["x"]).paths


@pytest.mark.parametrize("threads", [1, 2])
def test_state_persists_across_runs(threads: int) -> None:
    """Each run of inc adds one to the counter kept by the session."""
    with Session(model(None), threads=threads) as s:
        values = [float(s.run(["after"])[0]) for _ in range(4)]
        assert values == [1.0, 2.0, 3.0, 4.0]
        assert float(s.state["n"]) == 4.0


def test_sessions_do_not_share_state() -> None:
    """Two sessions of one model each start from the initial value."""
    g = model(None)
    a, b = Session(g), Session(g)
    a.run(["after"])
    a.run(["after"])
    assert float(b.run(["after"])[0]) == 1.0
    assert float(a.state["n"]) == 2.0


@pytest.mark.parametrize("threads", [1, 2])
def test_control_edge_orders_the_write_before_the_read(threads: int) -> None:
    """With inc -> get, get sees the incremented value; fetching get alone still runs inc."""
    with Session(model(("inc", "get")), threads=threads) as s:
        assert float(s.run(["seen"])[0]) == 1.0
        seen, after = s.run(["seen", "after"])
        assert float(seen) == float(after) == 2.0


@pytest.mark.parametrize("threads", [1, 2])
def test_control_edge_orders_the_read_before_the_write(threads: int) -> None:
    """With get -> inc, get sees the value from before this run's increment."""
    with Session(model(("get", "inc")), threads=threads) as s:
        for expected in (0.0, 1.0, 2.0):
            seen, after = s.run(["seen", "after"])
            assert float(seen) == expected and float(after) == expected + 1


def test_fetching_an_op_for_its_effects_runs_it() -> None:
    """A bare op path as fetch runs the op (result None) and its effects persist."""
    s = Session(model(None))
    assert s.run(["inc"]) == [None]
    assert s.run(["inc:-1"]) == [None]
    assert float(s.run(["seen"])[0]) == 2.0


def test_named_control_port_runs_what_is_bound_to_it() -> None:
    """Fetching the top container's control port `train` runs the ops bound to it."""
    g = Container(
        "G", "g", outputs=["seen"], controls=["train"],
        children=[counter("n"), const("one", 1), bump("inc"), read("get")],
        edges=[("n:ref", "inc:ref"), ("one:output", "inc:delta"), ("n:ref", "get:ref"),
               ("get:value", "g:seen"), ("inc:-1", "g:train")],
    )
    s = Session(g)
    assert s.run(["train"]) == [None]
    assert s.run(["train", "seen"])[1] in (1.0, 2.0)
    assert float(s.state["n"]) == 2.0


def test_assign_replaces_the_value_and_reads_are_snapshots() -> None:
    """Assign stores a copy; a value read before stays as it was."""
    g = Container(
        "G", "g", inputs=["v"], outputs=["old", "new"],
        children=[counter("w", 5), read("get"),
                  op("Assign", "set", inputs=["ref", "value"], outputs=["value"], attrs=CORE)],
        edges=[("w:ref", "get:ref"), ("w:ref", "set:ref"), ("g:v", "set:value"),
               ("get:-1", "set:-1"), ("get:value", "g:old"), ("set:value", "g:new")],
    )
    s = Session(g)
    fed = np.float32(7)
    old, new = s.run(["old", "new"], {"v": fed})
    assert float(old) == 5 and float(new) == 7
    assert not s.state["w"].flags.writeable


def test_variable_from_shape_and_dtype() -> None:
    """A Variable without a value starts at zeros of its shape and dtype."""
    g = Container("G", "g", outputs=["v"], children=[
        op("Variable", "w", outputs=["ref"], attrs={"shape": [2, 3], "dtype": "int32", **CORE}), read("get")],
        edges=[("w:ref", "get:ref"), ("get:value", "g:v")])
    (v,) = Session(g).run(["v"])
    assert v.dtype == np.int32 and v.shape == (2, 3) and not v.any()


def test_state_key_defaults_to_uid() -> None:
    """Without shared_name an op's state key is its uid."""
    w = op("Variable", "w", outputs=["ref"], attrs={"value": 1.0})
    assert state_key(w) == w.uid
    assert state_key(w.with_attrs(shared_name="k")) == "k"


def test_read_of_a_non_reference_raises() -> None:
    """Read given something other than a variable reference fails with the op's path."""
    g = Container("G", "g", inputs=["x"], outputs=["v"], children=[read("get")],
                  edges=[("g:x", "get:ref"), ("get:value", "g:v")])
    with pytest.raises(ExecutionError, match="while executing `get` \\(Read, amanda/core\\)"):
        Session(g).run(["v"], {"x": np.zeros(1)})


def test_stateful_kernel_registration_is_general() -> None:
    """A new family registers a stateful op; it receives the session's store and its key."""

    @stateful_kernel("Tally", family="amanda/test-state")
    def tally(ctx: OpContext, attrs: Mapping[str, Any]) -> tuple:
        ctx.state[ctx.key] = ctx.state.get(ctx.key, 0) + 1
        return (np.array(ctx.state[ctx.key]),)

    g = Container("G", "g", outputs=["t"], attrs={"namespace": "amanda/test-state"},
                  children=[op("Tally", "t", outputs=["n"], attrs={"shared_name": "tally"})],
                  edges=[("t:n", "g:t")])
    s = Session(g)
    assert [int(s.run(["t"])[0]) for _ in range(3)] == [1, 2, 3]
    assert s.state["tally"] == 3


def test_variable_ref_equality() -> None:
    """References compare by key."""
    assert VariableRef("a") == VariableRef("a") and VariableRef("a") != VariableRef("b")
    assert len({VariableRef("a"), VariableRef("a")}) == 1 and "a" in repr(VariableRef("a"))


_TAPPED: list[weakref.ref] = []


@kernel("Tap", family="amanda/test-free")
def _tap(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    out = x + 1  # a fresh array only the environment holds
    _TAPPED.append(weakref.ref(out))
    return (out,)


@kernel("Freed", family="amanda/test-free")
def _freed(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    gc.collect()
    return (np.array(_TAPPED[-1]() is None),)


@pytest.mark.parametrize("threads", [1, 2])
def test_values_are_freed_after_their_last_use(threads: int) -> None:
    """Tap's output is released once Neg (its only reader) ran, before Freed runs."""
    g = Container(
        "G", "g", inputs=["x"], outputs=["freed"],
        children=[op("Tap", "tap", ["x"], ["y"], attrs={"namespace": "amanda/test-free"}),
                  op("Neg", "neg", ["X"], ["Y"], attrs=ONNX),
                  op("Freed", "check", ["x"], ["y"], attrs={"namespace": "amanda/test-free"})],
        edges=[("g:x", "tap:x"), ("tap:y", "neg:X"), ("neg:Y", "check:x"), ("check:y", "g:freed")],
    )
    with Session(g, threads=threads) as s:
        assert bool(s.run(["freed"], {"x": np.zeros(3)})[0])
