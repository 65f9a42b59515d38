"""Session: runs a model, keeps its variable state and caches its plans.

>>> import amanda, numpy as np
>>> from amanda import Container, op
>>> g = Container("G", "g", inputs=["x"], outputs=["y"], attrs={"namespace": "amanda/onnx/17"},
...     children=[op("Relu", "r", ["X"], ["Y"])], edges=[("g:x", "r:X"), ("r:Y", "g:y")])
>>> with Session(g) as s:
...     s.run(["y"], {"x": np.array([-1.0, 2.0], np.float32)})
[array([0., 2.], dtype=float32)]
"""

from __future__ import annotations

import threading
import time
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from amanda.containers import CONTROL, SELF, Container, Endpoint
from amanda.containers.phases import check_phase
from amanda.containers.records import Path
from amanda.containers.uids import refuse_uid_clashes
from amanda.errors import ExecutionError, format_path
from amanda.exec import state as _state
from amanda.exec.dispatch import OpContext
from amanda.exec.feeds import check_feeds
from amanda.exec.plan import Plan, bind_phase, compile_plan
from amanda.exec.plan_cache import Pipeline, optimized_for, signature
from amanda.exec.resolve import is_top_name
from amanda.exec.run_key import Prepared, run_key
from amanda.exec.runner import DEFAULT_OFFLOAD_ELEMENTS, SEQUENTIAL, Runner, run_sequential, timed_out
from amanda.exec.session_args import (
    _as_value,
    _bad,
    _check_flags,
    _check_phase,
    _feed_map,
    _fetch_list,
    _names,
    _seconds,
)
from amanda.exec.tensorflow import executable_form, needs_conversion
from amanda.exec.value_cache import DEFAULT_BUDGET, ValueCache
from amanda.keywords import positional_refused
from amanda.parse_guards import gc_paused

__all__ = ["DEFAULT_MAX_LOOP_ITERATIONS", "Session"]

DEFAULT_MAX_LOOP_ITERATIONS = 1_000_000


def _warn_skipped_updates(model: Container, fetches: tuple, phase: Any) -> None:
    """Warn (once per plan) when a run in phase ``p`` leaves out the top control port ``p`` that
    ops are linked to in that phase (a model's ``train`` updates): they would not run."""
    if not isinstance(phase, str) or phase not in model.control_names:
        return
    if phase in fetches or Endpoint(SELF, phase) in fetches:
        return
    if any(e.dst.op == SELF and e.dst.port == phase for e in model.edges):
        warnings.warn(f"run(phase={phase!r}) does not fetch the control port {phase!r}: the updates linked "
                      f"to it do not run; fetch it too (run([..., {phase!r}], phase={phase!r})) to run them",
                      stacklevel=4)


