"""Runners: the sequential interpreter and the ready-queue scheduler over a worker pool.

Both execute a :class:`~amanda.exec.plan.Plan` over an environment list (``env``),
writing each step's outputs into their slots and clearing a slot after its last
reader, and both raise the same :class:`~amanda.errors.ExecutionError` for a
failing kernel. They agree on every value: the threaded one only reorders
independent steps.

The threaded scheduler runs on the calling thread. Steps that are cheap (most
ops: handing one to a thread costs 30-50 µs) run inline there; heavy ones (BLAS
products, convolutions, ops on large arrays) go to the pool, unless nothing else
could run beside them, in which case they run inline too. Session kernels
(state, control flow) always run inline. A failure stops dispatching at once; the
run waits only for steps already on a worker (numpy cannot be interrupted), then
raises.

BLAS threads (:mod:`amanda.exec.blas`): the process-wide BLAS pool is set for the
length of a run, to 1 thread when workers run products side by side (inter-op
parallelism) and to the session's thread budget when steps run one at a time
(intra-op parallelism), so the two never oversubscribe the cores.
"""

from __future__ import annotations

import importlib
import os
import queue
import threading
import time
from collections import deque
from typing import Any

import numpy as np

from amanda.containers.arguments import brief
from amanda.errors import ExecutionError
from amanda.exec.blas import BlasTuner, _blas_libraries, blas_threads, restore_limit, set_limit  # noqa: F401
from amanda.exec.dispatch import failure
from amanda.exec.plan import Plan, Step
from amanda.exec.schedule import BY_SIZE, POOL

__all__ = ["Runner", "WorkerPool", "blas_threads", "run_sequential", "run_threaded"]

SEQUENTIAL, THREADED = "sequential", "threaded"

_ERRORS: Any = None
_IGNORED: Any = None
try:  # numpy 2: np.errstate sets this context variable; setting it straight costs 0.1 µs, not 0.9
    _config = importlib.import_module("numpy._core._ufunc_config")
    _ERRORS, _IGNORED = _config._extobj_contextvar, _config._make_extobj(all="ignore")
except (ImportError, AttributeError, TypeError):  # numpy 1: np.errstate itself
    _ERRORS = None
DEFAULT_OFFLOAD_ELEMENTS = 1 << 16


def _error(plan: Plan, index: int, env: list, exc: BaseException) -> ExecutionError:
    info = plan.infos[index]
    inputs = [env[s] for s in plan.steps[index].ins]
    return failure(info.path, info.op_type, info.namespace, inputs, exc)


class _Late(Exception):
    """Marks the step a threaded run did not start because its deadline had passed."""


_LATE = _Late()


class _NotATuple(TypeError):
    pass


def _not_a_tuple(result: Any) -> _NotATuple:
    return _NotATuple(f"the kernel returned {type(result).__name__}, expected a tuple of outputs")


def run_sequential(plan: Plan, env: list, deadline: float | None = None) -> None:
    """Run every step in order (the plain interpreter); start no step after ``deadline``
    (a ``time.monotonic()`` value)."""
    steps = plan.steps
    get = env.__getitem__
    attrs: Any = None
    try:
        for fn, attrs, ins, outs, frees in steps:
            if deadline is not None and time.monotonic() > deadline:
                break
            result = fn(attrs, *map(get, ins))
            if type(result) is not tuple:
                raise _not_a_tuple(result)
            for k, s in outs:
                env[s] = result[k]
            for s in frees:
                env[s] = None
        else:
            return
    except Exception as exc:
        raise _error(plan, _index(steps, attrs), env, exc) from exc
    raise timed_out(plan.infos[_index(steps, attrs)].path)


def _index(steps: list[Step], attrs: Any) -> int:
    # each step owns its attrs object, so it identifies the step
    return next(i for i, step in enumerate(steps) if step.attrs is attrs)


def timed_out(path: str) -> ExecutionError:
    """The error of a run that reached its deadline before ``path`` could start."""
    return ExecutionError(
        f"the run passed its timeout before `{path}` could start; raise Session(timeout=...) or "
        "run(timeout=...), or fetch less", path=path, expected="the run to end before its timeout",
        found="the timeout passed")


def _worker(tasks: queue.SimpleQueue[Any]) -> None:
    np.seterr(all="ignore")  # as the scheduling thread runs (see Runner.run); thread-local
    while True:
        task = tasks.get()
        if task is None:
            return
        index, fn, attrs, args, done = task
        task = None
        try:
            result = fn(attrs, *args)
        except BaseException as exc:  # noqa: BLE001 - handed to the scheduler, which re-raises
            done.put((index, None, exc))
        else:
            done.put((index, result, None))
        # drop references so an idle worker holds no arrays
        fn = attrs = args = result = done = None


#: the most worker threads a Session starts: numpy kernels gain nothing from more workers than
#: cores, and an operating system refuses to start some thousands of threads per process
MAX_THREADS = 1024


