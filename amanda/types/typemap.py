"""``infer_types(model, inputs=None)``: the type of every port of every node, at every depth.

The answer is a :class:`TypeMap`, a read-only mapping from ``(path, port)`` to a type, where
``path`` is a tuple of names from the top (``()`` for the model's own boundary ports) and a
body of an If/Loop/Scan op is reached through its attribute name
(``('loop', 'body', 'add')``). Boundary ports of nested containers are included. Where a port
name is both an input and an output of one node, the output is what ``[]`` gives;
:meth:`TypeMap.input` and :meth:`TypeMap.output` choose. ``annotate`` writes the types into
port attributes, giving a new container. A mapping was chosen over an annotated container as
the primary answer because it is cached per container object and shares the results of
untouched subtrees after an edit; an annotated copy would have to rebuild every node.

>>> import amanda
>>> from amanda.types import TensorType
>>> relu = amanda.op("Relu", "relu", inputs=["X"], outputs=["Y"])
>>> g = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs={"dtype": "float32", "shape": ["n", 4]})],
...     outputs=["y"], children=[relu], edges=[("g:x", "relu:X"), ("relu:Y", "g:y")],
...     attrs={"namespace": "amanda/onnx/17"})
>>> types = infer_types(g)
>>> types[("relu",), "Y"], types[(), "y"]
(float32[n,4], float32[n,4])
>>> infer_types(g, {"x": TensorType("float16", (2, 4))})[(), "y"]
float16[2,4]
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from amanda.containers.arguments import expect_container, expect_mapping
from amanda.containers.cycles import cycle_problems
from amanda.containers.records import Path
from amanda.containers.refs import resolve_references
from amanda.errors import Problem
from amanda.types.infer import Level, infer_level, summary, top_inputs
from amanda.types.node import ABSENT
from amanda.types.tensor_type import Type

__all__ = ["TypeMap", "infer_types"]

Key = tuple  # (path, port)


def infer_types(model: Any, inputs: Mapping[str, Any] | None = None) -> TypeMap:
    """Types of every port of ``model`` from its declared input types or from ``inputs``.

    ``inputs`` maps input port names to a ``TensorType``, a ``(dtype, shape)`` pair, port
    attributes (``{dtype, shape}``) or a sample array. Results are cached per container
    object and input types. Ops without a rule get unknown outputs and are listed in
    ``unknown_ops``; type errors are in ``problems`` (nothing raises for a user's mistake).
    """
    expect_container(model, "model")
    expect_mapping(inputs, "inputs", "a mapping of input names to types", optional=True)
    model = resolve_references(model)  # a call's body is typed with the call's attribute values
    declared: list[Problem] = []
    types, values = top_inputs(model, inputs, declared)
    collecting = gc.isenabled()
    if collecting:
        # inference allocates many small objects and frees few: full collections over a large
        # model's heap would cost more than the inference itself
        gc.disable()
    try:
        return TypeMap(infer_level(model, types, values, model.attrs.get("namespace")), model, declared)
    finally:
        if collecting:
            gc.enable()


def _op_port(entry: tuple, port: Any, side: str) -> tuple[bool, Any]:
    """Whether a typed op has port ``port`` on ``side`` (captured inputs not counted), and its type."""
    op, result = entry
    names = op.outputs if side == "out" else [p for p in op.inputs if not p.attrs.get("captured")]
    found = result.outputs if side == "out" else result.inputs
    for p, t in zip(names, found):
        if p.name == port:
            return True, (None if t is ABSENT else t)
    return False, None


def _inner_level(level: Any, path: Path) -> tuple[Any, Path] | None:
    """The nested level that holds ``path`` (a deep container, a body, a sub-level or an op's
    body graph) and the path within it; None when no level holds it."""
    for k in range(1, len(path) + 1):
        head = path[:k]
        if head in level.deep:
            return level.deep[head], path[k:]
        if head in level.bodies:
            return level.bodies[head], path[k:]
        if k == 1 and path[0] in level.subs:
            return level.subs[path[0]], path[1:]
        if head in level.ops:
            body = level.ops[head][1].bodies.get(path[k]) if k < len(path) else None
            return (body, path[k + 1:]) if body is not None else None
    return None


class TypeMap(Mapping):
    """Read-only ``(path, port) -> type`` for every port of a model (see the module doc)."""

    def __init__(self, level: Level, model: Any = None, problems: Sequence[Problem] = ()) -> None:
        self._level = level
        self._model = model
        self._declared = list(problems)
        self._cycles: list[Problem] | None = None
        self._all: dict[tuple, Any] | None = None

    # -- lookup ----------------------------------------------------------------------------

    def _find(self, path: Path, port: Any, side: str) -> tuple[bool, Any]:
        level = self._level
        while True:
            if not path:
                ports = level.outputs if side == "out" else level.inputs
                return (port in ports), ports.get(port)
            entry = level.ops.get(path)
            if entry is not None:
                return _op_port(entry, port, side)
            key = (path, port, side)
            if key in level.ports:
                return True, level.ports[key]
            nxt = _inner_level(level, path)
            if nxt is None:
                return False, None
            level, path = nxt

    def output(self, path: Path, port: Any) -> Type | None:
        """The type of output port ``port`` of the node at ``path``."""
        return self._find(tuple(path), port, "out")[1]

    def input(self, path: Path, port: Any) -> Type | None:
        """The type of input port ``port`` of the node at ``path``."""
        return self._find(tuple(path), port, "in")[1]

    def __getitem__(self, key: Key) -> Type | None:
        path, port = _key(key)
        found, t = self._find(path, port, "out")
        if not found:
            found, t = self._find(path, port, "in")
        if not found:
            raise KeyError(key)
        return t  # type: ignore[no-any-return]

    # -- everything ------------------------------------------------------------------------

    def entries(self) -> Iterator[tuple[tuple, Any, str, Any]]:
        """``(path, port, 'in' | 'out', type)`` for every port, leaves and containers."""
        yield from _walk(self._level, ())

    def _everything(self) -> dict:
        if self._all is None:
            found: dict = {}
            for path, port, side, t in self.entries():
                if side == "out" or (path, port) not in found:
                    found[(path, port)] = t
            self._all = found
        return self._all

    def __iter__(self) -> Iterator[Key]:
        return iter(self._everything())

    def __len__(self) -> int:
        return len(self._everything())

    @property
    def problems(self) -> list[Problem]:
        """Every type error found, with the path of its node: malformed declared types of the
        model's inputs, then every op on a cycle (whose types cannot be inferred; see
        :func:`amanda.containers.cycles.cycle_problems`), then what the rules found."""
        found, looped = summary(self._level)
        if self._cycles is None:
            # a cycle of the effective view loops some level's children (or a child into
            # itself), so the whole view is computed only when inference met such a loop
            self._cycles = cycle_problems(self._model) if looped and self._model is not None else []
        if not found:
            return [*self._declared, *self._cycles]
        return [*self._declared, *self._cycles, *(p for p, _ in _problems(self._level, ()))]

    @property
    def unknown_ops(self) -> list[tuple[tuple, str | None]]:
        """``(path, op type)`` of every op no rule covers (its outputs are unknown)."""
        return list(_unknown(self._level, ()))

    @property
    def bindings(self) -> list[tuple[tuple, str, int]]:
        """``(path, symbol, size)``: where an op forced a symbolic dim to a size."""
        return list(_bindings(self._level, ()))

    def __repr__(self) -> str:
        return f"TypeMap({len(self)} ports, {len(self.unknown_ops)} unknown ops, {len(self.problems)} problems)"


def _key(key: Any) -> tuple[tuple, Any]:
    if isinstance(key, str):
        op, _, port = key.rpartition(":")
        return (tuple(op.split("/")) if op else ()), port
    path, port = key
    if isinstance(path, str):
        path = tuple(path.split("/")) if path else ()
    return tuple(path), port


def _walk(level: Level, prefix: tuple) -> Iterator[tuple]:
    for lv, pre in _levels(level, prefix):  # iterative: levels may nest thousands deep
        for name, t in lv.inputs.items():
            yield pre, name, "in", t
        for name, t in lv.outputs.items():
            yield pre, name, "out", t
        for path, (op, result) in lv.ops.items():
            if path == ("<boundary>",):
                continue
            full = pre + path
            ins = [p for p in op.inputs if not p.attrs.get("captured")]
            for p, t in zip(ins, result.inputs):
                yield full, p.name, "in", (None if t is ABSENT else t)
            for p, t in zip(op.outputs, result.outputs):
                yield full, p.name, "out", t
        for (path, port, side), t in lv.ports.items():
            yield pre + path, port, side, t


def _levels(level: Level, prefix: tuple) -> Iterator[tuple[Level, tuple]]:
    stack = [(level, prefix)]
    while stack:
        lv, pre = stack.pop()
        yield lv, pre
        for path, (_, result) in lv.ops.items():
            for label, body in result.bodies.items():
                stack.append((body, pre + path + (label,)))
        for name, sub in lv.subs.items():
            stack.append((sub, pre + (name,)))
        for path, sub in lv.deep.items():
            stack.append((sub, pre + path))


def _problems(level: Level, prefix: tuple) -> Iterator[tuple[Problem, tuple]]:
    for lv, pre in _levels(level, prefix):
        for path, (_, result) in lv.ops.items():
            for p in result.problems:
                inner = p.path if isinstance(p.path, tuple) else ()
                yield Problem(pre + inner, p.expected, p.found, p.hint), path


def _unknown(level: Level, prefix: tuple) -> Iterator[tuple[tuple, str | None]]:
    for lv, pre in _levels(level, prefix):
        for path, (op, result) in lv.ops.items():
            if result.unknown:
                yield pre + path, op.type


def _bindings(level: Level, prefix: tuple) -> Iterator[tuple[tuple, str, int]]:
    for lv, pre in _levels(level, prefix):
        for path, (_, result) in lv.ops.items():
            for sym, size in result.bindings:
                yield pre + path, sym, size
