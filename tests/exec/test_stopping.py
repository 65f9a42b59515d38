"""A threaded run with many ready heavy steps stops promptly after a kernel error or an
interrupt: no new op starts, the error arrives within the time of the ops already running,
and the session stays usable."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from amanda import Container, op
from amanda.errors import ExecutionError
from amanda.exec import Session
from amanda.exec.kernels.registry import kernel

NS = {"namespace": "amanda/test-stopping"}
OP_SECONDS = 0.1
_LOG: list[tuple[str, float]] = []  # (tag, start time) of every op that started
_FAILED_AT: list[float] = []


@kernel("Snooze", family="amanda/test-stopping")
def _snooze(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    _LOG.append((str(attrs["tag"]), time.perf_counter()))
    time.sleep(OP_SECONDS)
    return (x + 1,)


@kernel("Fail", family="amanda/test-stopping")
def _fail(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    _LOG.append((str(attrs["tag"]), time.perf_counter()))
    time.sleep(OP_SECONDS / 2)
    _FAILED_AT.append(time.perf_counter())
    if attrs.get("interrupt"):
        raise KeyboardInterrupt
    raise RuntimeError("failed on purpose")


def wide(n: int = 40, failing: int | None = 2, interrupt: bool = False) -> Container:
    """``n`` independent 0.1 s ops reading x (op ``failing`` fails after 0.05 s)."""
    children = []
    for i in range(n):
        kind = "Fail" if i == failing else "Snooze"
        attrs = {"tag": f"op{i}", **NS, **({"interrupt": True} if interrupt and i == failing else {})}
        children.append(op(kind, f"op{i}", ["x"], ["y"], attrs=attrs))
    edges = [("g:x", f"op{i}:x") for i in range(n)] + [(f"op{i}:y", f"g:y{i}") for i in range(n)]
    return Container("G", "g", inputs=["x"], outputs=[f"y{i}" for i in range(n)], children=children, edges=edges)


FETCHES = [f"y{i}" for i in range(40)]


def _reset() -> None:
    _LOG.clear()
    _FAILED_AT.clear()


@pytest.mark.parametrize("failing", [0, 2, 9])
def test_kernel_error_among_many_ready_heavy_ops_stops_the_run_promptly(failing: int) -> None:
    """When one of 40 ready 0.1 s ops fails on a worker, no op starts after the failure and the
    error (naming the op) arrives within one op's time, not after the 4 s the run would take."""
    _reset()
    with Session(wide(failing=failing), threads=2, offload_elements=0) as s:
        start = time.perf_counter()
        with pytest.raises(ExecutionError, match=rf"while executing `op{failing}` \(Fail, amanda/test-stopping\)"):
            s.run(FETCHES, {"x": np.zeros(2)})
        arrived = time.perf_counter()
        failed_at = _FAILED_AT[0]
        assert arrived - failed_at < OP_SECONDS + 0.4, arrived - failed_at  # time-to-error after the failure
        assert arrived - start < 2.0, arrived - start
        assert not [tag for tag, t in _LOG if t > failed_at], _LOG
        started = len(_LOG)
        time.sleep(2 * OP_SECONDS)
        assert len(_LOG) == started  # nothing of the failed run is still going
        assert s.run(["y5"], {"x": np.zeros(2)})[0].tolist() == [1, 1]  # usable


def test_keyboard_interrupt_raised_by_a_kernel_passes_through_promptly() -> None:
    """A kernel raising KeyboardInterrupt on a worker ends the run with that KeyboardInterrupt
    (unwrapped) within one op's time, starting nothing after it."""
    _reset()
    with Session(wide(failing=2, interrupt=True), threads=2, offload_elements=0) as s:
        with pytest.raises(KeyboardInterrupt):
            s.run(FETCHES, {"x": np.zeros(2)})
        arrived = time.perf_counter()
        assert arrived - _FAILED_AT[0] < OP_SECONDS + 0.4
        assert not [tag for tag, t in _LOG if t > _FAILED_AT[0]], _LOG
        assert s.run(["y7"], {"x": np.zeros(2)})[0].tolist() == [1, 1]


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals go to the main thread")
def test_ctrl_c_while_waiting_for_workers_stops_the_run_promptly() -> None:
    """A SIGINT delivered to the main thread while it waits for workers raises KeyboardInterrupt
    within the time of the ops already running, and starts nothing after it."""
    _reset()
    main = threading.main_thread().ident
    assert main is not None
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.25, signal.pthread_kill, (main, signal.SIGINT))
    try:
        with Session(wide(failing=None), threads=2, offload_elements=0) as s:
            sent = time.perf_counter() + 0.25
            timer.start()
            with pytest.raises(KeyboardInterrupt):
                s.run(FETCHES, {"x": np.zeros(2)})
            arrived = time.perf_counter()
            assert arrived - sent < OP_SECONDS + 0.4, arrived - sent
            assert len(_LOG) <= 8, _LOG  # 2 ops per 0.1 s: about 6 by 0.25 s, never the 40
            started = len(_LOG)
            time.sleep(2 * OP_SECONDS)
            assert len(_LOG) == started
            assert s.run(["y3"], {"x": np.zeros(2)})[0].tolist() == [1, 1]
    finally:
        timer.join()
        signal.signal(signal.SIGINT, previous)
