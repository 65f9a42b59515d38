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
import weakref
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from amanda.containers import CONTROL, SELF, Endpoint
from amanda.exec import control_flow  # noqa: F401  (registers If, Loop, Scan, SequenceMap)
from amanda.exec import sequences  # noqa: F401  (registers sequence and optional kernels)
from amanda.exec import state as _state
from amanda.exec.dispatch import OpContext
from amanda.exec.plan import Plan, bind_phase, compile_plan
from amanda.exec.resolve import normalize, normalize_all
from amanda.exec.runner import DEFAULT_OFFLOAD_ELEMENTS, SEQUENTIAL, Runner
from amanda.exec.tensorflow import executable_form, needs_conversion

if TYPE_CHECKING:
    from amanda.containers import Container

__all__ = ["Session"]


def _as_value(value: Any) -> Any:
    """A fed value as kernels expect it: arrays stay, scalars become 0-d arrays, sequences stay."""
    if type(value) is np.ndarray or isinstance(value, (list, tuple, np.ndarray)) or value is None:
        return value
    return np.asarray(value)


class Session:
    """Runs ``model``; see ``docs/execution.md``.

    ``threads``: None lets the session choose per plan (see :class:`~amanda.exec.runner.Runner`),
    1 runs the sequential interpreter, n > 1 the threaded scheduler on n workers.
    ``offload_elements``: in the threaded scheduler, ops whose largest input has at least
    this many elements go to a worker (heavy op types always do); 0 sends every op.
    """

    def __init__(
        self,
        model: "Container",
        threads: int | None = None,
        *,
        offload_elements: int = DEFAULT_OFFLOAD_ELEMENTS,
    ) -> None:
        self.model = model
        # a TensorFlow graph runs converted where its ops lack kernels; names keep working
        self._executable, self._names = model, None
        if needs_conversion(model):
            self._executable, self._names = executable_form(model)
        self._runner = Runner(threads, offload_elements)
        self._state: dict[str, Any] = {}
        self._plans: dict[tuple, Plan] = {}
        self._bodies: dict[tuple, tuple["Container", Plan]] = {}
        self._bound: dict[Any, "Container"] = {}
        self._lock = threading.RLock()
        self._mode = SEQUENTIAL
        # the workers hold no reference to the session, so it can be collected; stop them then
        self._finalizer = weakref.finalize(self, Runner.close, self._runner)

    # -- public ------------------------------------------------------------------------------

    @property
    def threads(self) -> int | None:
        """The thread setting the session was made with."""
        return self._runner.threads

    @property
    def state(self) -> Mapping[str, Any]:
        """The session's variables (state key -> value), read-only; they persist across runs."""
        return MappingProxyType(self._state)

    def run(self, fetches: Sequence[Any] | str, feeds: Mapping[Any, Any] | None = None, phase: Any = None) -> list:
        """Compute ``fetches`` (a list, or one name) given ``feeds``; a list in fetch order.

        A fetch that names an op (or a control port) runs it for its effects; its result
        is None.
        """
        items = [fetches] if isinstance(fetches, (str, Endpoint)) else fetches
        feeds = feeds or {}
        if self._names is not None:
            items = [self._translated(item) for item in items]
            feeds = {self._translated(name): value for name, value in feeds.items()}
        plan = self.plan(items, feeds, phase)
        env = plan.template.copy()
        slots = plan.feed_slots
        for name, value in feeds.items():
            s = slots[normalize(name)]
            if s is not None:
                env[s] = _as_value(value)
        with self._lock:
            mode = self._runner.mode(plan)
            previous, self._mode = self._mode, mode
            try:
                self._runner.run(plan, env, mode)
            finally:
                self._mode = previous
        # a fetched variable reference reads as the variable's value, as in TensorFlow
        return [None if s is None else self._read(env[s]) for s in plan.fetch_slots]

    def _read(self, value: Any) -> Any:
        if isinstance(value, _state.VariableRef):
            return self._state.get(value.key)
        return value

    def _translated(self, name: Any) -> Any:
        """A fetch or feed name of the user's model, in the executable model's terms."""
        if isinstance(name, Endpoint) or (isinstance(name, str) and ":" in name):
            return self._names.resolve(name)  # type: ignore[union-attr]
        return name

    def plan(self, fetches: Sequence[Any], feeds: Mapping[Any, Any] | Sequence[Any] = (), phase: Any = None) -> Plan:
        """The compiled plan for these fetches, fed names and phase (cached)."""
        names = frozenset(normalize_all(feeds))
        key = (normalize_all(fetches), names, phase)
        plan = self._plans.get(key)
        if plan is None:
            with self._lock:
                plan = self._plans.get(key)
                if plan is None:
                    model = self._model_for(phase)
                    plan = compile_plan(model, key[0], tuple(names), phase, context=self._context)
                    self._plans[key] = plan
        return plan

    def close(self) -> None:
        """Stop the session's worker threads (a later run starts them again)."""
        self._runner.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Session({self.model.name or self.model.type!r}, threads={self.threads}, {len(self._plans)} plans)"

    # -- internals ---------------------------------------------------------------------------

    def _model_for(self, phase: Any) -> "Container":
        model = self._bound.get(phase)
        if model is None:
            model = self._bound[phase] = bind_phase(self._executable, phase)
        return model

    def _context(self, op: "Container", path: tuple, namespace: str, opset: int | None) -> OpContext:
        def run_body(body: "Container", inputs: Mapping[str, Any], outputs: Sequence[str]) -> list:
            return self._run_body(body, inputs, outputs, path, namespace)

        return OpContext(self._state, _state.state_key(op), path, op, opset, namespace, run_body)

    def _run_body(
        self, body: "Container", inputs: Mapping[str, Any], outputs: Sequence[str], prefix: tuple, namespace: str
    ) -> list:
        """Run a nested container (a control-flow body) with this session's runner and state."""
        key = (id(body), tuple(outputs), frozenset(inputs), prefix)
        cached = self._bodies.get(key)
        if cached is None or cached[0] is not body:
            # the body is held here too, so its id cannot be reused while the entry lives
            # every op of a body runs each iteration, as in a function call: its stateful
            # ops have effects even when no output depends on them
            fetches = (*outputs, Endpoint(SELF, CONTROL))
            plan = compile_plan(body, fetches, tuple(inputs), None, context=self._context,
                                default_namespace=namespace, prefix=prefix)
            cached = self._bodies[key] = (body, plan)
        plan = cached[1]
        env = plan.template.copy()
        for name, value in inputs.items():
            s = plan.feed_slots[name]
            if s is not None:
                env[s] = value
        self._runner.execute(plan, env, self._mode)
        return [env[s] for s in plan.fetch_slots[:-1]]  # type: ignore[index]
