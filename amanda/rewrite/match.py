"""Finding a rule's matches in one graph view: every leaf op of a hierarchical model (values
followed through container ports, so a match may span containers) or the ops of one level.

A view answers five questions: its ops by key, the source feeding an op's input port, who reads
an output, the ops in dataflow order, and which ops control edges pin. :class:`TreeView` keys
ops by their path from the root (``flatten``'s view); :class:`LevelView` by their name in one
level; a mapping table's ``ScopeView`` (:mod:`amanda.rewrite.mapping.pattern`) by their name in
the level being converted, where :func:`bindings` lists every binding for the driver to choose.
The matcher anchors the pattern's root at each op in order, walks the pattern towards its inputs,
tries both operand orders of commutative ops, and accepts a match only when the values computed
inside it are read by nothing outside it and its ops are not taken by an earlier match.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from amanda.containers.edge import CONTROL, SELF, Endpoint
from amanda.containers.flatten import flatten
from amanda.ops import catalog
from amanda.ops.registry import op_types
from amanda.rewrite.pattern import Optional, Output, PatternOp, Var, _Any

__all__ = ["COMMUTATIVE", "LevelView", "Match", "TreeView", "bindings", "find_matches"]

#: op types whose two operands may be swapped (the registry's ``commutative`` fact, the set
#: onnxscript's ``commute=True`` swaps)
COMMUTATIVE = op_types("amanda/onnx", where=lambda e: bool(e.facts.get(catalog.COMMUTATIVE)))


class _View:
    """What both views share: the ops of one type in dataflow order, where a pattern is anchored."""

    ops: Mapping[Any, Any]
    _types: dict[str, list] | None = None
    _position: dict[Any, int] | None = None

    def order(self) -> Any:
        raise NotImplementedError

    def admits(self, key: Any, node: Any, choice: str | None) -> bool:
        """Whether the op ``node`` at ``key`` may be matched: a leaf op (a mapping's view also
        asks for the namespace ``choice``)."""
        return bool(node.is_op)

    def anchors(self, op_type: str) -> list:
        """The keys of the ops of type ``op_type``, in dataflow order (the order is computed
        once per view, and only when an op of that type is there)."""
        if self._types is None:
            self._types = {}
            for key, node in self.ops.items():
                self._types.setdefault(node.type, []).append(key)
        if op_type not in self._types:
            return []
        if self._position is None:
            self._position = {key: i for i, key in enumerate(self.order())}
        return sorted(self._types[op_type], key=self._position.__getitem__)


class TreeView(_View):
    """Every leaf op of ``model`` by path; values followed across container boundaries."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.flat = flatten(model)
        self.ops: Mapping[Any, Any] = self.flat.ops
        self.pinned: set = set()

    def source(self, key: Any, port: str) -> Endpoint | None:
        """The endpoint feeding input ``port`` of the op at ``key`` (None when unconnected)."""
        edges = self.flat.producers(key, port)
        return edges[0].src if edges else None

    def reads(self, endpoint: Endpoint) -> list[Endpoint]:
        """Every input (or model output) reading ``endpoint``."""
        return [e.dst for e in self.flat.consumers(endpoint.op, endpoint.port) if e.dst.port != CONTROL]

    def order(self) -> tuple:
        """Op keys, producers first."""
        return self.flat.topological_order()

    @staticmethod
    def endpoint(key: Any, port: str) -> Endpoint:
        """The endpoint of output ``port`` of the op at ``key``."""
        return Endpoint(key, port)

    @staticmethod
    def key(endpoint: Endpoint) -> Any:
        """The op key an endpoint belongs to (None for the model's own ports)."""
        return None if endpoint.op is SELF else endpoint.op


class LevelView(_View):
    """The ops of one level (``passes.level.Level``: its ``ops``, ``source``, ``reads``,
    ``order`` and ``pinned``), keyed by name."""

    def __init__(self, level: Any) -> None:
        self.level = level
        self.ops = level.ops
        self.pinned = level.pinned

    def source(self, key: Any, port: str) -> Endpoint | None:
        """The endpoint feeding input ``port`` of op ``key`` (None when unconnected)."""
        return self.level.source.get((key, port))

    def reads(self, endpoint: Endpoint) -> list[Endpoint]:
        """Every input (or level output) reading ``endpoint``."""
        return self.level.reads(endpoint)

    def order(self) -> list:
        """Op names, producers first."""
        return self.level.order()

    @staticmethod
    def endpoint(key: Any, port: str) -> Endpoint:
        """The endpoint of output ``port`` of op ``key``."""
        return Endpoint((key,), port)

    @staticmethod
    def key(endpoint: Endpoint) -> Any:
        """The op name an endpoint belongs to (None for the level's own ports)."""
        return None if endpoint.op is SELF else endpoint.op[0]


