"""The inference driver: types of every port of every node, at every depth, cached per container.

Inference runs one container level at a time: the children of a level in topological order,
each leaf op through :func:`amanda.types.ops.infer_op`, each nested container as a level of its
own (on an explicit stack, so nesting of any depth is inferred level by level). The
result of a level is cached on the container object, keyed by its input types and values, so
after an edit only the levels on the changed path are inferred again (structural sharing makes
every untouched subtree the same object, with its cache). A level whose edges reach into
descendants by path, or that carries tombstones, is inferred on its effective view
(``flatten``) instead, since its children's types then depend on more than their inputs.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any

import numpy as np

from amanda.containers.edge import CONTROL, SELF
from amanda.containers.order import ordered
from amanda.containers.records import Path
from amanda.errors import Problem
from amanda.namespaces.name import NamespaceName
from amanda.ops.registry import ONNX, entry
from amanda.types.node import ABSENT, Partial
from amanda.types.ops import OpResult, infer_op
from amanda.types.tensor_type import (
    OptionalType,
    SequenceType,
    TensorType,
    TypeMismatch,
    from_attrs,
    refine,
)

__all__ = ["Level", "infer_level", "inner_levels", "summary"]


class Level:
    """Inference of one container given its input types (paths inside are relative to it)."""

    __slots__ = ("bodies", "deep", "inputs", "looped", "ops", "outputs", "ports", "subs", "summary", "values")

    def __init__(self) -> None:
        self.inputs: dict[str, Any] = {}
        self.outputs: dict[str, Any] = {}
        self.values: dict[str, Any] = {}  # known values of output ports
        self.ops: dict[tuple, tuple[Any, OpResult]] = {}  # leaf path -> (op, result)
        self.ports: dict[tuple, Any] = {}  # (path, port, side) of nested containers (flat levels)
        self.subs: dict[str, Level] = {}  # child name -> its level (per-level inference)
        self.deep: dict[tuple, Level] = {}  # path -> level of a container kept whole (opened levels)
        self.bodies: dict[tuple, Level] = {}  # (*op path, attribute) -> the body's level
        self.looped = False  # the level's units feed each other in a loop: its effective view may have a cycle
        self.summary: tuple[bool, bool] | None = None  # (any problem, any loop) here or below: see summary()


def inner_levels(level: Level) -> list[Level]:
    """The levels directly below ``level``: nested containers' and the bodies its ops hold."""
    found = [body for _, result in level.ops.values() for body in result.bodies.values()]
    return found + list(level.subs.values()) + list(level.deep.values())


def summary(level: Level) -> tuple[bool, bool]:
    """Whether ``level`` or any level below it has a problem, and whether any loops; memoised on
    the (cached, never changed) levels, so after an edit only the new levels are walked."""
    stack = [(level, False)]
    while stack:  # post-order without recursion: bodies may nest deeply
        here, expanded = stack.pop()
        if here.summary is not None:
            continue
        below = inner_levels(here)
        if not expanded:
            stack.append((here, True))
            stack.extend((b, False) for b in below if b.summary is None)
            continue
        problems = any(result.problems for _, result in here.ops.values())
        looped = here.looped
        for b in below:
            assert b.summary is not None  # computed before its parent
            problems, looped = problems or b.summary[0], looped or b.summary[1]
        here.summary = (problems, looped)
    assert level.summary is not None
    return level.summary


def _value_key(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, Partial):
        return value.key()
    return (value.dtype.str, value.shape, value.tobytes())


Request = tuple  # (container, input types, input values, namespace): a nested level to infer


