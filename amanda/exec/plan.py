"""The planner: prune a model to what the fetches need and compile it to flat steps.

A :class:`Plan` is what runs: a list of steps in topological order, each a :class:`Step`
``(fn, attrs, ins, outs, frees)`` whose kernel function is resolved and whose inputs
and outputs are integer slots of an environment list. Nothing on the hot path looks up
a path, formats a string or consults a registry; the metadata for messages and for
the threaded scheduler sits beside the steps.

Pruning walks back from the fetches through data and control edges and stops at fed
values, so an op no fetch needs does not run. ``Constant`` ops are evaluated once,
here, and their values live in the plan's environment template.

>>> import amanda, numpy as np
>>> from amanda import Container, op
>>> g = Container("G", "g", inputs=["x"], outputs=["y", "z"], attrs={"namespace": "amanda/onnx/17"},
...     children=[op("Relu", "r", ["X"], ["Y"]), op("Neg", "n", ["X"], ["Y"])],
...     edges=[("g:x", "r:X"), ("g:x", "n:X"), ("r:Y", "g:y"), ("n:Y", "g:z")])
>>> plan = compile_plan(g, ("y",), ("x",), None)
>>> plan.paths
(('r',),)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from amanda.containers import SELF, Endpoint, FlatGraph, bind, flatten, walk
from amanda.containers.records import Path
from amanda.containers.refs import resolve_references
from amanda.errors import ExecutionError, format_path
from amanda.exec.dispatch import (
    OpContext,
    output_positions,
    parse_namespace,
    resolve_kernel,
)
from amanda.exec.feeds import PortType, feed_types
from amanda.exec.inplace import donate
from amanda.exec.plan_fold import fold_constant, fold_pure
from amanda.exec.resolve import FetchSpec, Into, control_sources, data_source, resolve_feed, resolve_fetch
from amanda.exec.schedule import BY_SIZE, INLINE, POOL, Schedule, schedule, with_frees, writers
from amanda.exec.update_in_place import update_in_place

if TYPE_CHECKING:
    from amanda.containers import Container

__all__ = ["BY_SIZE", "INLINE", "POOL", "Plan", "Slot", "Step", "StepInfo", "bind_phase", "compile_plan"]

ContextFactory = Callable[["Container", Path, str, "int | None"], OpContext]

Slot = int
"""An index into a plan's environment list; slot 0 always holds None."""


class Step(NamedTuple):
    """One op as a plan runs it: ``fn(attrs, *env[ins])`` writes result ``k`` into slot ``s``
    for each ``(k, s)`` of ``outs``; ``frees`` are the slots this step reads last."""

    fn: Callable[..., tuple]
    attrs: Any
    ins: tuple[Slot, ...]
    outs: tuple[tuple[int, Slot], ...]
    frees: tuple[Slot, ...]


def bind_phase(model: Container, phase: Any) -> Container:
    """``model`` with phase-dependent choices resolved for ``phase`` (:func:`amanda.bind`);
    the model itself when ``phase`` is None."""
    return model if phase is None else bind(model, phase)


@dataclass(frozen=True)
class StepInfo:
    """What a step is, for messages and scheduling: its path (as shown), type, namespace,
    placement and path in the flattened model."""

    path: str
    op_type: str | None
    namespace: str | None
    placement: int
    at: Path = ()


@dataclass(eq=False)
class Plan:
    """A compiled, pruned computation (see the module docstring): its steps (with what each
    is), their schedule, and its inputs (the environment template, the slot of each feed and
    the feeds' types) and outputs (the slot of each fetch)."""

    steps: list[Step]
    infos: list[StepInfo]
    schedule: Schedule
    template: list
    feed_slots: dict[Any, Slot | None]
    fetch_slots: tuple[Slot | None, ...]
    feed_types: dict[Any, PortType] = field(default_factory=dict)
    tuner: Any = None  # the runner's BlasTuner for this plan, made on its first run

    @property
    def paths(self) -> tuple[Path, ...]:
        """The path of each step's op in the flattened model."""
        return tuple(info.at for info in self.infos)

    def __repr__(self) -> str:
        return f"Plan({len(self.steps)} steps, {len(self.template)} slots)"


def _namespaces(model: Container, default: str | None, wanted: set[Path]) -> dict[Path, str | None]:
    found: dict[Path, str | None] = {}
    for path, _node, attrs in walk(model):
        if path in wanted:
            found[path] = attrs.get("namespace", default)
    return found


def _missing_error(model: Container, missing: dict[str, str]) -> ExecutionError:
    parts = [f"input `{name}` of `{model.name or '<root>'}` (needed by fetch `{label}`)" for name, label in missing.items()]
    first = next(iter(missing))
    return ExecutionError(
        "missing feed for " + "; ".join(parts) + "; pass it in feeds={...}",
        path=model.name, expected=f"a feed for `{first}`", found="none",
    )


