"""Loops stop at the session's iteration limit and runs at their timeout, promptly, with an
ExecutionError, and leave the session usable."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from amanda import Container, op  # noqa: E402
from amanda.errors import ExecutionError  # noqa: E402
from amanda.exec import Session  # noqa: E402
from amanda.exec.kernels.registry import kernel  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402

F = TensorProto.FLOAT
_STARTED: list[str] = []


@kernel("Nap", family="amanda/test-limits")
def _nap(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    _STARTED.append(str(attrs.get("tag")))
    time.sleep(float(attrs.get("seconds", 0.05)))
    return (x + 1,)


def endless_loop(trips: bool = False) -> onnx.ModelProto:
    """A Loop whose condition stays true: v counts the iterations (with an optional huge M)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Add", ["v_in", "one"], ["v_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", F, [1])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("v_out", F, [1])],
        initializer=[helper.make_tensor("one", F, [1], [1.0])])
    node = helper.make_node("Loop", ["M" if trips else "", "cond", "v0"], ["v"], body=body)
    inputs = [helper.make_tensor_value_info("cond", TensorProto.BOOL, []), helper.make_tensor_value_info("v0", F, [1])]
    if trips:
        inputs.insert(0, helper.make_tensor_value_info("M", TensorProto.INT64, []))
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("v", F, [1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


FEEDS = {"cond": np.array(True), "v0": np.zeros(1, np.float32)}


@pytest.mark.parametrize("threads", [1, 2])
def test_endless_loop_stops_at_the_iteration_limit(threads: int) -> None:
    """A Loop whose condition never turns false raises once it would exceed max_loop_iterations,
    naming the loop and the limit; a loop within the limit still runs to its end."""
    with Session(from_onnx(endless_loop()), threads=threads, max_loop_iterations=500) as s:
        with pytest.raises(ExecutionError, match=r"reached max_loop_iterations=500") as info:
            s.run(["v"], FEEDS)
        assert "Loop" in str(info.value)
    bounded = from_onnx(endless_loop(trips=True))
    with Session(bounded, threads=threads, max_loop_iterations=500) as s:
        assert s.run(["v"], {"M": np.array(500), **FEEDS})[0].tolist() == [500.0]
        with pytest.raises(ExecutionError, match="max_loop_iterations"):
            s.run(["v"], {"M": np.array(501), **FEEDS})
        assert s.run(["v"], {"M": np.array(3), **FEEDS})[0].tolist() == [3.0]  # still usable


def test_default_iteration_limit_is_documented_and_finite() -> None:
    """A session limits loops by default (DEFAULT_MAX_LOOP_ITERATIONS) and None lifts the limit."""
    from amanda.exec.session import DEFAULT_MAX_LOOP_ITERATIONS

    assert Session(from_onnx(endless_loop())).max_loop_iterations == DEFAULT_MAX_LOOP_ITERATIONS == 1_000_000
    unlimited = Session(from_onnx(endless_loop(trips=True)), max_loop_iterations=None)
    assert unlimited.run(["v"], {"M": np.array(20), **FEEDS})[0].tolist() == [20.0]


@pytest.mark.parametrize("threads", [1, 2])
def test_endless_loop_stops_at_the_run_timeout(threads: int) -> None:
    """With the default iteration limit, an endless Loop raises at the run's timeout, promptly."""
    with Session(from_onnx(endless_loop()), threads=threads) as s:
        start = time.perf_counter()
        with pytest.raises(ExecutionError, match="timeout"):
            s.run(["v"], FEEDS, timeout=0.3)
        elapsed = time.perf_counter() - start
        assert 0.3 <= elapsed < 1.3, elapsed
        # the session's own timeout applies when run gives none
    with Session(from_onnx(endless_loop()), threads=threads, timeout=0.2) as s:
        start = time.perf_counter()
        with pytest.raises(ExecutionError, match="timeout"):
            s.run(["v"], FEEDS)
        assert time.perf_counter() - start < 1.2


def slow_chain(n: int = 10, seconds: float = 0.05) -> Container:
    ns = {"namespace": "amanda/test-limits"}
    children = [op("Nap", f"s{i}", ["x"], ["y"], attrs={"tag": f"s{i}", "seconds": seconds, **ns}) for i in range(n)]
    edges = [("g:x", "s0:x"), (f"s{n - 1}:y", "g:y")] + [(f"s{i}:y", f"s{i + 1}:x") for i in range(n - 1)]
    return Container("G", "g", inputs=["x"], outputs=["y"], children=children, edges=edges)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_run_past_its_timeout_starts_no_new_op(threads: int) -> None:
    """A chain of ten 0.05 s ops with a 0.12 s timeout raises after about three ops, names the
    op that did not start, and the session then runs normally without a timeout."""
    _STARTED.clear()
    with Session(slow_chain(), threads=threads, offload_elements=0) as s:
        start = time.perf_counter()
        with pytest.raises(ExecutionError, match=r"passed its timeout before `s\d` could start"):
            s.run(["y"], {"x": np.zeros(2)}, timeout=0.12)
        elapsed = time.perf_counter() - start
        assert elapsed < 0.6, elapsed  # the whole chain takes 0.5 s
        assert len(_STARTED) <= 5, _STARTED
        started = len(_STARTED)
        time.sleep(0.1)
        assert len(_STARTED) == started  # nothing of the timed-out run goes on
        assert s.run(["y"], {"x": np.zeros(2)})[0].tolist() == [10, 10]


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "1", True])
def test_bad_timeouts_and_limits_are_refused(bad: object) -> None:
    """A timeout that is not a positive number of seconds is an ExecutionError, on the session
    and on run; so is an iteration limit that is not a non-negative int."""
    g = slow_chain(1)
    with pytest.raises(ExecutionError, match="timeout: expected None or a positive number of seconds"):
        Session(g, timeout=bad)  # type: ignore[arg-type]
    with pytest.raises(ExecutionError, match="timeout: expected None or a positive number of seconds"):
        Session(g).run(["y"], {"x": np.zeros(1)}, timeout=bad)  # type: ignore[arg-type]
    if not isinstance(bad, int) or isinstance(bad, bool) or bad < 0:
        with pytest.raises(ExecutionError, match="max_loop_iterations: expected None or a non-negative int"):
            Session(g, max_loop_iterations=bad)  # type: ignore[arg-type]
