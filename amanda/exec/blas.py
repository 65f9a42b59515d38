"""BLAS threads: the process-wide BLAS limit set for the length of a run, and its tuner.

threadpoolctl finds the libraries; the limit is then read and set through each library's own
functions (for OpenBLAS built on pthreads, ``openblas_get_num_threads`` and
``openblas_set_num_threads`` called directly: about 0.1 µs each, where threadpoolctl's
per-call machinery, with its controlling-thread bookkeeping, took about 5 µs a run). numpy's
OpenBLAS (pthreads) keeps one pool for the process and honours a limit set from any thread, so
a run sets it on whichever thread it runs, and threadpoolctl's own state (which thread controls
OpenBLAS) is left as the user's ``threadpool_limits`` made it.

>>> with blas_threads(1):
...     pass
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from amanda.exec.load import runnable_tasks, spare_cores

__all__ = ["BlasTuner", "blas_threads", "restore_limit", "set_limit"]

_BLAS: list | None = None
_CONTROLS: tuple | None = None  # (get, set) of each library's limit, as _blas_controls gives them
_BLAS_LOCK = threading.Lock()
_SETTING = threading.Lock()  # a get-then-set of the BLAS limit is one step


def _blas_libraries() -> list:
    global _BLAS
    with _BLAS_LOCK:
        if _BLAS is None:
            try:
                from threadpoolctl import ThreadpoolController

                _BLAS = list(ThreadpoolController().select(user_api="blas").lib_controllers)
            except Exception:  # noqa: BLE001 - without threadpoolctl BLAS keeps its own setting
                _BLAS = []
        return _BLAS


def _blas_controls() -> tuple:
    """``(get, set)`` of the thread limit of each BLAS library numpy may call, made once."""
    global _CONTROLS
    if _CONTROLS is None:
        controls = tuple(_control(lib) for lib in _blas_libraries())
        _CONTROLS = controls
    return _CONTROLS


def _control(lib: Any) -> tuple[Callable[[], int], Callable[[int], Any]]:
    """The library's own getter and setter where it is OpenBLAS on pthreads (one process-wide
    pool, which threadpoolctl would let only one Python thread set), else threadpoolctl's."""
    symbol = getattr(lib, "_get_symbol", None)
    if getattr(lib, "internal_api", None) == "openblas" and getattr(lib, "threading_layer", None) != "openmp" \
            and symbol is not None:
        get, put = symbol("openblas_get_num_threads"), symbol("openblas_set_num_threads")
        if get is not None and put is not None:
            return get, put
    return lib.get_num_threads, lambda count: _set_blas(lib, count)


def _set_blas(lib: Any, count: int) -> None:
    # threadpoolctl (3.8 on) lets only the first thread that set OpenBLAS's pool (pthreads
    # build) change it and silently ignores every other thread; the pool is process-wide,
    # so the run under way takes control from whichever thread it runs on, and gives it up
    take = getattr(lib, "clear_controlling_thread", None)
    if take is not None:
        take(force=True)
    lib.set_num_threads(count)
    if take is not None:
        take(force=True)


class blas_threads:  # noqa: N801 - used as a function, like contextlib's context managers
    """Let BLAS use ``count`` threads inside the block, restoring the previous setting after.

    The setting is process-wide and holds whichever thread enters the block. Each library's
    limit is read on entry and set only where it differs from ``count`` (and set back on exit
    only then): a run whose count is the library's current one costs one read. A class, not a
    generator, as it is entered on every run (about 1 µs saved).
    """

    __slots__ = ("changed", "count")

    def __init__(self, count: int) -> None:
        self.count = count
        self.changed: list | None = None

    def __enter__(self) -> None:
        self.changed = set_limit(self.count)

    def __exit__(self, *exc: Any) -> None:
        changed, self.changed = self.changed, None
        restore_limit(changed)


def set_limit(count: int) -> list | None:
    """Set each BLAS library's thread limit to ``count`` where it differs; what
    :func:`restore_limit` needs to set them back (None where nothing changed). The two halves of
    :class:`blas_threads`, which a run calls straight (a context manager object costs 2 µs).

    >>> restore_limit(set_limit(1))
    """
    changed = None
    with _SETTING:
        for get, put in _CONTROLS if _CONTROLS is not None else _blas_controls():
            current = get()
            if current != count:
                put(count)
                if changed is None:
                    changed = []
                changed.append((put, current))
    return changed


