"""Value caching: a step whose inputs (fed values by content or frozen identity, variable
versions) did not change since it ran is not run again, within the memory budget, and every
fetch equals what an uncached Session computes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

import amanda
from amanda.errors import ExecutionError
from amanda.exec import Session
from amanda.exec.kernels.registry import kernel

FAMILY = "amanda/test-cache"
CALLS: Counter = Counter()


@kernel("Twice", family=FAMILY)
def twice(attrs: Mapping[str, Any], x: Any) -> tuple:
    """2x, counting its calls by the op's ``tag`` attribute."""
    CALLS[attrs["tag"]] += 1
    return (np.asarray(x) * 2,)


def tw(name: str) -> amanda.Container:
    return amanda.op("Twice", name, ["x"], ["y"], attrs={"namespace": FAMILY, "tag": name})


def two_branches() -> amanda.Container:
    """a = 2 * 2 * x (ops a1, a2); b = 2 * y (op b)."""
    return amanda.Container("G", "g", inputs=["x", "y"], outputs=["a", "b"], children=[tw("a1"), tw("a2"), tw("b")],
                            edges=[("g:x", "a1:x"), ("a1:y", "a2:x"), ("a2:y", "g:a"), ("g:y", "b:x"), ("b:y", "g:b")])


def calls() -> dict:
    counts = dict(CALLS)
    CALLS.clear()
    return counts


def test_unchanged_inputs_are_not_recomputed_and_changed_ones_are() -> None:
    """A second run with the same feeds runs no kernel; changing one feed reruns only its
    branch; writing into a fed array between runs is seen; results match numpy."""
    session = Session(two_branches(), cache=True)
    x, y = np.arange(3.0), np.ones(2)
    calls()
    a, b = session.run(["a", "b"], {"x": x, "y": y})
    np.testing.assert_array_equal(a, 4 * np.arange(3.0))
    np.testing.assert_array_equal(b, 2 * np.ones(2))
    assert calls() == {"a1": 1, "a2": 1, "b": 1}
    session.run(["a", "b"], {"x": x, "y": y})
    assert calls() == {}
    session.run(["a", "b"], {"x": x.copy(), "y": y + 1})  # same content for x: reused
    assert calls() == {"b": 1}
    x[0] = 10.0  # written in place: the content changed
    a, _ = session.run(["a", "b"], {"x": x, "y": y})
    np.testing.assert_array_equal(a, 4 * x)
    assert calls() == {"a1": 1, "a2": 1}
    assert session.value_cache.hits >= 5 and session.value_cache.misses == 6


def test_the_cache_is_off_by_default_and_a_frozen_feed_is_keyed_by_identity() -> None:
    """Without cache=True every run calls every kernel; a read-only feed is recognised by
    identity (no hashing), and stored outputs come back read-only."""
    plain = Session(two_branches())
    calls()
    for _ in range(2):
        plain.run(["a"], {"x": np.ones(2)})
    assert calls() == {"a1": 2, "a2": 2} and plain.value_cache is None
    frozen = np.ones(2)
    frozen.setflags(write=False)
    session = Session(two_branches(), cache=True)
    first = session.run(["a"], {"x": frozen})[0]
    again = session.run(["a"], {"x": frozen})[0]
    assert first is again and not again.flags.writeable
    assert calls() == {"a1": 1, "a2": 1}


def counter_model() -> amanda.Container:
    core = {"namespace": "amanda/core"}
    return amanda.Container("G", "g", outputs=["read", "bump"], children=[
        amanda.op("Variable", "w", outputs=["ref"], attrs={**core, "value": np.float32(1)}),
        amanda.op("Read", "r", inputs=["ref"], outputs=["value"], attrs=core),
        tw("f"),
        amanda.op("Constant", "one", outputs=["output"], attrs={"value": np.float32(1), "namespace": "amanda/onnx/17"}),
        amanda.op("AssignAdd", "inc", inputs=["ref", "delta"], outputs=["value"], attrs=core),
    ], edges=[("w:ref", "r:ref"), ("r:value", "f:x"), ("f:y", "g:read"), ("w:ref", "inc:ref"),
              ("one:output", "inc:delta"), ("inc:value", "g:bump")])