class Match:
    """One match of a rule: ``ops`` (pattern op -> op key, root first), ``values`` (variable
    -> source endpoint, None when an Optional port is unconnected), the rule and a context."""

    __slots__ = ("context", "ops", "root", "rule", "values", "view")

    def __init__(self, view: Any, rule: Any, ops: dict[int, tuple[PatternOp, Any]], values: dict[str, Any],
                 root: Any, context: Any) -> None:
        self.view, self.rule, self.root, self.context = view, rule, root, context
        self.ops = ops
        self.values = values

    @property
    def keys(self) -> list[Any]:
        """The keys of the matched ops (paths in a tree view, names in a level), root first."""
        return [key for _, key in self.ops.values()]

    def op(self, capture: str) -> Any:
        """The op captured as ``capture`` (``_as=`` in the pattern)."""
        for node, key in self.ops.values():
            if node.capture == capture:
                return self.view.ops[key]
        raise KeyError(capture)

    def constant(self, var: str) -> np.ndarray | None:
        """The value of variable ``var`` when a ``Constant`` op produces it, else None."""
        return constant_at(self.view, self.values.get(var))

    def __repr__(self) -> str:
        return f"Match({self.rule.name}: {self.keys})"


def constant_at(view: Any, source: Endpoint | None) -> np.ndarray | None:
    """The ``value`` of the ``Constant`` op producing ``source``, else None."""
    key = None if source is None else view.key(source)
    node = None if key is None else view.ops.get(key)
    if node is None or node.type != "Constant" or not node.is_op:
        return None
    value = node.attrs.get("value")
    return value if isinstance(value, np.ndarray) else None


def _close(found: np.ndarray | None, value: float) -> bool:
    """Whether ``found`` is a one-element constant within rounding of ``value`` in its dtype."""
    if found is None or found.size != 1 or found.dtype.kind not in "biuf":
        return False
    eps = float(np.finfo(found.dtype).eps) if found.dtype.kind == "f" else 0.0
    return abs(float(found.reshape(-1)[0]) - value) < max(1e-4, 2 * eps * abs(value))


