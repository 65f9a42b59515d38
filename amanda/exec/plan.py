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

import numpy as np

from amanda.containers import SELF, Endpoint, FlatGraph, bind, flatten, walk
from amanda.containers.records import Path
from amanda.containers.refs import resolve_references
from amanda.errors import ExecutionError, format_path
from amanda.exec.dispatch import (
    OpContext,
    failure,
    output_positions,
    parse_namespace,
    resolve_kernel,
)
from amanda.exec.feeds import PortType, feed_types
from amanda.exec.inplace import donate
from amanda.exec.kernels.relaid import mark_constant
from amanda.exec.resolve import FetchSpec, Into, control_sources, data_source, resolve_feed, resolve_fetch

if TYPE_CHECKING:
    from amanda.containers import Container

__all__ = ["Plan", "Slot", "Step", "StepInfo", "bind_phase", "compile_plan"]

# how the threaded scheduler places a step
INLINE, POOL, BY_SIZE = 0, 1, 2

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
    """What a step is, for messages and scheduling: its path, type, namespace and placement."""

    path: str
    op_type: str | None
    namespace: str | None
    placement: int


@dataclass(eq=False)
class Plan:
    """A compiled, pruned computation (see the module docstring)."""

    steps: list[Step]
    infos: list[StepInfo]
    template: list
    feed_slots: dict[Any, Slot | None]
    fetch_slots: tuple[Slot | None, ...]
    paths: tuple[Path, ...]
    preds: list[int]
    succs: list[tuple[int, ...]]
    reads: list[tuple[Slot, ...]]
    uses: list[int]
    keep: frozenset[Slot]
    parallel: bool
    uses_blas: bool
    placements: list[int]
    feed_types: dict[Any, PortType] = field(default_factory=dict)
    tuner: Any = None  # the runner's BlasTuner for this plan, made on its first run

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


def _compile(
    model: Container, flat: FlatGraph, order: tuple[Path, ...], pruned: _Pruned,
    context: ContextFactory | None, default_namespace: str | None, prefix: Path,
) -> Plan:
    wanted, sources, fed_values, fed_into = pruned.wanted, pruned.sources, pruned.fed_values, pruned.fed_into
    template: list = [None]  # slot 0 always holds None: the value of an unfed optional input
    slot_of: dict[Any, int] = {}

    def slot(key: Any) -> int:
        found = slot_of.get(key)
        if found is None:
            found = slot_of[key] = len(template)
            template.append(None)
        return found

    feed_slots: dict[Any, int | None] = {}
    for key, name in fed_values.items():
        feed_slots[name] = slot(key) if key in wanted else None
    running = set(order)
    for into, name in fed_into.items():
        if into[0] in running:
            if feed_slots.get(name) is None:
                feed_slots[name] = slot(("fed", name))
            slot_of[into] = feed_slots[name]  # type: ignore[assignment]
        else:
            feed_slots.setdefault(name, None)

    namespaces = _namespaces(model, default_namespace, set(order))
    steps: list[Step] = []
    infos: list[StepInfo] = []
    paths: list[Path] = []
    step_of: dict[Path, int] = {}
    writer: dict[int, int] = {}
    heavy: list[bool] = []
    for path in order:
        op = flat.ops[path]
        where = format_path(prefix + path)
        namespace = namespaces.get(path, default_namespace)
        resolved = resolve_kernel(op, where, namespace)
        ins = []
        for port in op.input_names:
            into = Into(path, port)
            if into in fed_into:
                ins.append(slot_of[into])
                continue
            source = sources.get(into)
            ins.append(0 if source is None else slot(source))
        outs = tuple((k, slot(Endpoint(path, name)))
                     for k, name in zip(output_positions(op, namespace), op.output_names)
                     if Endpoint(path, name) in wanted and Endpoint(path, name) not in fed_values)
        fn = resolved.fn
        if resolved.session:
            assert context is not None, "session kernels need an op context"
            opset = parse_namespace(namespace)[2] if namespace else None
            fn = partial(fn, context(op, prefix + path, namespace, opset))  # type: ignore[arg-type]
        elif not ins and resolved.constant:  # a source known before any run
            _fold(fn, resolved.attrs, outs, template, where, namespace)
            continue
        placement = INLINE if resolved.session else (POOL if resolved.heavy else BY_SIZE)
        step_of[path] = len(steps)
        for _, s in outs:
            writer[s] = len(steps)
        steps.append(Step(fn, resolved.attrs, tuple(ins), outs, ()))
        infos.append(StepInfo(where, op.type, namespace, placement))
        paths.append(path)
        heavy.append(resolved.heavy)

    fetch_slots = tuple(slot(key) if kind == "value" else None for kind, key in pruned.targets)
    keep = frozenset(s for s in fetch_slots if s is not None)
    steps = _with_frees(steps, keep)
    preds, succs, reads, uses = _graph(steps, paths, writer, step_of, pruned.controls)
    steps = donate(steps, [info.op_type for info in infos],
                   [_family(info) for info in infos],
                   writer, uses, keep)
    return Plan(
        steps=steps, infos=infos, template=template, feed_slots=feed_slots, fetch_slots=fetch_slots,
        paths=tuple(paths), preds=preds, succs=succs, reads=reads, uses=uses, keep=keep,
        parallel=_parallel(preds, succs, heavy), uses_blas=any(heavy),
        placements=[info.placement for info in infos],
    )