def test_a_value_computed_from_a_variable_is_reused_until_the_variable_changes() -> None:
    """Reading a variable that nobody assigned reuses what was computed from it; after an
    assignment the value is computed again from the new version."""
    session = Session(counter_model(), cache=True)
    calls()
    assert [float(session.run(["read"])[0]) for _ in range(3)] == [2.0, 2.0, 2.0]
    assert calls() == {"f": 1}
    assert float(session.run(["bump"])[0]) == 2.0
    assert [float(session.run(["read"])[0]) for _ in range(2)] == [4.0, 4.0]
    assert calls() == {"f": 1}


def test_the_budget_bounds_what_is_kept() -> None:
    """With a budget smaller than any value nothing is kept and every run computes; with a
    budget for a few values the least recently used go first."""
    session = Session(two_branches(), cache=10)
    calls()
    for _ in range(2):
        session.run(["a"], {"x": np.ones(100)})
    assert calls() == {"a1": 2, "a2": 2} and session.value_cache.used == 0
    roomy = Session(two_branches(), cache=3 * (800 + 64))
    for value in (1.0, 2.0, 1.0):
        roomy.run(["a"], {"x": np.full(100, value)})
    assert roomy.value_cache.used <= roomy.value_cache.budget
    assert calls() == {"a1": 3, "a2": 3}  # the third run's values were evicted by the second's


def test_random_ops_without_a_seed_and_outputs_sharing_a_feed_stay_correct() -> None:
    """An unseeded random op draws afresh on every cached run, and an output that is a view
    of a fed array follows that array when it is written into."""
    onnx = {"namespace": "amanda/onnx/17"}
    noise = amanda.Container("G", "g", outputs=["z"], attrs=onnx, children=[
        amanda.op("RandomNormal", "n", outputs=["output"], attrs={"shape": (4,)})], edges=[("n:output", "g:z")])
    session = Session(noise, cache=True)
    assert not np.array_equal(session.run(["z"])[0], session.run(["z"])[0])
    ident = amanda.Container("G", "g", inputs=["x"], outputs=["y"], attrs=onnx, children=[
        amanda.op("Identity", "i", ["input"], ["output"])], edges=[("g:x", "i:input"), ("i:output", "g:y")])
    session = Session(ident, cache=True)
    x = np.zeros(3)
    session.run(["y"], {"x": x})
    x[:] = 5.0
    np.testing.assert_array_equal(session.run(["y"], {"x": x})[0], np.full(3, 5.0))
    np.testing.assert_array_equal(session.run(["y"], {"x": np.zeros(3)})[0], np.zeros(3))
    assert x.flags.writeable


def test_bad_cache_settings_are_rejected() -> None:
    """A negative budget or a value that is neither a bool nor an int is an ExecutionError."""
    for bad in (-1, 1.5, "yes"):
        with pytest.raises(ExecutionError, match="cache"):
            Session(two_branches(), cache=bad)


@pytest.mark.parametrize("threads", [1, 2])
def test_cached_runs_of_an_onnx_model_agree_with_onnxruntime(threads: int) -> None:
    """With the cache on, the sequential and the threaded runner give onnxruntime's outputs
    for new and repeated feeds, and a repeated feed runs no step."""
    pytest.importorskip("onnx")
    from amanda.io.onnx.importer import from_onnx
    from tests.fixtures.onnx import onnx_models as models

    proto = models.attention()
    session = Session(from_onnx(proto), threads=threads, cache=True)
    outputs = [o.name for o in proto.graph.output]
    for seed in (0, 1, 0):
        feeds = models.feeds("attention", seed=seed)
        for got, want in zip(session.run(outputs, feeds), models.run(proto, feeds)):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    misses = session.value_cache.misses
    session.run(outputs, models.feeds("attention", seed=1))
    assert session.value_cache.misses == misses