def infer_level(container: Any, types: tuple, values: tuple, namespace: str | None) -> Level:
    """The (cached) inference of ``container`` whose input ports have ``types`` and ``values``.

    Levels are inferred by generators that yield each nested container they need and receive
    its :class:`Level`; this loop runs them on an explicit stack, so nesting of any depth is
    inferred level by level, each level answered from its own cache where it is unchanged.
    """
    cache, key = _slot(container, types, values, namespace)
    found = cache.get(key)
    if found is not None:
        return found  # type: ignore[no-any-return]
    stack = [(_start(container, types, values, namespace), cache, key)]
    reply: Any = None  # the Level a frame asked for (None to start a frame)
    while True:
        frame, cache, key = stack[-1]
        try:
            child, c_types, c_values, c_ns = frame.send(reply)
        except StopIteration as done:
            cache[key] = reply = done.value
            stack.pop()
            if not stack:
                return reply
            continue
        c_cache, c_key = _slot(child, c_types, c_values, c_ns)
        reply = c_cache.get(c_key)
        if reply is None:
            stack.append((_start(child, c_types, c_values, c_ns), c_cache, c_key))


def _slot(container: Any, types: tuple, values: tuple, namespace: str | None) -> tuple[dict, tuple]:
    """The container's cache of levels and the key of these inputs in it."""
    cache = container._cached("types", _new_cache)
    return cache, (types, tuple(_value_key(v) for v in values), namespace)


def _start(container: Any, types: tuple, values: tuple, namespace: str | None) -> Generator[Request, Level, Level]:
    inputs = {p.name: (t, v) for p, t, v in zip(container.inputs, types, values)}
    ns = container.attrs.get("namespace", namespace)
    if _needs_flat(container):
        return _flat(container, inputs, ns)
    return _per_level(container, inputs, ns)


def _new_cache(_: Any) -> dict:
    return {}


def _needs_flat(c: Any) -> bool:
    if c.tombstones:
        return True
    for edge in c.edges:
        src, dst = edge[0][0], edge[1][0]
        if (src is not SELF and len(src) > 1) or (dst is not SELF and len(dst) > 1):
            return True
    return False


def declared_type(attrs: Any, problems: list, path: Path, what: str) -> Any:
    """The type port attributes declare; a malformed one is a problem (and no type)."""
    if not attrs:
        return None
    try:
        return from_attrs(attrs)
    except TypeMismatch as exc:
        problems.append(Problem(path, f"{what} with a valid type ({exc.expected})", str(exc.found)))
        return None


def _declare(level: Level, c: Any, inputs: Mapping) -> None:
    for port in c.inputs:
        level.inputs[port.name] = inputs[port.name][0]


def _finish_outputs(level: Level, c: Any, found: Mapping, problems: list) -> None:
    for port in c.outputs:
        t, v = found.get(port.name, (None, None))
        declared = declared_type(port.attrs, problems, (), f"output port {port.name!r}")
        if declared is not None:
            try:
                t = refine(t, declared)
            except TypeMismatch:
                problems.append(Problem((), f"output port {port.name!r} of type {t!r} (inferred)",
                                        f"declared {declared!r}"))
        level.outputs[port.name] = t
        if v is not None:
            level.values[port.name] = v


def _op_inputs(op: Any, source: Any) -> tuple[list, list]:
    types: list = []
    values: list = []
    for port in op.inputs:
        pa = port.attrs
        if pa and "captured" in pa and pa["captured"]:
            continue
        got = source(port.name)
        if got is None:
            types.append(ABSENT)
            values.append(None)
        else:
            types.append(got[0])
            values.append(got[1])
    return types, values


def _body_fn(op: Any, path: Path, namespace: str | None, source: Any, result: OpResult) -> Any:
    captured = {}
    for port in op.inputs:
        if port.attrs and port.attrs.get("captured"):
            captured[port.attrs.get("onnx_name", port.name)] = source(port.name) or (None, None)

    def body(label: str, graph: Any, formal: list) -> list:
        types, values = [], []
        it = iter(formal)
        for port in graph.inputs:
            if port.attrs and port.attrs.get("captured"):
                t, v = captured.get(port.name, (None, None))
            else:
                t, v = next(it, None), None
                declared = declared_type(port.attrs, result.problems, (*path, label),
                                         f"input port {port.name!r}")
                if declared is not None:
                    try:
                        t = refine(t, declared)
                    except TypeMismatch:
                        result.problems.append(Problem((*path, label, port.name), f"{t!r}", f"declared {declared!r}"))
            types.append(t)
            values.append(v)
        sub = infer_level(graph, tuple(types), tuple(values), graph.attrs.get("namespace", namespace))
        result.bodies[label] = sub
        return [sub.outputs.get(p.name) for p in graph.outputs]

    return body