def _family(info: StepInfo) -> str | None:
    """The kernel family of a step run by a plain kernel (whose registry entry says whether
    it is ``fresh``), None for one run inline (session kernels)."""
    return parse_namespace(info.namespace)[0] if info.namespace and info.placement != INLINE else None


def _fold(fn: Callable, attrs: Any, outs: tuple, template: list, where: str, namespace: Any) -> None:
    """Evaluate a Constant now; its value is shared by every run, so it is made read-only."""
    try:
        result = fn(attrs)
    except Exception as exc:  # noqa: BLE001 - re-raised with the op's path
        raise failure(where, "Constant", namespace, (), exc) from exc
    for k, s in outs:
        value = result[k]
        if isinstance(value, np.ndarray) and value.flags.writeable:
            value = value.view()
            value.setflags(write=False)
        mark_constant(value)  # the same array on every run: kernels may keep a relaid copy
        template[s] = value


def _with_frees(steps: list[Step], keep: frozenset[Slot]) -> list[Step]:
    """Each step with the slots whose last reader it is (freed right after it runs)."""
    last: dict[int, int] = {}
    for i, (_, _, ins, outs, _) in enumerate(steps):
        for s in ins:
            last[s] = i
        for _, s in outs:
            last.setdefault(s, i)  # written but never read: free at once (unless fetched)
    frees: list[list[int]] = [[] for _ in steps]
    for s, i in last.items():
        if s and s not in keep:
            frees[i].append(s)
    return [step._replace(frees=tuple(sorted(frees[i]))) for i, step in enumerate(steps)]


def _graph(
    steps: list[Step], paths: list[Path], writer: dict[Slot, int], step_of: dict[Path, int],
    controls: dict[Path, list[Path]],
) -> tuple[list[int], list[tuple[int, ...]], list[tuple[Slot, ...]], list[int]]:
    """Predecessor counts, successors, distinct slots read per step and readers per slot."""
    preds: list[int] = []
    succ_sets: list[set[int]] = [set() for _ in steps]
    reads: list[tuple[int, ...]] = []
    uses: dict[int, int] = {}
    for j, (step, path) in enumerate(zip(steps, paths)):
        ins = step.ins
        before = {writer[s] for s in ins if s in writer}
        for source in controls.get(path, ()):
            i = step_of.get(source)
            if i is not None:  # a folded Constant has no step and nothing to wait for
                before.add(i)
        before.discard(j)
        for i in before:
            succ_sets[i].add(j)
        preds.append(len(before))
        distinct = tuple(sorted({s for s in ins if s}))
        reads.append(distinct)
        for s in distinct:
            uses[s] = uses.get(s, 0) + 1
    size = 1 + max([0, *uses, *writer])
    use_list = [uses.get(s, 0) for s in range(size)]
    return preds, [tuple(sorted(s)) for s in succ_sets], reads, use_list


def _parallel(preds: list[int], succs: list[tuple[int, ...]], heavy: list[bool]) -> bool:
    """Whether at least half the heavy steps can run beside another heavy step.

    A heavy step's level counts the heavy steps on its longest path from the inputs;
    heavy steps sharing a level are independent of each other.
    """
    total = sum(heavy)
    if total < 2:
        return False
    level = [0] * len(preds)
    for i in range(len(preds)):  # steps are in topological order
        if heavy[i]:
            level[i] += 1
        for j in succs[i]:
            if level[j] < level[i]:
                level[j] = level[i]
    count: dict[int, int] = {}
    for i, h in enumerate(heavy):
        if h:
            count[level[i]] = count.get(level[i], 0) + 1
    beside = sum(c for c in count.values() if c >= 2)
    return 2 * beside >= total
