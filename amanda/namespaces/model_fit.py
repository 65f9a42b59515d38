"""``validate(container)``: every op that does not fit its namespace, with its path and reason.

Each leaf op is checked against the schema of its type in its *effective* namespace (its own
``namespace`` attribute or the nearest ancestor's) with :func:`validate_op`. What is checked are
the op's *own* attributes (the ones a kernel reads), less the keys that describe an encoding
rather than the op (``namespace``, ``initializer``, ``metadata``, ``onnx``, ``onnx_node``,
``tf_node``, ``initial_value``) and
the passes' bookkeeping (``amanda_folded_from`` and every other ``amanda_`` key).
Input ports marked ``captured: true`` (outer values an If/Loop body reads) are not schema ports
and are skipped. Ops whose effective namespace is None make no claim and are skipped, unless
other ops of the model have one: then no kernel can be found for them, and each is reported
(an optimisation pass that dropped an op's own namespace made such models). Subgraphs
held in attributes (ONNX If/Loop/Scan bodies) are checked too; their problems have paths
``(*op_path, attribute, *inner_path)``.

>>> import amanda
>>> g = amanda.Container(None, "g", attrs={"namespace": "amanda/onnx/17"}, children=[
...     amanda.op("Relu", "r", inputs=["X"], outputs=["Y"]),
...     amanda.op("Relu", "bad", inputs=["x"], outputs=["Y"], attrs={"alpha": 0.1})])
>>> for problem in validate(g):
...     print(problem)
at bad: expected an input port of Relu (X), found input port 'x' (did you mean 'X'?)
at bad: expected the required input port 'X' of Relu, found inputs ['x']
at bad: expected an attribute of Relu (none), found 'alpha'
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from amanda.containers.cycles import held_graphs
from amanda.containers.records import Path
from amanda.containers.refs import resolve_references
from amanda.errors import ArgumentError, InvariantError, Problem, SchemaError
from amanda.namespaces.namespace import Namespace, namespace
from amanda.namespaces.op_fit import RESERVED_ATTRS, validate_op
from amanda.namespaces.schema import suggest

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["IGNORED_ATTRS", "validate"]

IGNORED_ATTRS: frozenset[str] = RESERVED_ATTRS | {"initializer", "metadata", "onnx", "onnx_node", "tf_node",
                                                   "initial_value"}
"""Own attributes no schema describes: the namespace override, ONNX and TensorFlow encoding
details (``tf_node``), and a TensorFlow variable's value read from its checkpoint."""

BOOKKEEPING_PREFIX = "amanda_"
"""Own attributes amanda's passes write to say where an op came from; never checked."""

_UNKNOWN = ("raise", "report", "skip")


def validate(
    container: Container,
    *,
    unknown_namespace: str = "raise",
    ignore: Collection[str] = IGNORED_ATTRS,
) -> list[Problem]:
    """Every way the ops of ``container`` do not fit their namespaces; empty when valid.

    Each ``Problem`` has the op's ``path`` (a tuple of names from the top) and says what was
    expected and found. An op type its namespace does not define, unknown or missing ports,
    missing required attributes and attributes of the wrong type are reported, and so are the
    type errors ``amanda.types.check`` finds (dtypes, shapes, ranks, symbols, malformed
    declared types), every op on a cycle of the effective view, and every two nodes of other
    content that share a uid (``amanda.containers.uids``). A namespace
    name the registry does not know raises ``SchemaError`` (``unknown_namespace="raise"``), or
    is reported once per op (``"report"``), or its ops are skipped (``"skip"``).
    """
    from amanda.containers.arguments import expect_container, shown

    expect_container(container, "container")
    if not isinstance(unknown_namespace, str) or unknown_namespace not in _UNKNOWN:
        raise ArgumentError.at("unknown_namespace", f"one of {list(_UNKNOWN)}", shown(unknown_namespace))
    if isinstance(ignore, (str, bytes, np.ndarray)) or not isinstance(ignore, Collection) or not all(
        isinstance(key, str) for key in ignore
    ):
        raise ArgumentError.at("ignore", "a collection of attribute names", shown(ignore))
    problems: list[Problem] = []
    original = container
    unclaimed: list[Path] = []  # leaf ops without a namespace
    claimed = False
    try:  # ops are checked with the attribute values each call gives its body
        container = resolve_references(container)
    except InvariantError as exc:
        return list(exc.problems)  # a reference outside any call: nothing can be checked with it
    cache: dict[str, Namespace | SchemaError] = {}
    stack: list[tuple[Path, Any, str | None, bool]] = [
        ((), container, container.attrs.get("namespace"), True)
    ]
    while stack:
        path, node, ns, root = stack.pop()
        if not node.is_op:
            for child in reversed(node.children):
                stack.append(((*path, child.name), child, child.attrs.get("namespace", ns), False))
            continue
        if root and node.type is None:
            continue  # a graph (or body) without ops, not an op without a type
        if ns is not None:
            claimed = True
            problems += _check(path, node, ns, cache, unknown_namespace, ignore)
        elif node.type is not None:
            unclaimed.append(path)
        for label, body in reversed(held_graphs(node)):
            stack.append(((*path, label), body, body.attrs.get("namespace", ns), True))
    from amanda.containers.uids import uid_clashes
    from amanda.engines import engine

    if claimed:
        problems += [Problem(path, "a namespace (set attrs.namespace on the op or an enclosing container), "
                             "as the model's other ops have", "none") for path in unclaimed]
    type_problems: list[Problem] = engine("type_check")(container)  # installed by amanda.types, above namespaces
    return problems + type_problems + uid_clashes(original)


def _namespace(name: Any, cache: dict, mode: str) -> Namespace | SchemaError:
    if name not in cache:
        try:
            if not isinstance(name, str):
                raise SchemaError.at("namespace", "a namespace name (a string)", repr(name))
            cache[name] = namespace(name)
        except SchemaError as exc:
            cache[name] = exc
    found = cache[name]
    if isinstance(found, SchemaError) and mode == "raise":
        raise found
    return found


def _check(
    path: Path,
    op: Container,
    ns_name: str,
    cache: dict,
    mode: str,
    ignore: Collection[str],
) -> list[Problem]:
    ns = _namespace(ns_name, cache, mode)
    if isinstance(ns, SchemaError):
        if mode == "skip":
            return []
        return [Problem(path, "a known namespace", repr(ns_name), str(ns.expected or ""))]
    if op.type is None:
        return [Problem(path, f"an op type of namespace {ns_name}", "an op without a type")]
    try:
        schema = ns.schema(op.type)
    except SchemaError as exc:
        return [
            Problem(
                path,
                f"an op type of namespace {ns_name}",
                repr(op.type),
                suggest(op.type, ns.op_types) or _retired(ns, op.type) or str(exc.found or ""),
            )
        ]
    inputs = [p.name for p in op.inputs if not p.attrs.get("captured")]
    # ``amanda_*`` keys are the passes' bookkeeping (amanda_folded_from ...): no kernel reads them
    attrs: Mapping[str, Any] = {k: v for k, v in op.attrs.items() if not k.startswith(BOOKKEEPING_PREFIX)}
    return validate_op(schema, path, op.type, inputs, op.output_names, attrs, ignore)


def _retired(ns: Any, op_type: str) -> str:
    return str(ns.retired.get(op_type, "")) if hasattr(ns, "retired") else ""
