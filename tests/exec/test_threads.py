"""The threaded scheduler agrees with the sequential interpreter, stops promptly on failure
and leaves no thread behind; the thread budget picks runners and BLAS threads as documented."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amanda import Container, op
from amanda.errors import ExecutionError
from amanda.exec import Session
from amanda.exec.kernels.registry import kernel
from amanda.exec.runner import SEQUENTIAL, THREADED, _blas_libraries, blas_threads
from tests.strategies import Plan, build_nested, groupings

NS = {"namespace": "amanda/onnx/17"}

# op type -> (input ports, output port, numpy oracle)
OPS: dict[str, tuple[list[str], str, Any]] = {
    "Add": (["A", "B"], "C", np.add),
    "Sub": (["A", "B"], "C", np.subtract),
    "Mul": (["A", "B"], "C", np.multiply),
    "Neg": (["X"], "Y", np.negative),
    "Relu": (["X"], "Y", lambda x: np.maximum(x, 0)),
    "Tanh": (["X"], "Y", np.tanh),
    "MatMul": (["A", "B"], "Y", np.matmul),
}


@st.composite
def dags(draw: st.DrawFn, max_ops: int = 12) -> Plan:
    """A random DAG of real ONNX ops on 4x4 float64 values: every op output is a top output,
    every input reads an earlier op or a top input, with a few control edges."""
    count = draw(st.integers(1, max_ops))
    ops, edges, top_inputs = [], [], []
    for i in range(count):
        kind = draw(st.sampled_from(sorted(OPS)))
        ins, out, _ = OPS[kind]
        ops.append({"name": f"n{i}", "type": kind, "inputs": ins, "outputs": [out], "attrs": {}})
        for port in ins:
            if i and draw(st.integers(0, 3)):
                j = draw(st.integers(0, i - 1))
                edges.append((f"n{j}", ops[j]["outputs"][0], f"n{i}", port))
            else:
                top_inputs.append((f"x{len(top_inputs)}", f"n{i}", port))
    controls = []
    for _ in range(draw(st.integers(0, 3)) if count > 1 else 0):
        a = draw(st.integers(0, count - 2))
        b = draw(st.integers(a + 1, count - 1))
        if (f"n{a}", f"n{b}") not in controls:
            controls.append((f"n{a}", f"n{b}"))
    top_outputs = [(f"y{i}", s["name"], s["outputs"][0]) for i, s in enumerate(ops)]
    return Plan(ops, edges, controls, top_inputs, top_outputs)


def oracle(plan: Plan, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Plain numpy evaluation of the DAG, independent of amanda."""
    values: dict[tuple[str, str], np.ndarray] = {}
    reads = {(b, q): (a, p) for a, p, b, q in plan.edges}
    reads.update({(b, q): ("SELF", x) for x, b, q in plan.top_inputs})
    values.update({("SELF", x): v for x, v in feeds.items()})
    for spec in plan.ops:
        ins, out, fn = OPS[spec["type"]]
        values[(spec["name"], out)] = fn(*(values[reads[(spec["name"], p)]] for p in ins))
    return {y: values[(a, p)] for y, a, p in plan.top_outputs}


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_threaded_agrees_with_sequential_on_random_dags(data: st.DataObject) -> None:
    """On any nested DAG, threads=2 (every op on the pool) gives exactly threads=1's values,
    and both equal a plain numpy evaluation."""
    plan = data.draw(dags())
    grouping = data.draw(groupings([s["name"] for s in plan.ops]))
    model = build_nested(plan, grouping).with_attrs(**NS)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    feeds = {x: rng.standard_normal((4, 4)) for x, _, _ in plan.top_inputs}
    fetches = [y for y, _, _ in plan.top_outputs]
    with Session(model, threads=1) as s1, Session(model, threads=2, offload_elements=0) as s2:
        sequential = s1.run(fetches, feeds)
        threaded = s2.run(fetches, feeds)
    expected = oracle(plan, feeds)
    for y, a, b in zip(fetches, sequential, threaded):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, expected[y], rtol=1e-12)


_STARTED: list[str] = []