class Session:
    """Runs ``model``; see ``docs/execution.md``.

    ``threads``: None lets the session choose per plan (see :class:`~amanda.exec.runner.Runner`),
    1 runs the sequential interpreter, n > 1 the threaded scheduler on n workers.
    ``offload_elements``: in the threaded scheduler, ops whose largest input has at least
    this many elements go to a worker (heavy op types always do); 0 sends every op.
    ``max_loop_iterations``: a Loop op that would start more iterations than this raises an
    ExecutionError (None: no limit). ``timeout``: seconds a run may take before it raises an
    ExecutionError (None: no limit); ``run(timeout=...)`` overrides it for one run.
    ``cache``: keep step outputs across runs and reuse those whose inputs did not change
    (True: up to 256 MB; an int: that many bytes; see :mod:`amanda.exec.value_cache`).
    ``client``: a ``dask.distributed`` Client; each device's part then runs on a worker
    (``devices`` maps device names to workers; see ``docs/distribution.md``).
    ``optimize``: plan each feed type signature with the model specialised to it and run
    through the default pipeline, ``amanda.optimize``'s passes and fusion rules
    (``docs/optimize.md``); a function ``pipeline(model, inputs) -> model`` (``inputs``: name ->
    (dtype, shape)) is used instead; False runs the model as given.
    ``backend``: ``"numpy"`` runs every op on numpy whatever its ``device``; ``"onnxruntime"``
    (or ``"onnxruntime:cpu"``, ``"onnxruntime:cuda"``) places every op onnxruntime can run on
    it, the rest on numpy; ``"cupy"`` (``"cupy:0"``) runs the kernels that run unchanged on CuPy
    arrays on the GPU; ops whose ``device`` attribute names ``onnxruntime:<kind>`` go there
    without it, and ``placement={selector: device}`` sets that attribute on the nodes each
    selector matches (``docs/execution.md``, "Devices and backends").
    ``profile``: record each run's op times, devices and bytes moved (``session.profile``;
    ops then run one at a time, see :mod:`amanda.exec.profile`).
    A model in which two nodes of other content share a uid is refused with an
    ``InvariantError`` naming both paths (:mod:`amanda.containers.uids`).
    """

    def __init__(
        self,
        model: Container,
        *positional: Any,
        threads: int | None = None,
        offload_elements: int = DEFAULT_OFFLOAD_ELEMENTS,
        max_loop_iterations: int | None = DEFAULT_MAX_LOOP_ITERATIONS,
        timeout: float | None = None,
        cache: bool | int = False,
        client: Any = None,
        devices: Mapping[str, Any] | None = None,
        optimize: bool | Pipeline = True,
        backend: str | None = None,
        placement: Mapping[str, str] | None = None,
        profile: bool = False,
    ) -> None:
        if positional:  # the removed Session(model, threads)
            raise positional_refused("Session", ("threads",), positional)
        if not isinstance(model, Container):
            raise _bad("model", "a Container", model)
        if placement is not None:  # devices by selector: {"$..[?type=='GPT2Block']": "onnxruntime:cpu"}
            from amanda.exec.backends.placed import place_by

            model = place_by(model, placement)
        refuse_uid_clashes(model, "Session")  # state is kept by uid: two nodes of one uid would share it
        _check_flags(max_loop_iterations, optimize, profile, client, cache)
        self._timeout = _seconds(timeout, "timeout")
        self._max_loop_iterations = None if max_loop_iterations is None else int(max_loop_iterations)
        self.model = model
        # a TensorFlow graph runs converted where its ops lack kernels; names keep working
        self._executable, self._names = model, None
        if needs_conversion(model):
            self._executable, self._names = executable_form(model)
        self._runner = Runner(threads, offload_elements)
        self._state: dict[str, Any] = {}
        self._plans: dict[tuple, Plan] = {}
        self._prepared: dict[tuple, Prepared] = {}  # repeated runs, by run_key
        self._optimize = optimize is not False  # plans specialised and optimised per feed types (plan_cache.py)
        self._pipeline = optimize if callable(optimize) else None  # None: the default pipeline
        self._profile = profile
        self._last_profile: Any = None  # the last run's Profile
        self._bodies: dict[tuple, tuple[Container, Plan]] = {}
        self._bound: dict[Any, Container] = {}
        self._lock = threading.RLock()
        self._mode = SEQUENTIAL
        # the workers hold no reference to the session, so it can be collected; stop them then
        self._finalizer = weakref.finalize(self, Runner.close, self._runner)
        self._values = None if not cache else ValueCache(DEFAULT_BUDGET if cache is True else int(cache))
        self._remote: Any = None
        if client is not None:
            from amanda.exec.dist.dask_backend import DaskRunner

            if backend is not None:
                raise _bad("backend", "None with client= (Dask workers run numpy parts)", backend)
            self._remote = DaskRunner(self._executable, client, devices, threads, self._state)
        else:
            from amanda.exec.backends.placed import PlacedRunner, backend_device, uses_backend

            device = backend_device(backend)  # None: numpy, or no backend named
            if device is not None or (backend is None and uses_backend(self._executable)):  # placed parts
                self._remote = PlacedRunner(self, backend)

    # -- public ------------------------------------------------------------------------------

    @property
    def threads(self) -> int | None:
        """The thread setting the session was made with."""
        return self._runner.threads

    @property
    def timeout(self) -> float | None:
        """Seconds a run may take (None: no limit); ``run(timeout=...)`` overrides it per run."""
        return self._timeout

    @property
    def max_loop_iterations(self) -> int | None:
        """Iterations a Loop op may run before it raises (None: no limit)."""
        return self._max_loop_iterations

    @property
    def value_cache(self) -> ValueCache | None:
        """The session's value cache (its ``hits``, ``misses`` and bytes ``used``), or None."""
        return self._values

    @property
    def state(self) -> Mapping[str, Any]:
        """The session's variables (state key -> value), read-only; they persist across runs."""
        return MappingProxyType(self._state)

    def run(
        self, fetches: Sequence[Any] | str, feeds: Mapping[Any, Any] | None = None, phase: Any = None,
        *, timeout: float | None = None,
    ) -> list:
        """Compute ``fetches`` (a list, or one name) given ``feeds``; a list in fetch order.

        A fetch that names an op (or a control port) runs it for its effects; its result
        is None. Each fed value must match the dtype and shape its port declares (nothing
        is cast). ``timeout`` (seconds, default the session's) bounds the run: no op starts
        after it passes, and the run raises an ExecutionError.
        """
        key = run_key(fetches, feeds, phase) if timeout is None and self._timeout is None else None
        prepared = None if key is None else self._prepared.get(key)
        if prepared is not None:  # a run like one before: its plan, slots and mode (run_key.py)
            return self._execute(prepared.plan, prepared.env(feeds), prepared.mode, None)
        seconds = _seconds(timeout, "timeout")
        seconds = self.timeout if seconds is None else seconds
        deadline = None if seconds is None else time.monotonic() + seconds
        items = _fetch_list(fetches)
        given = _feed_map(feeds)
        _check_phase(phase)
        check_phase(self.model, phase, ExecutionError)
        values = dict(zip(_names(given, "feed"), map(_as_value, given.values())))
        if self._names is not None:
            items = tuple(self._translated(item) for item in items)
            values = {self._translated(name): value for name, value in values.items()}
        if self._remote is not None:
            return self._run_remote(items, values, phase, seconds)
        plan, fitted = self._plan(items, frozenset(values), phase, values)  # names already checked above
        if plan.feed_types and not fitted:  # a plan for the feeds' type signature: they fit already
            check_feeds(plan.feed_types, values)
        env = plan.template.copy()
        slots = plan.feed_slots
        for name, value in values.items():
            s = slots[name]
            if s is not None:
                env[s] = value
        mode = self._runner.mode(plan)
        if self._values is not None:
            return self._execute(plan, env, mode, deadline, values)
        # check_feeds reads only dtypes and shapes, which the key holds: a key that passed it passes
        if key is not None and not self._profile and self._names is None:
            self._prepared[key] = Prepared(plan, tuple(slots[name] for name in values), mode)
        return self._execute(plan, env, mode, deadline)

    def _run_remote(self, items: tuple, values: dict, phase: Any, seconds: float | None) -> list:
        with self._lock:  # one distributed run at a time: runs share the epoch and checkpoint
            start = time.perf_counter()
            results = self._remote.run(self._executable, items, values, phase, seconds)
            if self._profile:
                self._last_profile = self._remote.profile(self.model, start, time.perf_counter() - start)
            return results  # type: ignore[no-any-return]

    def _execute(self, plan: Plan, env: list, mode: str, deadline: float | None, values: Any = None) -> list:
        """Run ``plan`` over ``env`` in ``mode`` (with the value cache's plan for ``values``, when
        given); the fetched values."""
        with self._lock:
            if values is not None:
                plan = self._values.prepare(plan, values)  # type: ignore[union-attr]
                mode = self._runner.mode(plan)
            previous, self._mode = self._mode, mode
            try:
                if self._profile:
                    self._profiled(plan, env)
                else:
                    self._runner.run(plan, env, mode, deadline)
            finally:
                self._mode = previous
        # a fetched variable reference reads as the variable's value, as in TensorFlow
        return [None if s is None else self._read(env[s]) for s in plan.fetch_slots]

    @property
    def profile(self) -> Any:
        """The last run's :class:`~amanda.exec.profile.Profile` (``Session(profile=True)``), or None."""
        return self._last_profile

    def _profiled(self, plan: Plan, env: list) -> None:
        from amanda.exec.profile import Profile, run_profiled
        from amanda.exec.runner import blas_threads

        origin = time.perf_counter()
        with blas_threads(self._runner.budget):  # as a sequential run sets them
            events = run_profiled(plan, env, "cpu:0", origin)
        self._last_profile = Profile(self.model, events, time.perf_counter() - origin)

    def _read(self, value: Any) -> Any:
        if isinstance(value, _state.VariableRef):
            return self._state.get(value.key)
        return value

    def _translated(self, name: Any) -> Any:
        """A fetch or feed name of the user's model, in the executable model's terms."""
        if isinstance(name, Endpoint) or (isinstance(name, str) and not is_top_name(self.model, name)):
            return self._names.resolve(name)  # type: ignore[union-attr]
        return name

    def plan(self, fetches: Sequence[Any], feeds: Mapping[Any, Any] | Sequence[Any] = (), phase: Any = None) -> Plan:
        """The compiled plan for these fetches, fed names and phase (cached)."""
        _check_phase(phase)
        check_phase(self.model, phase, ExecutionError)
        return self._plan(_fetch_list(fetches), frozenset(_names(feeds, "feed")), phase, feeds)[0]

    def _plan(self, items: tuple, names: frozenset, phase: Any, feeds: Any) -> tuple[Plan, bool]:
        """The plan, and whether it is specialised to the feeds' type signature (which
        :func:`~amanda.exec.plan_cache.signature` gives only to feeds that fit their ports)."""
        types = signature(self._executable, items, feeds) if self._optimize else None
        key = (items, names, phase, types)
        plan = self._plans.get(key)
        if plan is None:
            with self._lock:
                plan = self._plans.get(key)
                if plan is None:
                    # planning builds many small containers and little garbage: a collector pass
                    # over the heap in the middle of it cost a 1,057-node model's first run up to
                    # 180 ms (194-375 ms, 194-197 ms paused)
                    with gc_paused():
                        model = self._model_for(phase)
                        _warn_skipped_updates(model, key[0], phase)
                        if types is not None:
                            model = optimized_for(model, types, self._pipeline)
                        plan = compile_plan(model, key[0], tuple(names), phase, context=self._context)
                    self._plans[key] = plan
        return plan, types is not None

    def close(self) -> None:
        """Stop the session's worker threads (a later run starts them again); a distributed
        session also drops its variables from the workers (``state`` keeps them)."""
        self._runner.close()
        if self._remote is not None:
            self._remote.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Session({self.model.name or self.model.type!r}, threads={self.threads}, {len(self._plans)} plans)"

    # -- internals ---------------------------------------------------------------------------

    def _model_for(self, phase: Any) -> Container:
        model = self._bound.get(phase)
        if model is None:
            model = self._bound[phase] = bind_phase(self._executable, phase)
        return model

    def _context(self, op: Container, path: Path, namespace: str, opset: int | None) -> OpContext:
        def run_body(body: Container, inputs: Mapping[str, Any], outputs: Sequence[str]) -> list:
            return self._body_runner(body, tuple(inputs), outputs, path, namespace)(list(inputs.values()))

        def iteration(i: int) -> None:
            self._iteration(i, path)

        def body_runner(body: Container, names: Sequence[str], outputs: Sequence[str]) -> Callable:
            return self._body_runner(body, names, outputs, path, namespace)

        return OpContext(self._state, _state.state_key(op), path, op, opset, namespace, run_body, iteration,
                         body_runner)

    def _iteration(self, i: int, path: Path) -> None:
        """Stop a loop at ``path`` before iteration ``i`` past the limit or the run's deadline."""
        limit = self._max_loop_iterations
        if limit is not None and i >= limit:
            where = format_path(path)
            raise ExecutionError(
                f"the loop `{where}` reached max_loop_iterations={limit} and would go on; raise "
                "Session(max_loop_iterations=...) if it is meant to run longer",
                path=where, expected=f"at most {limit} iterations", found=f"iteration {i + 1} about to start")
        deadline = self._runner.deadline
        if deadline is not None and time.monotonic() > deadline:
            raise timed_out(f"{format_path(path)} (iteration {i})")

    def _body_runner(self, body: Container, names: Sequence[str], outputs: Sequence[str], prefix: tuple,
                     namespace: str) -> Callable[[Sequence[Any]], list]:
        """``run(values) -> outputs`` of a nested container (a control-flow body) fed ``names``
        in order, with this session's runner and state: its plan (made once per body and fed
        names), slots and fetches looked up once, so that an iteration is a copy and a run."""
        key = (id(body), tuple(outputs), frozenset(names), prefix)
        cached = self._bodies.get(key)
        if cached is None or cached[0] is not body:  # held here, so its id is not reused meanwhile
            # every op of a body runs each iteration, as in a function call: its stateful
            # ops have effects even when no output depends on them
            wanted = (*outputs, Endpoint(SELF, CONTROL))
            cached = self._bodies[key] = (body, compile_plan(
                body, wanted, tuple(names), None, context=self._context, default_namespace=namespace, prefix=prefix))
        plan = cached[1]
        template, slots = plan.template, [plan.feed_slots[n] for n in names]
        fed = [(i, s) for i, s in enumerate(slots) if s is not None]
        fetches = plan.fetch_slots[:-1]
        runner = self._runner

        def run(values: Sequence[Any]) -> list:
            env = template.copy()
            for i, s in fed:
                env[s] = values[i]
            if self._mode is SEQUENTIAL:  # an iteration's body: straight to the interpreter
                run_sequential(plan, env, runner.deadline)
            else:
                runner.execute(plan, env, self._mode)
            return [env[s] for s in fetches]  # type: ignore[index]

        return run