def _label(item: Any) -> str:
    return item if isinstance(item, str) else str(Endpoint.of(item) if not isinstance(item, Endpoint) else item)


def compile_plan(
    model: Container,
    fetches: Sequence[Any],
    feeds: Sequence[Any],
    phase: Any = None,
    *,
    context: ContextFactory | None = None,
    default_namespace: str | None = None,
    prefix: Path = (),
) -> Plan:
    """Prune ``model`` to what ``fetches`` need given the ``feeds`` names, and compile it.

    ``context`` builds the :class:`OpContext` of session kernels (state, nested runs);
    ``default_namespace`` applies to ops with no namespace of their own (bodies of control
    flow inherit their op's); ``prefix`` is prepended to op paths in messages.
    """
    model = resolve_references(model)  # each call's body with the call's attribute values
    flat = flatten(model)
    targets = [resolve_fetch(model, flat, f, phase) for f in fetches]
    fed_values: dict[Any, Any] = {}
    fed_into: dict[Into, Any] = {}
    for name in feeds:
        kind, key = resolve_feed(model, flat, name, phase)
        for k in key if kind == "into" else (key,):
            table = fed_into if kind == "into" else fed_values
            if k in fed_values or k in fed_into:
                raise ExecutionError.at(model.name, "each value fed once", f"{_label(name)} feeds {k} again")
            table[k] = name

    pruned = _Pruned(targets, fed_values, fed_into)
    _prune(flat, pruned, fetches, phase)
    if pruned.missing:
        raise _missing_error(model, pruned.missing)
    order = tuple(p for p in flat.topological_order() if p in pruned.needed)
    plan = _compile(model, flat, order, pruned, context, default_namespace, prefix)
    plan.feed_types = feed_types(model, feeds)
    return plan


@dataclass
class _Pruned:
    """What pruning found: ops to run, values someone reads, inputs nobody fed, and each
    needed op's data sources and control predecessors."""

    targets: list[FetchSpec]
    fed_values: dict[Any, Any]
    fed_into: dict[Into, Any]
    needed: set[Path] = field(default_factory=set)
    wanted: set[Any] = field(default_factory=set)
    missing: dict[str, str] = field(default_factory=dict)
    sources: dict[Into, Any] = field(default_factory=dict)
    controls: dict[Path, list[Path]] = field(default_factory=dict)


def _prune(flat: FlatGraph, pruned: _Pruned, fetches: Sequence[Any], phase: Any) -> None:
    needed, wanted, missing = pruned.needed, pruned.wanted, pruned.missing
    sources, controls, fed_values, fed_into = pruned.sources, pruned.controls, pruned.fed_values, pruned.fed_into
    stack: list[tuple[Path, str]] = []

    def need_value(key: Any, label: str) -> None:
        wanted.add(key)
        if key in fed_values:
            return
        if key[0] is SELF:
            missing.setdefault(key[1], label)
            return
        need_op(key[0], label)

    def need_op(path: Path, label: str) -> None:
        if path not in needed:
            needed.add(path)
            stack.append((path, label))

    for (kind, key), item in zip(pruned.targets, fetches):
        label = _label(item)
        if kind == "value":
            need_value(key, label)
        else:
            for path in key:
                need_op(path, label)
    while stack:
        path, label = stack.pop()
        for port in flat.ops[path].input_names:
            into = Into(path, port)
            if into in fed_into:
                continue
            source = data_source(flat, path, port, phase)
            sources[into] = source
            if source is not None:
                need_value(source, label)
        controls[path] = control_sources(flat, path, phase)
        for before in controls[path]:
            need_op(before, label)


class _Op(NamedTuple):
    """An op to plan, resolved: its path, where messages put it, its namespace, its kernel
    (a session kernel bound to its context) and its input and output slots."""

    path: Path
    op: Container
    where: str
    namespace: str | None
    kernel: Any
    fn: Callable[..., tuple]
    ins: tuple[Slot, ...] = ()
    outs: tuple[tuple[int, Slot], ...] = ()


def _resolve(model: Container, flat: FlatGraph, order: tuple[Path, ...], context: ContextFactory | None,
             default_namespace: str | None, prefix: Path) -> list[_Op]:
    """Stage 1: each op's namespace and kernel (session kernels get their context)."""
    namespaces = _namespaces(model, default_namespace, set(order))
    resolved = []
    for path in order:
        op = flat.ops[path]
        where = format_path(prefix + path)
        namespace = namespaces.get(path, default_namespace)
        kernel = resolve_kernel(op, where, namespace)
        fn = kernel.fn
        if kernel.session:
            assert context is not None, "session kernels need an op context"
            opset = parse_namespace(namespace)[2] if namespace else None
            fn = partial(fn, context(op, prefix + path, namespace, opset))  # type: ignore[arg-type]
        resolved.append(_Op(path, op, where, namespace, kernel, fn))
    return resolved


