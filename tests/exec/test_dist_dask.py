"""The Dask backend: a model split over two devices runs on two worker processes and gives
what a local Session and onnxruntime give; variables stay on their worker across runs and
survive a worker that dies; a kernel error on a worker arrives with the op's path."""

from __future__ import annotations

import importlib
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")
distributed = pytest.importorskip("distributed")

import amanda  # noqa: E402
from amanda.errors import ExecutionError  # noqa: E402
from amanda.exec import Session  # noqa: E402
from amanda.exec.dist import dask_backend, devices_of  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402
from tests.exec.dist_faults import FAULTS  # noqa: E402
from tests.fixtures.onnx import onnx_models as models  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=None, silence_logs=50)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def halves(model: amanda.Container) -> amanda.Container:
    """``model`` with its first half of ops on ``worker-0``, the rest on ``worker-1``."""
    paths = list(amanda.flatten(model).ops)
    first = paths[: len(paths) // 2]
    placed = amanda.with_attrs(model, first, device="worker-0")
    return amanda.with_attrs(placed, paths[len(paths) // 2:], device="worker-1")


@pytest.mark.parametrize("name", ["mlp", "cnn", "attention"])
def test_a_split_model_on_two_workers_computes_what_onnxruntime_does(client, name: str) -> None:
    """Each half runs on its own worker process, and the fetches equal a local Session's and
    onnxruntime's, run after run."""
    proto = models.BUILDERS[name]()
    model = halves(from_onnx(proto))
    feeds = models.feeds(name)
    outputs = [o.name for o in proto.graph.output]
    expected = models.run(proto, feeds)
    local = Session(model).run(outputs, feeds)
    with Session(model, client=client) as session:
        for _ in range(2):
            got = session.run(outputs, feeds)
            for a, b, c in zip(got, local, expected):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
                np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5)
        workers = session._remote.workers
    assert sorted(workers) == ["worker-0", "worker-1"] and len(set(workers.values())) == 2


def counter(device: str = "worker-0", *, faulty: bool = False, slow: float = 0.0) -> amanda.Container:
    """A variable on ``device`` that each run raises by 2 (``v``), beside an op on ``worker-1``
    that doubles the feed ``x`` (``y``); ``faulty`` puts an ExitIf on the variable's device,
    ``slow`` a Sleep of that many seconds on ``worker-1`` (output ``late``)."""
    core = {"namespace": "amanda/core", "device": device}
    onnx = {"namespace": "amanda/onnx/17", "device": "worker-1"}
    children = [
        amanda.op("Variable", "w", outputs=["ref"], attrs={**core, "value": np.float32(1)}),
        amanda.op("AssignAdd", "inc", inputs=["ref", "delta"], outputs=["value"], attrs=core),
        amanda.op("Constant", "two", outputs=["output"], attrs={**onnx, "value": np.float32(2)}),
        amanda.op("Add", "double", inputs=["A", "B"], outputs=["C"], attrs=onnx),
    ]
    edges = [("w:ref", "inc:ref"), ("two:output", "inc:delta"), ("g:x", "double:A"), ("g:x", "double:B"),
             ("inc:value", "g:v")]
    if faulty:
        children.append(amanda.op("ExitIf", "crash", inputs=["x"], outputs=["y"],
                                  attrs={"namespace": FAULTS, "device": device}))
        edges += [("double:C", "crash:x"), ("crash:y", "g:y")]
    else:
        edges.append(("double:C", "g:y"))
    outputs = ["v", "y"]
    if slow:
        children.append(amanda.op("Sleep", "slow", inputs=["x"], outputs=["y"],
                                  attrs={"namespace": FAULTS, "device": "worker-1", "seconds": slow}))
        edges += [("double:C", "slow:x"), ("slow:y", "g:late")]
        outputs.append("late")
    return amanda.Container("G", "g", inputs=["x"], outputs=outputs, children=children, edges=edges)


def test_variables_stay_on_their_worker_across_runs(client) -> None:
    """A variable is updated on its device's worker run after run, and the client's
    checkpoint (Session.state) follows it; a large feed reaches its worker; closing drops
    the variables from the worker."""
    model = counter()
    one = np.ones(2, np.float32)
    with Session(model, client=client) as session:
        np.testing.assert_array_equal(session.run(["y"], {"x": one})[0], one * 2)  # worker-1 only
        got = [float(session.run(["v"], {"x": one})[0]) for _ in range(3)]
        assert got == [3.0, 5.0, 7.0]
        key = amanda.flatten(model).ops[("w",)].uid
        assert float(session.state[key]) == 7.0
        address = session._remote.workers["worker-0"]
        held = client.run(lambda: {k[1]: {n: float(v) for n, v in d.state.items()}
                                   for k, d in dask_backend._DEVICES.items()}, workers=[address])
        assert held[address]["worker-0"] == {key: 7.0}
        big = np.arange(40_000, dtype=np.float32)  # past SCATTER_BYTES: sent straight to its worker
        y, v = session.run(["y", "v"], {"x": big})
        np.testing.assert_array_equal(y, big * 2)
        assert float(v) == 9.0
        session_id = session._remote.id
    left = client.run(lambda: sorted(k[1] for k in dask_backend._DEVICES if k[0] == session_id))
    assert all(devices == [] for devices in left.values())


def test_a_kernel_error_on_a_worker_names_the_op_as_locally(client) -> None:
    """A kernel failing on a worker raises the ExecutionError a local Session raises, with the
    op's path, and the session stays usable."""
    model = counter()
    words = np.array([b"a", b"b"])  # the port declares no type; Add fails on bytes
    with Session(model, client=client) as session:
        with pytest.raises(ExecutionError) as remote:
            session.run(["y", "v"], {"x": words})
        with pytest.raises(ExecutionError) as local:
            Session(model).run(["y", "v"], {"x": words})
        assert str(remote.value) == str(local.value)
        assert str(remote.value).startswith("while executing `double` (Add, amanda/onnx/17)")
        assert float(session.run(["v"], {"x": words})[0]) == 3.0


def test_a_worker_that_dies_mid_run_names_part_and_worker_and_loses_no_state(client) -> None:
    """When the worker holding a variable dies during a run, the run raises an ExecutionError
    naming the part and the worker; the next runs go on from the last successful run's
    variables, on the workers that are left or restarted."""
    client.run(importlib.import_module, "tests.exec.dist_faults")
    model = counter("worker-0", faulty=True)
    assert devices_of(model)[("crash",)] == "worker-0"
    with Session(model, client=client) as session:
        assert float(session.run(["v", "y"], {"x": -np.ones(2, np.float32)})[0]) == 3.0
        address = session._remote.workers["worker-0"]
        with pytest.raises(ExecutionError) as info:
            session.run(["v", "y"], {"x": np.ones(2, np.float32)})
        message = str(info.value)
        assert "worker-0/" in message and address in message
        got = [float(session.run(["v"], {"x": -np.ones(2, np.float32)})[0]) for _ in range(2)]
        assert got == [5.0, 7.0]


def test_map_blocks_computes_each_block_on_the_workers(client) -> None:
    """amanda.dask.map_blocks gives, block by block on the workers, what onnxruntime gives
    for the whole input, and a worker compiles the model once, not once per block."""
    import dask.array as da

    import amanda.dask

    proto = models.mlp()
    model = from_onnx(proto)
    x = np.random.default_rng(1).standard_normal((40, 8)).astype(np.float32)
    lazy = amanda.dask.map_blocks(model, da.from_array(x, chunks=(5, 4)), client=client)
    assert lazy.chunks[0] == (5,) * 8
    got = lazy.compute()
    np.testing.assert_allclose(got, models.run(proto, {proto.graph.input[0].name: x})[0], rtol=1e-4, atol=1e-5)
    compiled = client.run(lambda: len(amanda.dask._SESSIONS))
    assert set(compiled.values()) <= {0, 1} and sum(compiled.values()) >= 1


def test_map_blocks_and_sessions_reject_bad_arguments(client) -> None:
    """A model with no output named, a numpy array for a dask one, a client that is not one
    and a device mapped to no worker are errors that say what was expected."""
    import dask.array as da

    import amanda.dask

    model = counter()
    with pytest.raises(amanda.ArgumentError, match="output"):
        amanda.dask.map_blocks(model, da.ones(4))
    with pytest.raises(amanda.ArgumentError, match="dask array"):
        amanda.dask.map_blocks(model, np.ones(4), output="y")
    with pytest.raises(ExecutionError, match="Client"):
        Session(model, client="tcp://nowhere")
    with Session(model, client=client, devices={"worker-1": "no-such-worker"}) as session:
        with pytest.raises(ExecutionError, match="no-such-worker"):
            session.run(["y"], {"x": np.ones(2, np.float32)})


def test_a_run_past_its_timeout_raises_and_rolls_its_variables_back(client) -> None:
    """A distributed run that outlasts run(timeout=...) raises an ExecutionError about the
    timeout, and the next run starts from the variables of the last successful run."""
    client.run(importlib.import_module, "tests.exec.dist_faults")
    model = counter(slow=1.0)
    with Session(model, client=client) as session:
        one = np.ones(2, np.float32)
        assert float(session.run(["v"], {"x": one})[0]) == 3.0
        with pytest.raises(ExecutionError, match="timeout"):
            session.run(["v", "late"], {"x": one}, timeout=0.2)
        assert float(session.run(["v"], {"x": one})[0]) == 5.0


def slow_chain(steps: int, seconds: float) -> amanda.Container:
    """``y = 2x`` on worker-1, and ``late``: ``y`` through ``steps`` Sleep ops of ``seconds`` each, there too."""
    onnx = {"namespace": "amanda/onnx/17", "device": "worker-1"}
    children = [amanda.op("Add", "double", inputs=["A", "B"], outputs=["C"], attrs=onnx)]
    edges = [("g:x", "double:A"), ("g:x", "double:B"), ("double:C", "g:y")]
    previous = "double:C"
    for i in range(steps):
        children.append(amanda.op("Sleep", f"s{i}", inputs=["x"], outputs=["y"],
                                  attrs={"namespace": FAULTS, "device": "worker-1", "seconds": seconds}))
        edges.append((previous, f"s{i}:x"))
        previous = f"s{i}:y"
    edges.append((previous, "g:late"))
    return amanda.Container("G", "g", inputs=["x"], outputs=["y", "late"], children=children, edges=edges)


def test_a_timed_out_part_stops_on_its_worker_and_the_next_run_does_not_wait(client) -> None:
    """A part of forty 0.1 s ops timed out after 0.3 s starts no op after the deadline on its worker (one
    thread), so the next run on that worker ends in well under the 3.7 s the part had left."""
    client.run(importlib.import_module, "tests.exec.dist_faults")
    one = np.ones(2, np.float32)
    with Session(slow_chain(40, 0.1), client=client) as session:
        session.run(["y"], {"x": one})
        started = time.perf_counter()
        with pytest.raises(ExecutionError, match="timeout"):
            session.run(["y", "late"], {"x": one}, timeout=0.3)
        assert time.perf_counter() - started < 2.0
        started = time.perf_counter()
        np.testing.assert_array_equal(session.run(["y"], {"x": one})[0], 2 * one)
        assert time.perf_counter() - started < 2.5  # the orphan would hold the worker 3.7 s


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(choices=st.lists(st.integers(0, 2), min_size=21, max_size=21))
def test_any_placement_over_three_devices_on_two_workers_computes_the_model(client, choices: list[int]) -> None:
    """Whatever device each op of the CNN gets (three devices sharing two workers), the
    distributed run gives onnxruntime's outputs."""
    proto = models.cnn()
    model = from_onnx(proto)
    for path, choice in zip(amanda.flatten(model).ops, choices):
        model = amanda.with_attrs(model, [path], device=f"dev-{choice}")
    feeds = models.feeds("cnn")
    outputs = [o.name for o in proto.graph.output]
    with Session(model, client=client) as session:
        for got, want in zip(session.run(outputs, feeds), models.run(proto, feeds)):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
