"""Session and Session.run check their arguments and raise ExecutionErrors that say what was
expected, never a raw TypeError, AttributeError or StopIteration."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from amanda import Container, op
from amanda.errors import AmandaError, ExecutionError
from amanda.exec import Session

NS = {"namespace": "amanda/onnx/17"}
X = np.array([-1.0, 2.0], np.float32)


def relu() -> Container:
    return Container("G", "g", inputs=["x"], outputs=["y"], attrs=NS, children=[op("Relu", "r", ["X"], ["Y"])],
                     edges=[("g:x", "r:X"), ("r:Y", "g:y")])


@pytest.mark.parametrize("fetches, feeds, phase, expected", [
    (["y"], 5, None, r"feeds: expected a mapping \{name: value\} or None, found int 5"),
    (["y"], [("x", X)], None, r"feeds: expected a mapping"),
    (5, {"x": X}, None, r"fetches: expected a list or tuple of names, or one name as a string, found int 5"),
    (None, {"x": X}, None, r"fetches: expected a list or tuple"),
    ({"y"}, {"x": X}, None, r"fetches: expected a list or tuple"),
    ([5], {"x": X}, None, r"fetch: expected a name 'y', an endpoint 'op:port' or a \(path, port\) pair, found int 5"),
    ([("r",)], {"x": X}, None, r"fetch: expected a name"),
    ([("r", ["Y"])], {"x": X}, None, r"fetch: expected a hashable name"),
    (["y"], {5: X}, None, r"feed: expected a name"),
    (["y"], {"x": X}, ["train"], r"phase: expected None or a hashable value such as 'train', found list"),
    (["y"], {"x": X}, {"p": 1}, r"phase: expected None or a hashable value"),
    ([object()], {"x": X}, None, r"fetch: expected a name"),
    (["r:Q"], {"x": X}, None, r"expected a port of `r` \(X, Y\), found 'Q'"),
    (["nowhere:Y"], {"x": X}, None, r"expected an existing op path, found 'nowhere'"),
    ([("r", "Y", 3)], {"x": X}, None, r"fetch: expected a name"),
])
def test_bad_run_arguments_raise_execution_errors(fetches: object, feeds: object, phase: object, expected: str) -> None:
    """Each malformed fetches, feeds or phase argument raises an ExecutionError saying what was expected."""
    with Session(relu()) as s:
        with pytest.raises(ExecutionError, match=expected):
            s.run(fetches, feeds, phase)  # type: ignore[arg-type]
        np.testing.assert_array_equal(s.run(["y"], {"x": X})[0], [0, 2])  # still usable


def test_plan_checks_its_arguments_too() -> None:
    """Session.plan, also public, refuses the same malformed arguments."""
    s = Session(relu())
    with pytest.raises(ExecutionError, match="fetches: expected"):
        s.plan(7)  # type: ignore[arg-type]
    with pytest.raises(ExecutionError, match="phase: expected"):
        s.plan(["y"], ["x"], phase=[1])


@pytest.mark.parametrize("kwargs, expected", [
    ({"model": 5}, r"model: expected a Container, found int 5"),
    ({"model": "g.yaml"}, r"model: expected a Container"),
    ({"threads": 0}, r"threads: expected None or an int from 1 to 1024, found 0"),
    ({"threads": 1.5}, r"threads: expected None or an int from 1 to 1024"),
    ({"threads": True}, r"threads: expected None or an int from 1 to 1024"),
    ({"threads": 10**6}, r"threads: expected None or an int from 1 to 1024, found 1000000"),
    ({"optimize": np.ones(2, bool)}, r"optimize: expected True or False \(or a pipeline function\), found ndarray"),
    ({"offload_elements": -1}, r"offload_elements: expected a non-negative int"),
    ({"offload_elements": "big"}, r"offload_elements: expected a non-negative int"),
    ({"max_loop_iterations": -1}, r"max_loop_iterations: expected None or a non-negative int"),
    ({"max_loop_iterations": 2.0}, r"max_loop_iterations: expected None or a non-negative int"),
])
def test_bad_session_arguments_raise_execution_errors(kwargs: dict, expected: str) -> None:
    """Each malformed Session argument raises an ExecutionError (an AmandaError) saying what was expected."""
    model = kwargs.pop("model", relu())
    with pytest.raises(ExecutionError, match=expected) as info:
        Session(model, **kwargs)
    assert isinstance(info.value, AmandaError)


def test_numpy_integers_are_accepted_where_ints_are() -> None:
    """numpy integers count as ints for threads, offload_elements and max_loop_iterations."""
    s = Session(relu(), threads=np.int64(1), offload_elements=np.int32(0), max_loop_iterations=np.int64(5))
    assert s.threads == 1 and s.max_loop_iterations == 5
    np.testing.assert_array_equal(s.run("y", {"x": X})[0], [0, 2])


def test_a_worker_the_system_refuses_is_an_execution_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the operating system refuses to start a worker thread, the run raises an
    ExecutionError naming ``threads`` and the workers already started are stopped."""
    started: list[threading.Thread] = []
    real = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        if thread.name.startswith("amanda-worker-"):
            if len(started) == 2:
                raise RuntimeError("can't start new thread")
            started.append(thread)
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    two = Container("G", "g", inputs=["x"], outputs=["y", "z"], attrs=NS,
                    children=[op("Relu", "r", ["X"], ["Y"]), op("Neg", "n", ["X"], ["Y"])],
                    edges=[("g:x", "r:X"), ("g:x", "n:X"), ("r:Y", "g:y"), ("n:Y", "g:z")])
    with Session(two, threads=4, offload_elements=0, optimize=False) as s:
        with pytest.raises(ExecutionError, match="threads: cannot start worker 3 of 4"):
            s.run(["y", "z"], {"x": X})
    assert len(started) == 2
    for thread in started:
        thread.join(5)
        assert not thread.is_alive()
