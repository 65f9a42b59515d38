"""A session's BLAS thread limit holds whichever Python thread calls run: the limit a kernel
sees inside a run is the session's, from the main thread and from any other thread."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from amanda import Container, op
from amanda.exec import Session, blas
from amanda.exec.blas import BlasTuner
from amanda.exec.kernels.registry import kernel
from amanda.exec.load import runnable_tasks, spare_cores
from amanda.exec.runner import _blas_libraries, blas_threads

LIBS = _blas_libraries()
pytestmark = pytest.mark.skipif(not LIBS, reason="no BLAS library visible to threadpoolctl")
_SEEN: list[list[int]] = []


@kernel("BlasProbe", family="amanda/test-blas")
def _probe(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    _SEEN.append([lib.get_num_threads() for lib in LIBS])
    return (x,)


def probed_products(n: int = 4) -> Container:
    """A chain of n 256x256 MatMuls (so the plan uses BLAS) followed by a probe of the BLAS limit."""
    children = [op("MatMul", f"m{i}", ["A", "B"], ["Y"]) for i in range(n)]
    children.append(op("BlasProbe", "probe", ["x"], ["y"], attrs={"namespace": "amanda/test-blas"}))
    edges = [("g:w", f"m{i}:B") for i in range(n)] + [("g:x", "m0:A"), (f"m{n - 1}:Y", "probe:x"), ("probe:y", "g:y")]
    edges += [(f"m{i}:Y", f"m{i + 1}:A") for i in range(n - 1)]
    return Container("G", "g", inputs=["x", "w"], outputs=["y"], children=children, edges=edges,
                     attrs={"namespace": "amanda/onnx/17"})


def feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {"x": rng.standard_normal((256, 256)).astype(np.float32),
            "w": (rng.standard_normal((256, 256)) / 16).astype(np.float32)}


def in_thread(fn: Any) -> Any:
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(fn()))
    worker.start()
    worker.join()
    return out[0]


def test_threads_1_limits_blas_from_a_worker_thread_too() -> None:
    """After the main thread has set BLAS limits (so threadpoolctl made it the controlling
    thread), a threads=1 run from another thread still runs its kernels with one BLAS thread,
    and the previous limit is back after the run, on either thread."""
    before = [lib.get_num_threads() for lib in LIBS]
    with blas_threads(1):  # the main thread takes threadpoolctl's control, as a run on it would
        pass
    _SEEN.clear()
    with Session(probed_products(), threads=1) as s:
        in_thread(lambda: s.run(["y"], feeds()))
        s.run(["y"], feeds())
    assert _SEEN == [[1] * len(LIBS)] * 2
    assert [lib.get_num_threads() for lib in LIBS] == before
    with blas_threads(1):  # and the main thread can still set limits afterwards
        assert all(lib.get_num_threads() == 1 for lib in LIBS)
    assert [lib.get_num_threads() for lib in LIBS] == before


def test_threads_1_gives_the_same_bits_on_any_thread() -> None:
    """A threads=1 product chain gives bit-identical results run from the main thread and from a
    worker thread, equal (up to rounding) to plain numpy."""
    with Session(probed_products(8), threads=1) as s:
        main = s.run(["y"], feeds())[0]
        other = in_thread(lambda: s.run(["y"], feeds())[0])
    np.testing.assert_array_equal(main, other)
    f = feeds()
    expected = f["x"]
    for _ in range(8):
        expected = expected @ f["w"]
    np.testing.assert_allclose(main, expected, rtol=1e-4, atol=1e-6)


def unknown_load() -> None:
    """No load figure (as off Linux): the tuner judges by timing alone."""
    return None


def _probed(tuner: Any, budget_seconds: float, single_seconds: float) -> None:
    for _ in range(tuner.PROBES):  # the warm-up probe's time is not recorded, whatever it is
        count = tuner.next()
        tuner.record(count, budget_seconds if count != 1 else single_seconds)


def test_blas_tuner_keeps_the_budget_only_when_clearly_faster() -> None:
    """Multi-threaded BLAS is chosen only when its median beats one thread's by the margin (its gain is bounded,
    its stalls are not)."""
    tuner = BlasTuner(2, load=unknown_load)
    _probed(tuner, 0.95, 1.0)
    assert tuner.next() == 1
    tuner = BlasTuner(2, load=unknown_load)
    _probed(tuner, 0.5, 1.0)
    assert tuner.next() == 2


def test_blas_tuner_leaves_a_stalling_budget_after_two_runs() -> None:
    """Two runs in a row with the budget over STALL times one thread's median switch to one thread at once; a
    single slow run (threads waking after an idle spell) does not."""
    tuner = BlasTuner(2, load=unknown_load)
    _probed(tuner, 0.5, 1.0)
    tuner.record(tuner.next(), 30.0)
    assert tuner.next() == 2
    tuner.record(tuner.next(), 0.5)
    tuner.record(tuner.next(), 30.0)
    assert tuner.next() == 2
    tuner.record(tuner.next(), 30.0)
    assert tuner.next() == 1


def test_blas_tuner_backs_off_retries_that_lose_and_resets_when_one_wins() -> None:
    """Each losing retry of the other count doubles the wait before the next (up to MAX_RETRY); a winning retry
    switches and restores the short wait."""
    tuner = BlasTuner(2, load=unknown_load)
    _probed(tuner, 0.5, 1.0)
    waits = []
    for _ in range(6):
        start = tuner.runs
        while tuner.next() == 2:
            tuner.record(2, 0.5)
        waits.append(tuner.runs - start)
        tuner.record(1, 1.0)  # the retry's warm-up run, not judged
        tuner.record(1, 1.0)  # the retry of one thread loses
    assert waits[1:] == [100, 200, 400, 800, 800]
    while tuner.next() == 2:
        tuner.record(2, 0.5)
    for _ in range(10):  # the machine got busy: one thread wins its retries (each after a warm-up run)
        tuner.record(1, 0.2)
    assert tuner.next() == 1 and tuner.wait == tuner.RETRY


def test_blas_tuner_does_not_return_to_the_budget_on_its_old_runs() -> None:
    """Slower one-thread runs (a busier machine) do not bring back the budget on its runs from before the load:
    only a retry of the budget can."""
    tuner = BlasTuner(2, load=unknown_load)
    _probed(tuner, 0.95, 1.0)
    assert tuner.next() == 1
    for _ in range(5):
        tuner.record(1, 3.0)
    assert tuner.next() == 1


def test_a_plans_first_run_uses_one_blas_thread_untimed(monkeypatch: pytest.MonkeyPatch) -> None:
    """threads=None runs a new plan's first run with one BLAS thread and keeps no timing of it; probes follow,
    the budget's first probe only waking its threads."""
    monkeypatch.setattr(blas, "runnable_tasks", unknown_load)  # whatever else this machine runs
    seen: list[int] = []

    @kernel("BlasThreadsSeen", family="amanda/test-tuner", heavy=True)
    def spy(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
        seen.append(LIBS[0].get_num_threads() if LIBS else 1)
        return (x @ x,)

    model = Container(None, "g", inputs=["x"], outputs=["y"], children=[
        op("BlasThreadsSeen", "s", ["X"], ["Y"], attrs={"namespace": "amanda/test-tuner"})],
        edges=[("g:x", "s:X"), ("s:Y", "g:y")])
    x = np.eye(4)
    with Session(model, threads=None) as session:
        if session._runner.budget == 1:
            pytest.skip("one core: no BLAS tuning")
        for _ in range(3):
            session.run(["y"], {"x": x})
        tuner = session.plan(["y"], {"x": x}).tuner
    assert seen[:3] == [1, 2, 2] or not LIBS
    # the untimed first run and the budget's wake-up run are not recorded
    assert tuner.runs == 3 and sum(len(d) for d in tuner.recent.values()) == 1


def test_a_retry_is_judged_on_its_second_run_not_the_wake_up() -> None:
    """A retry of the budget whose first run stalls (threads waking) but whose second run wins switches to the
    budget, dropping the budget's older stalled runs; the stalled first run is not recorded."""
    tuner = BlasTuner(2, load=unknown_load)
    _probed(tuner, 3.0, 1.0)  # the budget stalled while probing
    assert tuner.next() == 1
    while tuner.next() == 1:
        tuner.record(1, 1.0)
    tuner.record(2, 9.0)  # waking the second thread
    assert tuner.next() == 2, "the retry goes on for its judged run"
    tuner.record(2, 0.5)
    assert tuner.next() == 2 and list(tuner.recent[2]) == [0.5]


def test_the_budgets_wake_up_probe_is_not_judged() -> None:
    """The first budget probe follows a one-thread run and wakes sleeping threads: however slow it is, it does
    not count against the budget."""
    tuner = BlasTuner(2, load=unknown_load)
    for _ in range(tuner.PROBES):
        count = tuner.next()
        first_budget = count == 2 and tuner.runs == tuner.WARM_UP
        tuner.record(count, 50.0 if first_budget else (0.5 if count == 2 else 1.0))
    assert list(tuner.recent[2]) == [0.5, 0.5] and tuner.next() == 2


def test_a_budget_whose_probes_stalled_is_retried_soon() -> None:
    """Two stalled budget probes choose one thread, but the budget is tried again FIRST_RETRY runs later (not
    RETRY), and a winning retry takes it; a budget that won its probes waits the full RETRY for its retry."""
    tuner = BlasTuner(2, load=unknown_load)
    _probed(tuner, 3.0, 1.0)
    assert tuner.next() == 1
    while tuner.next() == 1:
        tuner.record(1, 1.0)
    assert tuner.runs == tuner.PROBES + tuner.FIRST_RETRY < tuner.RETRY
    tuner.record(2, 4.0)  # the retry's warm-up run
    tuner.record(2, 0.5)
    assert tuner.next() == 2
    tuner = BlasTuner(2, load=unknown_load)
    _probed(tuner, 0.5, 1.0)
    assert tuner.retry_at == tuner.RETRY


def _run_tuner(tuner: BlasTuner, runs: int, single: float = 1.0, budget: float = 0.5) -> list[int]:
    counts = []
    for _ in range(runs):
        count = tuner.next()
        counts.append(count)
        tuner.record(count, budget if count != 1 else single)
    return counts


def test_the_budget_is_never_tried_while_no_core_is_spare() -> None:
    """On a machine whose other core another task holds, the tuner makes no run with the budget (not even a
    probe: each would stall), however fast the budget would be; once the core is free again it tries the
    budget within FIRST_RETRY plus a few load samples' runs and keeps it when it wins."""
    load = [2]  # this thread and one other task runnable, on two cores
    tuner = BlasTuner(2, load=lambda: load[0], cores=2)
    tuner.skip()
    assert _run_tuner(tuner, 500) == [1] * 500
    assert not tuner.probing and tuner.wait == tuner.RETRY  # skipped tries cost nothing: no back-off
    load[0] = 1
    counts = _run_tuner(tuner, tuner.FIRST_RETRY + tuner.LOAD_EVERY * tuner.LOAD_SAMPLES + 2)
    assert counts[-1] == 2 and tuner.choice == 2
    tuner = BlasTuner(2, load=lambda: 3, cores=4)  # two spare cores on four: the budget may run
    tuner.skip()
    assert 2 in _run_tuner(tuner, tuner.PROBES)


def test_a_crowded_session_runs_every_product_on_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """threads=None on a machine without a spare core sets one BLAS thread for every run, the probes
    included (the kernel reads the limit), and its results are bit-identical run after run."""
    monkeypatch.setattr(blas, "runnable_tasks", lambda: 1 + (os.cpu_count() or 1))
    _SEEN.clear()
    with Session(probed_products(), threads=None) as s:
        if s._runner.budget == 1:
            pytest.skip("one core: no BLAS tuning")
        results = [s.run(["y"], feeds())[0] for _ in range(12)]
    assert _SEEN == [[1] * len(LIBS)] * 12
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


@pytest.mark.skipif(runnable_tasks() is None or not hasattr(os, "sched_setaffinity"),
                    reason="the system gives no runnable-task count")
def test_a_task_spinning_on_every_other_core_leaves_none_spare() -> None:
    """The runnable count the tuner reads sees tasks that hold cores: with one spinning process pinned to each
    core but one, no core is spare (bounded: at most 8 cores, a few tenths of a second)."""
    cores = sorted(os.sched_getaffinity(0))
    if not 2 <= len(cores) <= 8:
        pytest.skip("a spinner per core is for small machines")
    spin = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"
    spinners = [subprocess.Popen([sys.executable, "-c", spin, str(core)]) for core in cores[1:]]
    try:
        time.sleep(0.5)
        samples = [runnable_tasks() for _ in range(5)]
        assert spare_cores([s for s in samples if s is not None], len(cores)) == 0
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def test_a_users_blas_limit_outside_runs_is_restored_and_keeps_threadpoolctl_control() -> None:
    """A limit the user set with threadpoolctl (on the main thread, which threadpoolctl then lets
    alone set OpenBLAS) holds again after each run, from the main thread or another one, and
    the user's own nested limits still take effect after the runs."""
    from threadpoolctl import threadpool_limits

    before = [lib.get_num_threads() for lib in LIBS]
    _SEEN.clear()
    with threadpool_limits(limits=3, user_api="blas"):
        with Session(probed_products(), threads=1) as s:
            s.run(["y"], feeds())
            assert [lib.get_num_threads() for lib in LIBS] == [3] * len(LIBS)
            in_thread(lambda: s.run(["y"], feeds()))
            assert [lib.get_num_threads() for lib in LIBS] == [3] * len(LIBS)
        with threadpool_limits(limits=2, user_api="blas"):
            assert [lib.get_num_threads() for lib in LIBS] == [2] * len(LIBS)
        assert [lib.get_num_threads() for lib in LIBS] == [3] * len(LIBS)
    assert _SEEN == [[1] * len(LIBS)] * 2
    assert [lib.get_num_threads() for lib in LIBS] == before


class _FakeLimit:
    """A BLAS limit that records every set."""

    def __init__(self, count: int) -> None:
        self.count, self.sets = count, []

    def get(self) -> int:
        return self.count

    def put(self, count: int) -> None:
        self.sets.append(count)
        self.count = count


def test_blas_threads_sets_a_limit_only_where_it_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entering with the library's current count sets nothing (one read); another count is set
    on entry and the previous one set back on exit, once each."""
    same, other = _FakeLimit(1), _FakeLimit(4)
    monkeypatch.setattr(blas, "_CONTROLS", ((same.get, same.put), (other.get, other.put)))
    with blas_threads(1):
        assert (same.count, other.count) == (1, 1)
    assert same.sets == [] and other.sets == [1, 4]


def test_openblas_on_pthreads_is_set_without_threadpoolctls_per_call_machinery(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy's OpenBLAS (pthreads) limit is set through the library's own function: threadpoolctl's
    set_num_threads is never called, and the limit inside the block is still the one asked for."""
    pthreads = [lib for lib in LIBS if lib.internal_api == "openblas" and lib.threading_layer != "openmp"]
    if not pthreads:
        pytest.skip("numpy's BLAS here is not OpenBLAS on pthreads")
    calls: list[int] = []
    monkeypatch.setattr(type(pthreads[0]), "set_num_threads", lambda self, n: calls.append(n))
    monkeypatch.setattr(blas, "_CONTROLS", None)  # made again, under the patch
    before = pthreads[0].get_num_threads()
    wanted = 1 if before != 1 else 2
    with blas_threads(wanted):
        assert pthreads[0].get_num_threads() == wanted
    assert pthreads[0].get_num_threads() == before and calls == []


def test_another_blas_library_is_set_through_threadpoolctl() -> None:
    """A library other than OpenBLAS on pthreads (MKL, BLIS, OpenBLAS on OpenMP) is read and set by
    threadpoolctl's controller, which is left with no controlling thread."""
    class Controller:
        internal_api, threading_layer, count, cleared = "mkl", "intel", 8, 0

        def get_num_threads(self) -> int:
            return self.count

        def set_num_threads(self, count: int) -> None:
            self.count = count

        def clear_controlling_thread(self, force: bool = False) -> None:
            self.cleared += force

    lib = Controller()
    get, put = blas._control(lib)
    put(2)
    assert get() == 2 and lib.count == 2 and lib.cleared == 2


def test_the_tuner_times_a_run_with_its_switches_of_the_blas_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """threads=None times a run from before its BLAS limit is set to after the user's is restored, so
    a count whose switch is slow carries that cost."""
    monkeypatch.setattr(blas, "runnable_tasks", unknown_load)
    import amanda.exec.runner as runner_module

    limit, restore, counts = blas.set_limit, blas.restore_limit, []

    def counted_limit(count: int) -> Any:
        counts.append(count)
        return limit(count)

    def slow_restore(changed: Any) -> None:  # a limit set to one thread is slow to set back
        if counts[-1] == 1:
            time.sleep(0.02)
        restore(changed)

    for module in (runner_module, blas):
        monkeypatch.setattr(module, "set_limit", counted_limit)
        monkeypatch.setattr(module, "restore_limit", slow_restore)
    with Session(probed_products(1), threads=None) as session:
        if session._runner.budget == 1:
            pytest.skip("one core: no BLAS tuning")
        for _ in range(BlasTuner.PROBES + 1):
            session.run(["y"], feeds())
        tuner = session.plan(["y"], feeds()).tuner
    assert tuner.recent[1] and min(tuner.recent[1]) >= 0.02