def _has_bodies(op: Any, namespace: str | None) -> bool:
    """Whether the op's registry entry names attributes holding bodies (If, Loop, Scan …)."""
    name = NamespaceName.parse(namespace) if namespace else None
    found = entry(name.family if name else ONNX, str(op.type), domain=name.domain if name else "")
    return found is not None and bool(found.bodies)


def _leaf(op: Any, path: Path, ns: str | None, source: Any, level: Level) -> OpResult:
    types, values = _op_inputs(op, source)
    holder = OpResult()
    body = _body_fn(op, path, ns, source, holder) if _has_bodies(op, ns) else None
    result = infer_op(op, path, ns, types, values, body)
    result.bodies = holder.bodies
    result.problems += holder.problems
    level.ops[path] = (op, result)
    return result


def _order(c: Any) -> tuple[list, bool]:
    """Children such that producers come first (those a cycle holds up last, inputs unknown),
    and whether the children's edges loop (a child feeding itself, or a cycle among them)."""
    pairs = [(e[0][0][0], e[1][0][0]) for e in c.edges if e[0][0] is not SELF and e[1][0] is not SELF]
    looped = any(a == b for a, b in pairs)
    return ordered([child.name for child in c.children], [(a, b) for a, b in pairs if a != b], looped)


def _per_level(c: Any, inputs: Mapping, ns: str | None) -> Generator[Request, Level, Level]:
    level = Level()
    _declare(level, c, inputs)
    into: dict[tuple, Any] = {}
    for edge in c.edges:
        dst = edge[1]
        if dst[1] != CONTROL and (dst[0], dst[1]) not in into:
            into[(dst[0], dst[1])] = edge[0]
    env: dict[tuple, tuple] = {}

    def lookup(key: tuple) -> tuple | None:
        src = into.get(key)
        if src is None:
            return None
        if src[0] is SELF:
            return inputs.get(src[1], (None, None))  # type: ignore[no-any-return]
        return env.get((src[0][0], src[1]), (None, None))

    problems: list[Problem] = []
    names, level.looped = _order(c)
    for name in names:
        child = c.children[c._index[name]]
        ns_child = child.attrs.get("namespace", ns) if child.attrs else ns
        here = (name,)
        if child.is_op:
            result = _leaf(child, here, ns_child, lambda p, h=here: lookup((h, p)), level)
            for j, port in enumerate(child.outputs):
                env[(name, port.name)] = (result.outputs[j], result.values.get(j))
            continue
        types, values = [], []
        for port in child.inputs:
            t, v = lookup((here, port.name)) or (None, None)
            declared = declared_type(port.attrs, problems, (name,), f"input port {port.name!r}")
            if declared is not None:
                try:
                    t = refine(t, declared)
                except TypeMismatch:
                    problems.append(Problem((name, port.name), f"{t!r}", f"declared {declared!r}"))
            types.append(t)
            values.append(v)
        sub = yield child, tuple(types), tuple(values), ns_child
        level.subs[name] = sub
        for port in child.outputs:
            env[(name, port.name)] = (sub.outputs.get(port.name), sub.values.get(port.name))
    found = {}
    for port in c.outputs:
        got = lookup((SELF, port.name))
        if got is not None:
            found[port.name] = got
    _finish_outputs(level, c, found, problems)
    if problems:
        level.ops[("<boundary>",)] = (c, _problems_only(problems))
    return level