@kernel("Slow", family="amanda/test-threads")
def _slow(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    _STARTED.append(str(attrs.get("tag")))
    time.sleep(float(attrs.get("seconds", 0.05)))
    return (x + 1,)


@kernel("Boom", family="amanda/test-threads")
def _boom(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    time.sleep(float(attrs.get("seconds", 0.0)))
    raise RuntimeError("boom")


def failing_model(chain: int = 10) -> Container:
    """A chain of `chain` slow ops beside one op that fails after 0.05 s."""
    ns = {"namespace": "amanda/test-threads"}
    children = [op("Slow", f"s{i}", ["x"], ["y"], attrs={"tag": f"s{i}", "seconds": 0.05, **ns}) for i in range(chain)]
    children.append(op("Boom", "boom", ["x"], ["y"], attrs={"seconds": 0.05, **ns}))
    edges = [("g:x", "s0:x"), ("g:x", "boom:x"), ("boom:y", "g:b"), (f"s{chain - 1}:y", "g:y")]
    edges += [(f"s{i}:y", f"s{i + 1}:x") for i in range(chain - 1)]
    return Container("G", "g", inputs=["x"], outputs=["y", "b"], children=children, edges=edges)


def test_worker_exception_stops_the_run_promptly_and_leaves_no_thread() -> None:
    """A failing op on a worker ends the run long before the slow chain would, nothing new
    starts after it, and closing the session joins every worker."""
    before = threading.active_count()
    _STARTED.clear()
    s = Session(failing_model(), threads=2, offload_elements=0)
    start = time.perf_counter()
    with pytest.raises(ExecutionError, match=r"while executing `boom` \(Boom, amanda/test-threads\) "
                                             r"with inputs float64\[3\]: RuntimeError: boom"):
        s.run(["y", "b"], {"x": np.zeros(3)})
    elapsed = time.perf_counter() - start
    assert elapsed < 0.3, elapsed  # the chain alone takes 0.5 s
    assert len(_STARTED) <= 3, _STARTED
    started = len(_STARTED)
    time.sleep(0.15)
    assert len(_STARTED) == started  # nothing of the failed run is still going
    s.close()
    assert threading.active_count() == before
    # the session still works after a failure (and restarts its workers)
    assert s.run(["s0:y"], {"x": np.zeros(3)})[0].tolist() == [1, 1, 1]
    s.close()
    assert threading.active_count() == before


def test_sequential_failure_stops_at_once() -> None:
    """threads=1 stops at the failing op; later ops never start."""
    _STARTED.clear()
    model = failing_model(3)
    model = model.evolve(children=[model.child("boom"), *(model.child(f"s{i}") for i in range(3))])
    with Session(model, threads=1) as s, pytest.raises(ExecutionError, match="boom"):
        s.run(["b", "y"], {"x": np.zeros(3)})
    # topological order (the earliest ready op in document order first) is boom, s0, s1, s2
    assert _STARTED == []


def test_garbage_collected_session_stops_its_workers() -> None:
    """Dropping a session with started workers stops them, even when its plans hold session
    kernels (whose contexts refer back to the session)."""
    import gc

    before = threading.active_count()
    s = Session(failing_model(2), threads=2, offload_elements=0)
    s.run(["s1:y"], {"x": np.zeros(2)})
    assert threading.active_count() > before
    del s
    gc.collect()
    deadline = time.time() + 2
    while threading.active_count() > before and time.time() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before


def test_session_with_stateful_blas_plan_is_collectable() -> None:
    """A plan holding session kernels (whose contexts refer to the session) and a BLAS tuner
    does not keep its session alive."""
    import gc
    import weakref

    core = {"namespace": "amanda/core"}
    g = Container("G", "g", inputs=["x"], outputs=["y", "v"], attrs=NS, children=[
        op("MatMul", "m", ["A", "B"], ["Y"]),
        op("Variable", "w", outputs=["ref"], attrs={"value": np.float32(1), **core}),
        op("Read", "r", ["ref"], ["value"], attrs=core)],
        edges=[("g:x", "m:A"), ("g:x", "m:B"), ("m:Y", "g:y"), ("w:ref", "r:ref"), ("r:value", "g:v")])
    s = Session(g)
    for _ in range(3):
        s.run(["y", "v"], {"x": np.eye(3)})
    ref = weakref.ref(s)
    del s
    gc.collect()
    assert ref() is None


def two_chains(n: int = 8, size: int = 8) -> Container:
    """Two independent chains of n MatMuls joined by an Add."""
    children, edges = [], []
    for c in "ab":
        for i in range(n):
            children.append(op("MatMul", f"{c}{i}", ["A", "B"], ["Y"]))
            edges.append((f"g:w{c}", f"{c}{i}:B"))
            edges.append((f"g:x{c}" if i == 0 else f"{c}{i - 1}:Y", f"{c}{i}:A"))
    children.append(op("Add", "join", ["A", "B"], ["C"]))
    edges += [(f"a{n - 1}:Y", "join:A"), (f"b{n - 1}:Y", "join:B"), ("join:C", "g:y")]
    return Container("G", "g", inputs=["xa", "xb", "wa", "wb"], outputs=["y"], children=children,
                     edges=edges, attrs=NS)


def chain(n: int = 4) -> Container:
    children = [op("MatMul", f"m{i}", ["A", "B"], ["Y"]) for i in range(n)]
    edges = [("g:w", f"m{i}:B") for i in range(n)] + [("g:x", "m0:A"), (f"m{n - 1}:Y", "g:y")]
    edges += [(f"m{i}:Y", f"m{i + 1}:A") for i in range(n - 1)]
    return Container("G", "g", inputs=["x", "w"], outputs=["y"], children=children, edges=edges, attrs=NS)


def test_auto_threads_choose_by_parallel_heavy_work() -> None:
    """threads=None runs independent product chains threaded and a single chain sequentially;
    explicit thread counts are obeyed."""
    from amanda.exec.runner import Runner

    wide, narrow = Session(two_chains()), Session(chain())
    p_wide, p_narrow = wide.plan(["y"], ["xa", "xb", "wa", "wb"]), narrow.plan(["y"], ["x", "w"])
    assert p_wide.schedule.parallel and not p_narrow.schedule.parallel
    auto = Runner(None)
    if auto.budget > 1:
        assert auto.mode(p_wide) == THREADED
    assert auto.mode(p_narrow) == SEQUENTIAL
    assert Runner(1).mode(p_wide) == SEQUENTIAL
    assert Runner(2).mode(p_narrow) == THREADED


@pytest.mark.parametrize("threads", [None, 1, 2])
def test_two_chains_agree(threads: int | None) -> None:
    """The product chains give the same result whatever the thread setting."""
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal((8, 8)) * 0.3 for k in ("xa", "xb", "wa", "wb")}
    expected = feeds["xa"].copy()
    other = feeds["xb"].copy()
    for _ in range(8):
        expected, other = expected @ feeds["wa"], other @ feeds["wb"]
    with Session(two_chains(), threads=threads) as s:
        np.testing.assert_allclose(s.run(["y"], feeds)[0], expected + other, rtol=1e-10)


def test_blas_threads_are_set_for_the_block_and_restored() -> None:
    """blas_threads sets every BLAS library's thread count inside the block only."""
    libs = _blas_libraries()
    if not libs:
        pytest.skip("no BLAS library visible to threadpoolctl")
    before = [lib.get_num_threads() for lib in libs]
    with blas_threads(1):
        assert all(lib.get_num_threads() == 1 for lib in libs)
    assert [lib.get_num_threads() for lib in libs] == before


def test_blas_tuner_probes_then_follows_the_faster_count() -> None:
    """The tuner probes both counts in its first runs, keeps the faster count, and retries the
    other every RETRY runs, switching when that one became faster."""
    from amanda.exec.runner import BlasTuner

    tuner = BlasTuner(4, load=lambda: None)  # timing alone decides
    assert [tuner.probe(i) for i in range(tuner.PROBES)] == [1, 4, 4, 4, 1, 1, 1]
    for _ in range(tuner.PROBES):
        count = tuner.next()
        tuner.record(count, 1.0 if count == 4 else 2.0)
    assert tuner.next() == 4
    while tuner.next() == 4:
        tuner.record(4, 1.0)
    assert tuner.runs == tuner.RETRY  # the retry of the other count
    for _ in range(20):  # the machine got busy: 4 threads now slow, 1 thread fast
        count = tuner.next()
        tuner.record(count, 0.5 if count == 1 else 3.0)
    assert tuner.next() == 1


def test_auto_session_tunes_blas_on_sequential_plans() -> None:
    """threads=None on a product chain records BLAS timings per plan and keeps agreeing
    with threads=1."""
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((16, 16)), "w": rng.standard_normal((16, 16)) * 0.2}
    with Session(chain(), threads=None) as auto, Session(chain(), threads=1) as one:
        expected = one.run(["y"], feeds)[0]
        for _ in range(6):
            # BLAS may block differently with more threads: equal up to rounding
            np.testing.assert_allclose(auto.run(["y"], feeds)[0], expected, rtol=1e-12)
        tuner = auto.plan(["y"], feeds).tuner  # the plan of these feeds' types
    if auto._runner.budget > 1:
        assert tuner.runs == 6