class _Slots:
    """Stage 2: an environment slot per value read (slot 0 holds None: an unfed optional input)."""

    def __init__(self) -> None:
        self.template: list = [None]
        self.slot_of: dict[Any, int] = {}

    def __call__(self, key: Any) -> int:
        found = self.slot_of.get(key)
        if found is None:
            found = self.slot_of[key] = len(self.template)
            self.template.append(None)
        return found

    def feeds(self, pruned: _Pruned, running: set[Path]) -> dict[Any, int | None]:
        """The slot of each feed name (None for a feed nothing planned reads)."""
        feed_slots: dict[Any, int | None] = {}
        for key, name in pruned.fed_values.items():
            feed_slots[name] = self(key) if key in pruned.wanted else None
        for into, name in pruned.fed_into.items():
            if into[0] in running:
                if feed_slots.get(name) is None:
                    feed_slots[name] = self(("fed", name))
                self.slot_of[into] = feed_slots[name]  # type: ignore[assignment]
            else:
                feed_slots.setdefault(name, None)
        return feed_slots

    def wire(self, r: _Op, pruned: _Pruned) -> _Op:
        """``r`` with the slots it reads and the slots its wanted outputs go to."""
        ins = []
        for port in r.op.input_names:
            into = Into(r.path, port)
            if into in pruned.fed_into:
                ins.append(self.slot_of[into])
                continue
            source = pruned.sources.get(into)
            ins.append(0 if source is None else self(source))
        outs = tuple((k, self(Endpoint(r.path, name)))
                     for k, name in zip(output_positions(r.op, r.namespace), r.op.output_names)
                     if Endpoint(r.path, name) in pruned.wanted and Endpoint(r.path, name) not in pruned.fed_values)
        return r._replace(ins=tuple(ins), outs=outs)


def _foldable(r: _Op) -> bool:
    """Whether the op is evaluated once, at plan time: a source the registry marks constant."""
    return not r.kernel.session and not r.ins and r.kernel.constant


def _compile(
    model: Container, flat: FlatGraph, order: tuple[Path, ...], pruned: _Pruned,
    context: ContextFactory | None, default_namespace: str | None, prefix: Path,
) -> Plan:
    """The stages: resolve kernels, allocate slots, fold constants, optimiser updates in place,
    schedule, donate."""
    resolved = _resolve(model, flat, order, context, default_namespace, prefix)
    slots = _Slots()
    feed_slots = slots.feeds(pruned, set(order))
    wired = [slots.wire(r, pruned) for r in resolved]
    running = []
    constant = {0}  # slots whose value is known now: folded ops' outputs (slot 0: None)
    for r in wired:  # stage 3: constants, and pure ops of constants, now, into the template
        if _foldable(r):
            fold_constant(r.fn, r.kernel.attrs, r.outs, slots.template, r.where, r.namespace)
        elif r.kernel.session or not fold_pure(r.fn, r.kernel.attrs, str(r.op.type), r.namespace, r.ins, r.outs,
                                               slots.template, constant):
            running.append(r)
            continue
        constant.update(s for _, s in r.outs)
    fetch_slots = tuple(slots(key) if kind == "value" else None for kind, key in pruned.targets)
    keep = frozenset(s for s in fetch_slots if s is not None)
    running, controls = update_in_place(running, keep, pruned.controls)  # optimiser steps on the store
    steps = with_frees([Step(r.fn, r.kernel.attrs, r.ins, r.outs, ()) for r in running], keep)
    infos = [StepInfo(r.where, r.op.type, r.namespace,
                      INLINE if r.kernel.session else (POOL if r.kernel.heavy else BY_SIZE), r.path)
             for r in running]
    plan_schedule = schedule(steps, [r.path for r in running], controls,  # stage 4
                             [info.placement for info in infos], [r.kernel.heavy for r in running], keep)
    steps = donate(steps, [info.op_type for info in infos], [_family(info) for info in infos],  # stage 5
                   writers(steps), list(plan_schedule.uses), keep)
    return Plan(steps=steps, infos=infos, schedule=plan_schedule, template=slots.template,
                feed_slots=feed_slots, fetch_slots=fetch_slots)


def _family(info: StepInfo) -> str | None:
    """The kernel family of a step run by a plain kernel (whose registry entry says whether
    it is ``fresh``), None for one run inline (session kernels)."""
    return parse_namespace(info.namespace)[0] if info.namespace and info.placement != INLINE else None