def _problems_only(problems: list) -> OpResult:
    r = OpResult()
    r.problems = problems
    return r


def _flat(c: Any, inputs: Mapping, ns: str | None) -> Generator[Request, Level, Level]:
    """Infer on a view that opens the containers this level reaches into; every other
    container is inferred on its own, from its cache."""
    from amanda.types.opened import OpenedView

    level = Level()
    _declare(level, c, inputs)
    view = OpenedView(c, ns)
    env: dict[tuple, tuple] = {}

    def value_of(src: Any) -> tuple | None:
        if src is None:
            return None
        if src[0] is SELF:
            return inputs.get(src[1], (None, None))  # type: ignore[no-any-return]
        return env.get(src, (None, None))

    problems: list[Problem] = []
    paths, level.looped = view.order()
    for path in paths:
        node, ns_unit = view.units[path]
        if node.is_op:
            result = _leaf(node, path, ns_unit, lambda p, h=path: value_of(view.source(h, p)), level)
            for j, port in enumerate(node.outputs):
                env[(path, port.name)] = (result.outputs[j], result.values.get(j))
            continue
        types, values = [], []
        for port in node.inputs:
            t, v = value_of(view.source(path, port.name)) or (None, None)
            declared = declared_type(port.attrs, problems, path, f"input port {port.name!r}")
            if declared is not None:
                try:
                    t = refine(t, declared)
                except TypeMismatch:
                    problems.append(Problem((*path, port.name), f"{t!r}", f"declared {declared!r}"))
            types.append(t)
            values.append(v)
        sub = yield node, tuple(types), tuple(values), ns_unit
        level.deep[path] = sub
        for port in node.outputs:
            env[(path, port.name)] = (sub.outputs.get(port.name), sub.values.get(port.name))
    for (path, port, side), src in view.junctions.items():
        got = value_of(src)
        if got is not None:
            level.ports[(path, port, side)] = got[0]
    found = {}
    for name, src in view.outputs.items():
        got = value_of(src)
        if got is not None:
            found[name] = got
    _finish_outputs(level, c, found, problems)
    if problems:
        level.ops[("<boundary>",)] = (c, _problems_only(problems))
    return level


def top_inputs(model: Any, given: Mapping[str, Any] | None, problems: list[Problem]) -> tuple[tuple, tuple]:
    """Input types of ``model``: declared in port attributes, overridden by ``given``. A
    malformed declared type is appended to ``problems`` (the port's type is then unknown); a
    malformed given one raises."""
    given = dict(given or {})
    types = []
    for port in model.inputs:
        t = given.pop(port.name, None)
        if t is None:
            types.append(declared_type(port.attrs, problems, (), f"input port {port.name!r}"))
            continue
        try:
            types.append(_given_type(port, t))
        except TypeMismatch as exc:
            raise TypeMismatch(f"input port {port.name!r} of the model: {exc}", path=(),
                               expected=exc.expected, found=exc.found) from None
    if given:
        from amanda.errors import PathError

        raise PathError(f"infer_types was given types for {sorted(given)}, which are not input ports "
                        f"of the model (it has {[p.name for p in model.inputs]})",
                        expected="input port names", found=str(sorted(given)))
    return tuple(types), (None,) * len(types)


def _given_type(port: Any, t: Any) -> Any:
    if t is None:
        return from_attrs(port.attrs) if port.attrs else None
    if isinstance(t, Mapping):
        return from_attrs(t)
    if isinstance(t, tuple) and len(t) == 2:
        return from_attrs({"dtype": t[0], "shape": t[1]})
    if isinstance(t, np.ndarray):
        return TensorType(t.dtype, t.shape)
    if isinstance(t, (TensorType, SequenceType, OptionalType)):
        return t
    raise TypeMismatch(f"a type is a TensorType, (dtype, shape), port attributes or an array, "
                       f"found {t!r}", expected="a type", found=repr(t)[:80])