def restore_limit(changed: list | None) -> None:
    """Set back the limits :func:`set_limit` changed."""
    if changed:
        with _SETTING:
            for put, previous in changed:
                put(previous)


def _median(values: deque) -> float:
    # statistics.median costs ~1 µs a call, and the tuner takes two per run
    ordered = sorted(values)
    half = len(ordered) // 2
    return ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2


class BlasTuner:
    """Chooses BLAS threads for one sequential plan by timing its runs: the budget or 1.

    Multi-threaded BLAS pays off on an idle machine and collapses when another process
    holds a core (its threads spin at barriers while one of them is descheduled, and one
    run can take ten to thirty times its usual time), so the choice is measured, not
    assumed: the first ``PROBES`` runs try both (one thread, then the budget three times of
    which the first only wakes its threads and is not judged, then one thread), then the budget is used
    only while the median of its last few runs beats one thread's by ``MARGIN`` (its gain
    is at most the thread count, its loss unbounded); two runs in a row with the budget over
    ``STALL`` times one thread's median switch to one thread at once. The other count is tried
    again after ``RETRY`` runs (after ``FIRST_RETRY`` when the budget lost its probes: a stall
    is transient, one thread's time is not), so the choice follows the machine's load: a retry is two runs,
    the first only waking the threads the other setting let sleep, the second judged; a retry
    that wins switches at once, and each one that loses doubles the wait (up to
    ``MAX_RETRY``), as a losing retry of a stalling budget costs many runs' time. The
    median, not the best run: a setting whose best run is fast but which stalls every few
    runs has a fast best and a slow typical run.

    A try of the budget (a probe or a retry) is not made while the machine has no core to spare
    for the budget's extra threads (:mod:`amanda.exec.load`: the least busy of the runnable
    counts sampled at the start of recent one-thread runs, every ``LOAD_EVERY``-th): such a try
    can only lose, and a stall costs ten to thirty runs. The run is made on one thread instead,
    the probes end there, and the budget is tried again after ``FIRST_RETRY`` runs, when the
    load is looked at again (a skipped try costs nothing, so the wait does not grow). ``load``
    gives the runnable count (None where unknown: then timing alone decides).

    >>> tuner = BlasTuner(2, load=lambda: 1)  # an idle machine: only this thread runnable
    >>> [tuner.probe(i) for i in range(tuner.PROBES)]
    [1, 2, 2, 2, 1, 1, 1]
    >>> for seconds in (0.2, 2.0, 0.9, 0.8, 0.1, 0.2, 0.2):  # 2 threads slow, 1 thread fast
    ...     tuner.record(tuner.next(), seconds)
    >>> tuner.next()
    1
    >>> busy = BlasTuner(2, load=lambda: 2, cores=2)  # another task holds the other core
    >>> busy.skip(); [busy.next() for _ in range(3)], busy.probing
    ([1, 1, 1], False)
    """

    PROBES = 7
    WARM_UP = 1  # the probe run that wakes the budget's threads after a one-thread run: not judged
    FIRST_RETRY = 8  # runs after probes the budget lost before it is retried: stalls are transient
    RETRY = 50
    MAX_RETRY = 800
    MARGIN = 0.9
    STALL = 2.0
    LOAD_EVERY = 4  # one-thread runs from one load sample to the next
    LOAD_SAMPLES = 3

    def __init__(self, budget: int, load: Callable[[], int | None] | None = None, cores: int | None = None) -> None:
        self.candidates = (budget, 1)
        self.load = load if load is not None else runnable_tasks
        self.cores = cores if cores is not None else (os.cpu_count() or budget)
        self.samples: deque[int] = deque(maxlen=self.LOAD_SAMPLES)
        self.probing = True  # False once the probes were cut short by the load
        self.budget_runs = 0  # runs made with the budget (what the benchmarks report)
        self.recent: dict[int, deque] = {c: deque(maxlen=5) for c in self.candidates}
        self.choice = budget
        self.runs = 0
        self.wait = self.RETRY
        self.retry_at = self.RETRY
        self.stalls = 0  # budget runs in a row over STALL times one thread's median
        self.warmed = False  # a retry's first (warm-up) run is done

    def probe(self, run: int) -> int:
        """The thread count of probe run ``run`` (0 to PROBES - 1): the budget's runs come
        together, as a budget run straight after a one-thread run is slowed by threads that
        went to sleep (up to 1.4x on a Dask worker)."""
        budget, one = self.candidates
        return budget if 1 <= run <= 3 else one

    def next(self) -> int:
        """The BLAS thread count for the next run."""
        budget, one = self.candidates
        if self._probing():
            count = self.probe(self.runs)
        elif self.runs >= self.retry_at:
            count = one if self.choice == budget else budget
        else:
            count = self.choice
        trying = count == budget != one and (self._probing() or self.choice != budget)
        if trying and self._crowded():
            # no core to spare: a try of the budget could only stall; look again later
            self.probing = self.warmed = False
            self.choice, self.retry_at = one, self.runs + self.FIRST_RETRY
            count = one
        if count == one != budget and self.runs % self.LOAD_EVERY == 0:
            self._sample()
        return count

    def quick(self) -> bool:
        """Whether the next run is a settled one-thread run: one thread the choice, no probe or
        retry due (the load sampled here when :meth:`next` would sample it); such a run is then
        counted by :meth:`note` alone, as :meth:`next` and :meth:`record` would count it."""
        budget, one = self.candidates
        if self.choice == one != budget and self.PROBES <= self.runs < self.retry_at:
            if self.runs % self.LOAD_EVERY == 0:
                self._sample()
            return True
        return False

    def note(self, seconds: float) -> None:
        """Count a run that :meth:`quick` said is settled and took ``seconds`` at one thread."""
        self.recent[self.candidates[1]].append(seconds)
        self.runs += 1
        self.warmed = False

    def skip(self) -> None:
        """Count a run made at one thread without timing it: a plan's first run, whose cold
        caches make it a poor sample and which a stalling budget would make slow."""
        if self.candidates[0] != 1:
            self._sample()
        self.runs += 1

    def _probing(self) -> bool:
        return self.probing and self.runs < self.PROBES

    def _sample(self) -> None:
        found = self.load()
        if found is not None:
            self.samples.append(found)

    def _crowded(self) -> bool:
        """Whether the machine lacks the cores the budget's extra threads need (recent samples)."""
        spare = spare_cores(self.samples, self.cores)
        return spare is not None and spare < self.candidates[0] - 1

    def record(self, count: int, seconds: float) -> None:
        """Note how long a run with ``count`` BLAS threads took."""
        self.budget_runs += count != self.candidates[1]
        retried = not self._probing() and count != self.choice
        if self._unjudged(count, retried):
            return
        self.recent[count].append(seconds)
        self._choose(count, seconds, retried)
        budget, one = self.candidates
        if retried:
            self.wait = self.RETRY if self.choice == count else min(2 * self.wait, self.MAX_RETRY)
            self.retry_at = self.runs + self.wait
        elif self.runs == self.PROBES and self.choice == one != budget:
            self.retry_at = self.runs + self.FIRST_RETRY

    def _unjudged(self, count: int, retried: bool) -> bool:
        """Count the run; whether it only woke threads (the budget's first probe, or a retry's
        first run) and is not judged."""
        first_probe = self._probing() and self.runs == self.WARM_UP and count != self.candidates[1]
        self.runs += 1
        if first_probe:
            return True
        if retried and not self.warmed:
            # the first run after switching wakes threads that slept through the other setting's
            # runs: a poor sample, so the retry runs once more and is judged on that run
            self.warmed = True
            return True
        self.warmed = False
        return False

    def _choose(self, count: int, seconds: float, retried: bool) -> None:
        budget, one = self.candidates
        if count == one != budget and self.choice == one:
            return  # one thread stays the choice until the budget wins a run: no median to take
        single = _median(self.recent[one]) if self.recent[one] else None
        if count == budget and (single is None or seconds <= self.STALL * single):
            self.stalls = 0
        if budget == one or single is None:
            self.choice = count if single is None else one
        elif count == budget and seconds > self.STALL * single:
            # two stalls in a row: do not wait for the median to notice (one alone may be
            # the threads waking after an idle spell)
            self.stalls += 1
            if self.stalls >= 2:
                self.choice = one
        elif retried and count == budget and seconds < self.MARGIN * single:
            # a retry that wins is the freshest evidence there is: take the budget, and forget
            # its older runs (stalls of another load would hold its median back for hundreds of
            # runs, as retries come ever more rarely); two stalls in a row switch back
            self.choice = budget
            self.recent[budget] = deque([seconds], maxlen=self.recent[budget].maxlen)
        elif self.recent[budget] and (count == budget or self.choice == budget):
            # only a fresh budget run (or the current choice) can make the budget the choice:
            # its older runs may predate the load that slowed this one-thread run
            self.choice = budget if _median(self.recent[budget]) < self.MARGIN * single else one