class _Matcher:
    def __init__(self, view: Any, commute: bool) -> None:
        self.view, self.commute = view, commute

    def op(self, node: PatternOp, key: Any, state: tuple[dict, dict]) -> Iterator[tuple[dict, dict]]:
        ops, values = state
        if id(node) in ops:
            if ops[id(node)][1] == key:
                yield state
            return
        if key in self.view.pinned or (ops and any(k == key for _, k in ops.values())):
            return
        found = self.view.ops.get(key)
        if found is None or not node.accepts(found) or not self.view.admits(key, found, node.namespace):
            return
        if node.ports is not None:  # inputs constrained by port name, the others free
            pairs = [(wanted, self.view.source(key, port)) for port, wanted in node.ports.items()]
            yield from self.inputs(pairs, ({**ops, id(node): (node, key)}, values)) if pairs else \
                iter((({**ops, id(node): (node, key)}, values),))
            return
        if len(node.inputs) < _connected(self.view, key, found):
            return
        sources = [self.view.source(key, p.name) for p in found.inputs]
        sources += [None] * (len(node.inputs) - len(sources))
        orders = [node.inputs]
        if self.commute and node.type in COMMUTATIVE and len(node.inputs) == 2:
            orders.append(node.inputs[::-1])
        for inputs in orders:
            start = ({**ops, id(node): (node, key)}, values)
            yield from self.inputs(list(zip(inputs, sources)), start)

    def inputs(self, pairs: list, state: tuple[dict, dict]) -> Iterator[tuple[dict, dict]]:
        if not pairs:
            yield state
            return
        (wanted, source), rest = pairs[0], pairs[1:]
        for after in self.value(wanted, source, state):
            yield from self.inputs(rest, after)

    def value(self, wanted: Any, source: Endpoint | None, state: tuple[dict, dict]) -> Iterator[tuple[dict, dict]]:
        ops, values = state
        if isinstance(wanted, _Any):
            yield state
        elif isinstance(wanted, Optional):
            if source is None:
                if values.get(wanted.var.name, None) is None:
                    yield ops, {**values, wanted.var.name: None}
            else:
                yield from self.value(wanted.var, source, state)
        elif source is None:
            return
        elif isinstance(wanted, Var):
            bound = values.get(wanted.name, source)
            if bound == source:
                yield ops, {**values, wanted.name: source}
        elif isinstance(wanted, (PatternOp, Output)):
            yield from self.producer(wanted, source, state)
        elif isinstance(wanted, (list, tuple)):
            found = constant_at(self.view, source)
            if found is not None and found.size == len(wanted) and np.array_equal(found.reshape(-1), wanted):
                yield state
        elif _close(constant_at(self.view, source), float(wanted)):
            yield state


    def producer(self, wanted: PatternOp | Output, source: Endpoint, state: tuple[dict, dict]
                 ) -> Iterator[tuple[dict, dict]]:
        """Pattern op ``wanted`` at the op producing ``source``: from its first output, or from
        the output an :class:`Output` names."""
        key = self.view.key(source)
        found = None if key is None else self.view.ops.get(key)
        if found is None:
            return
        if isinstance(wanted, Output):
            if source.port == wanted.port:
                yield from self.op(wanted.op, key, state)
        elif found.outputs and found.outputs[0].name == source.port:
            yield from self.op(wanted, key, state)


def _connected(view: Any, key: Any, node: Any) -> int:
    """How many input ports of ``node``, counting up to its last connected one, are in use."""
    count = 0
    for i, port in enumerate(node.inputs):
        if view.source(key, port.name) is not None:
            count = i + 1
    return count


def _closed(view: Any, ops: dict[int, tuple[PatternOp, Any]], root: Any) -> bool:
    """Whether nothing outside the match reads a value computed inside it, other than the
    root's first output (the one value a replacement gives back)."""
    inside = {key for _, key in ops.values()}
    for key in inside:
        for i, port in enumerate(view.ops[key].outputs):
            if key == root and i == 0:
                continue
            for reader in view.reads(view.endpoint(key, port.name)):
                if key == root or view.key(reader) not in inside:
                    return False
    return True


def find_matches(view: Any, rule: Any, context: Any = None, taken: set | None = None) -> Iterator[Match]:
    """Every match of ``rule`` in ``view``, anchored at ops in dataflow order, none sharing an op
    with an earlier one (or with ``taken``), each closed and passing the rule's guard."""
    taken = set() if taken is None else taken
    matcher = _Matcher(view, rule.commute)
    for key in view.anchors(rule.root.type):
        if key in taken:
            continue
        for ops, values in matcher.op(rule.root, key, ({}, {})):
            keys = {k for _, k in ops.values()}
            if keys & taken or not _closed(view, ops, key):
                continue
            match = Match(view, rule, ops, values, key, context)
            if rule.guard is not None and not rule.guard(match):
                continue
            taken.update(keys)
            yield match
            break


def bindings(view: Any, roots: list[PatternOp]) -> Iterator[dict[int, tuple[PatternOp, Any]]]:
    """Every binding (pattern op id -> (pattern op, key)) of the pattern ops reachable from
    ``roots``, each bound to a different op, the first root's anchors in order: all of them,
    with no closure, ``taken`` or guard (the mapping driver, which picks among them)."""
    matcher = _Matcher(view, False)
    if len(roots) == 1:  # the common case, without the recursion
        for key in view.anchors(roots[0].type):
            for ops, _ in matcher.op(roots[0], key, ({}, {})):
                yield ops
        return

    def extend(i: int, state: tuple[dict, dict]) -> Iterator[dict[int, tuple[PatternOp, Any]]]:
        if i == len(roots):
            yield state[0]
            return
        for key in view.anchors(roots[i].type):
            for after in matcher.op(roots[i], key, state):
                yield from extend(i + 1, after)

    yield from extend(0, ({}, {}))