class WorkerPool:
    """``size`` daemon threads taking ``(index, fn, attrs, args, done)`` tasks from one queue."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.threads = [
            threading.Thread(target=_worker, args=(self.tasks,), name=f"amanda-worker-{i}", daemon=True)
            for i in range(size)
        ]
        for started, thread in enumerate(self.threads):
            try:
                thread.start()
            except RuntimeError as exc:  # the operating system's limit on threads
                self.threads = self.threads[:started]
                self.close()
                raise ExecutionError(f"threads: cannot start worker {started + 1} of {size}: {exc}", path="threads",
                                     expected=f"at most {started} threads on this machine", found=str(size)) from None

    def close(self) -> None:
        """Stop every worker and wait for them (each finishes its current task first)."""
        for _ in self.threads:
            self.tasks.put(None)
        for thread in self.threads:
            if thread is not threading.current_thread():
                thread.join()
        self.threads = []


def _large(args: list, threshold: int) -> bool:
    for a in args:
        if type(a) is np.ndarray and a.size >= threshold:
            return True
    return False


def run_threaded(
    plan: Plan, env: list, pool: WorkerPool, offload_elements: int = DEFAULT_OFFLOAD_ELEMENTS,
    deadline: float | None = None,
) -> None:
    """Run the plan with a ready queue over its schedule's step records: cheap steps inline,
    heavy ones on ``pool``.

    At most one step per worker is on the pool at a time (the others wait in ``waiting``),
    so after a failure, an interrupt or the deadline only the steps already running finish.
    """
    steps, records, keep = plan.steps, plan.schedule.records, plan.schedule.keep
    remaining = [r[0] for r in records]  # Scheduled: (preds, succs, reads, place)
    uses = list(plan.schedule.uses)
    ready = deque(i for i, n in enumerate(remaining) if n == 0)
    waiting: deque[int] = deque()  # heavy steps ready for a worker while every worker is busy
    done: queue.SimpleQueue[Any] = queue.SimpleQueue()
    tasks, capacity = pool.tasks, pool.size
    inflight = 0
    failed: tuple[int, BaseException] | None = None

    def finish(i: int, result: Any) -> None:
        if type(result) is not tuple:
            raise _not_a_tuple(result)
        for k, s in steps[i].outs:
            env[s] = result[k]
        _, succs, reads, _ = records[i]
        for s in reads:
            uses[s] -= 1
            if not uses[s] and s not in keep:
                env[s] = None
        for j in succs:
            remaining[j] -= 1
            if not remaining[j]:
                ready.append(j)

    def start_waiting() -> tuple[int, BaseException] | None:
        """Hand waiting steps to free workers; the first late one stops the run."""
        nonlocal inflight
        while waiting and inflight < capacity:
            i = waiting.popleft()
            if deadline is not None and time.monotonic() > deadline:
                return (i, _LATE)
            fn, attrs, ins, _, _ = steps[i]
            tasks.put((i, fn, attrs, [env[s] for s in ins], done))
            inflight += 1
        return None

    def run_ready() -> tuple[int, BaseException] | None:
        """Run the ready steps inline, or hand the heavy ones on when others could run beside
        them; the first failure (or late step) stops the run."""
        nonlocal inflight
        while ready:
            i = ready.popleft()
            fn, attrs, ins, _, _ = steps[i]
            args = [env[s] for s in ins]
            place = records[i][3]
            if (place == POOL or (place == BY_SIZE and _large(args, offload_elements))) and (
                    ready or waiting or inflight):
                if inflight < capacity:
                    tasks.put((i, fn, attrs, args, done))
                    inflight += 1
                else:
                    waiting.append(i)
                continue
            if deadline is not None and time.monotonic() > deadline:
                return (i, _LATE)
            try:
                finish(i, fn(attrs, *args))
            except Exception as inline_error:  # noqa: BLE001 - re-raised below with the op's path
                return (i, inline_error)
        return None

    def collect() -> tuple[int, BaseException] | None:
        """Take one finished step from the workers."""
        nonlocal inflight
        i, result, worker_error = done.get()
        inflight -= 1
        if worker_error is not None:
            return (i, worker_error)
        try:
            finish(i, result)
        except Exception as err:  # noqa: BLE001
            return (i, err)
        return None

    try:
        while ready or waiting or inflight:
            failed = start_waiting() or run_ready()
            if failed is None and inflight:
                failed = collect()
            if failed is not None:
                break
    finally:
        # steps already on a worker cannot be stopped: wait for them, start nothing new
        while inflight:
            done.get()
            inflight -= 1
    if failed is not None:
        _raise_failure(plan, env, *failed)


def _raise_failure(plan: Plan, env: list, index: int, error: BaseException) -> None:
    """Raise what stopped a threaded run: a timeout, an interrupt as it is, else the step's
    ExecutionError."""
    if error is _LATE:
        raise timed_out(plan.infos[index].path)
    if not isinstance(error, Exception):
        raise error  # KeyboardInterrupt, SystemExit … pass through unwrapped
    raise _error(plan, index, env, error) from error


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


class Runner:
    """How a session runs plans: its thread budget, its pool and the BLAS setting.

    ``threads=None`` chooses per plan: the threaded scheduler on ``os.cpu_count()``
    workers when at least half of the plan's heavy steps can run beside another one,
    otherwise the sequential interpreter with BLAS on every core or on one, whichever
    :class:`BlasTuner` measures faster (trying every core only while the machine has a core to
    spare, :mod:`amanda.exec.load`). ``threads=1`` is the sequential interpreter with
    single-threaded BLAS; ``threads=n > 1`` always the threaded scheduler on ``n`` workers
    with single-threaded BLAS.
    """

    def __init__(self, threads: int | None = None, offload_elements: int = DEFAULT_OFFLOAD_ELEMENTS) -> None:
        if threads is not None and (not _is_int(threads) or not 1 <= threads <= MAX_THREADS):
            expected = f"None or an int from 1 to {MAX_THREADS}"
            raise ExecutionError(f"threads: expected {expected}, found {brief(threads)}", path="threads",
                                 expected=expected, found=brief(threads))
        if not _is_int(offload_elements) or offload_elements < 0:
            raise ExecutionError(f"offload_elements: expected a non-negative int, found {offload_elements!r}",
                                 path="offload_elements", expected="a non-negative int", found=repr(offload_elements))
        threads = None if threads is None else int(threads)
        self.threads = threads
        self.budget = threads if threads is not None else (os.cpu_count() or 1)
        self.offload_elements = offload_elements
        self.pool: WorkerPool | None = None
        self.deadline: float | None = None  # of the run under way (``time.monotonic()``), if any
        self._lock = threading.Lock()

    def mode(self, plan: Plan) -> str:
        """Which runner a plan gets."""
        if self.threads is None:
            return THREADED if self.budget > 1 and plan.schedule.parallel else SEQUENTIAL
        return THREADED if self.threads > 1 else SEQUENTIAL

    def run(self, plan: Plan, env: list, mode: str, deadline: float | None = None) -> None:
        """Run a top-level plan, with BLAS threads set for ``mode`` when the plan uses BLAS;
        no step (nested ones included) starts after ``deadline`` (a ``time.monotonic()`` value).

        numpy's floating-point warnings are off during a run: inf and nan are values in
        ONNX, and setting this once per run spares every kernel its own ``errstate``.
        """
        previous, self.deadline = self.deadline, deadline
        if _ERRORS is None:
            try:
                with np.errstate(all="ignore"):
                    self._run(plan, env, mode)
            finally:
                self.deadline = previous
            return
        token = _ERRORS.set(_IGNORED)  # what np.errstate(all="ignore") sets, made once
        try:
            self._run(plan, env, mode)
        finally:
            _ERRORS.reset(token)
            self.deadline = previous

    def _run(self, plan: Plan, env: list, mode: str) -> None:
        if not plan.schedule.uses_blas:
            self.execute(plan, env, mode)
            return
        if mode == THREADED or self.budget == 1:
            changed = set_limit(1)
            try:
                self.execute(plan, env, mode)
            finally:
                restore_limit(changed)
            return
        # threads=None and a sequential plan: BLAS threads as measured best
        # kept on the plan (which its session owns), so the runner holds no plan
        tuner = plan.tuner
        if tuner is None:
            # the first run at one thread, untimed: it never stalls, and its cold caches
            # would make it a poor probe
            plan.tuner = BlasTuner(self.budget)
            with blas_threads(1):
                self.execute(plan, env, mode)
            plan.tuner.skip()
            return
        # timed from before the choice to after the setting is restored: a count's time carries
        # what choosing it costs (the load samples of one-thread runs) and both of its switches
        started = time.perf_counter()
        if tuner.quick():  # one thread, settled: no choice to make
            changed = set_limit(1)
            try:
                self.execute(plan, env, mode)
            finally:
                restore_limit(changed)
            tuner.note(time.perf_counter() - started)
            return
        count = tuner.next()
        with blas_threads(count):
            self.execute(plan, env, mode)
        tuner.record(count, time.perf_counter() - started)

    def execute(self, plan: Plan, env: list, mode: str) -> None:
        """Run a plan (top-level or nested) with the given runner."""
        if mode == THREADED and len(plan.steps) > 1:
            run_threaded(plan, env, self._pool(), self.offload_elements, self.deadline)
        else:
            run_sequential(plan, env, self.deadline)

    def _pool(self) -> WorkerPool:
        with self._lock:
            if self.pool is None:
                self.pool = WorkerPool(self.budget)
            return self.pool

    def close(self) -> None:
        """Stop the worker threads, if any were started."""
        with self._lock:
            pool, self.pool = self.pool, None
        if pool is not None:
            pool.close()
