"""Inferring one op: fold small constants with the executor's kernels, else apply its rule.

When every input of an op is a known small constant, the op's own numpy kernel computes the
outputs (so shape arithmetic is written once, in the kernels); otherwise the rule table gives
the output types. Mistakes become problems, never exceptions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from amanda.containers.records import Path
from amanda.errors import AmandaError, Problem
from amanda.ops.effects import Effect
from amanda.ops.registry import effect_of
from amanda.types.node import ABSENT, Node
from amanda.types.rules import lookup
from amanda.types.schema_dtypes import dtype_problems
from amanda.types.tensor_type import (
    SequenceType,
    TensorType,
    TypeMismatch,
    dtype_name,
    from_attrs,
    merge,
    refine,
)

__all__ = ["OpResult", "infer_op", "parse"]

FOLD_LIMIT = 4096  # inputs with more entries than this are not folded
KEEP_LIMIT = 1024  # outputs with at most this many entries are kept as values

_PARSED: dict[str, tuple[str, str, int | None]] = {}


def parse(namespace: str | None) -> tuple[str, str, int | None] | None:
    """``(family, domain, opset)`` of a namespace name, memoised; None for no namespace."""
    if namespace is None:
        return None
    found = _PARSED.get(namespace)
    if found is None:
        from amanda.exec.dispatch import parse_namespace

        found = _PARSED[namespace] = parse_namespace(namespace)
    return found


class OpResult:
    """What inference found for one leaf op."""

    __slots__ = ("bindings", "bodies", "inputs", "outputs", "problems", "unknown", "values")

    def __init__(self) -> None:
        self.inputs: list = []
        self.outputs: list = []
        self.values: dict[int, Any] = {}
        self.problems: list[Problem] = []
        self.unknown = False
        self.bindings: list[tuple[str, int]] = []
        self.bodies: dict[str, Any] = {}


def _type_of_value(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        elem = None
        for i, v in enumerate(value):
            t = _type_of_value(v)
            elem = t if i == 0 else merge(elem, t)
        return SequenceType(elem)
    if value is None:
        return None
    arr = np.asarray(value)
    return TensorType(dtype_name(arr.dtype), arr.shape)


def _fold(op: Any, path: Path, namespace: str, values: list) -> tuple | None:
    from amanda.exec.dispatch import resolve_kernel

    if effect_of(str(op.type)) is Effect.RANDOM:  # its results are not known before a run
        return None

    try:
        resolved = resolve_kernel(op, "/".join(map(str, path)), namespace)
    except AmandaError:
        return None
    if resolved.session:
        return None
    try:
        with np.errstate(all="ignore"):  # inf and nan are values, as in a run
            out = resolved.fn(resolved.attrs, *values)
    except Exception:  # noqa: BLE001 - a kernel refusing its inputs: the rule reports why
        return None
    return out if isinstance(out, tuple) else None


def _declared(attrs: Any) -> Any:
    n = len(attrs)
    if n == 0 or (n == 1 and "onnx_name" in attrs):
        return None
    return from_attrs(attrs)


def _small(outs: list, rule: Any) -> bool:
    """Whether folding is cheap: every output's size is known and small (or no rule says)."""
    if rule is None:
        return True
    for t in outs:
        if type(t) is not TensorType or t.shape is None:
            return False
        n = 1
        for d in t.shape:
            if type(d) is not int:
                return False
            n *= d
        if n > FOLD_LIMIT:
            return False
    return True


def _foldable(values: list, types: list) -> bool:
    if not values:
        return False
    for v, t in zip(values, types):
        if t is ABSENT:
            continue
        if type(v) is not np.ndarray or v.size > FOLD_LIMIT:
            return False
    return True


def _declared_inputs(op: Any, path: Path, types: list, problems: list[Problem]) -> list:
    """``types`` refined by the types the op's input ports declare; a malformed declared type,
    or one the value arriving cannot have, is a problem."""
    refined = None
    ports = [p for p in op.inputs if not (p.attrs and p.attrs.get("captured"))]
    for j, port in enumerate(ports):
        if not port.attrs or j >= len(types):
            continue
        try:
            declared = _declared(port.attrs)
        except TypeMismatch as exc:
            problems.append(Problem(path, f"input port {port.name!r} with a valid type ({exc.expected})", str(exc.found)))
            continue
        if declared is None or types[j] is ABSENT:
            continue
        try:
            t = refine(types[j], declared)
        except TypeMismatch:
            problems.append(Problem(path, f"input port {port.name!r} of type {declared!r} (declared)",
                                    f"{types[j]!r} arriving"))
            continue
        if t != types[j]:
            refined = refined or list(types)
            refined[j] = t
    return types if refined is None else refined


def _declared_outputs(op: Any, path: Path, problems: list[Problem]) -> list:
    """The type each output port declares (None where it declares none, or a malformed one,
    which is a problem)."""
    declared = []
    for p in op.outputs:
        try:
            declared.append(_declared(p.attrs))
        except TypeMismatch as exc:
            declared.append(None)
            problems.append(Problem(path, f"output port {p.name!r} with a valid type ({exc.expected})", str(exc.found)))
    return declared


_INTEGERS = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})


def _in_dtype(value: Any, t: Any) -> Any:
    """A value a rule worked out, in its output's dtype: shape values are kept as int64 while
    known entry by entry, so one that ends as an int32 tensor (a Cast or a Gather of an int32 shape,
    TensorFlow's ``Shape(out_type=int32)``) is made int32, as running the op would give it."""
    if isinstance(value, np.ndarray) and isinstance(t, TensorType) and t.dtype in _INTEGERS \
            and value.dtype.kind in "iu" and value.dtype.name != t.dtype:
        return value.astype(t.dtype)
    return value


def _apply_rule(rule: Callable[..., Any], node: Node, path: Path, outs: list, result: OpResult) -> None:
    """Run a type rule into ``outs``; what it refuses becomes a problem at ``path``."""
    op = node.op
    try:
        found = rule(node)
        for j, t in enumerate(found[:len(outs)]):
            outs[j] = t
        result.values = {j: _in_dtype(v, outs[j] if j < len(outs) else None) for j, v in node.out_values.items()}
        result.bindings = node.bindings
    except TypeMismatch as exc:
        result.problems.append(Problem(path, f"{op.type}: {exc.expected}", str(exc.found)))
    except (AmandaError, ArithmeticError, AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        result.problems.append(
            Problem(path, f"inputs and attributes {op.type} can be typed with",
                    f"{type(exc).__name__}: {exc}"))


def _fold_into(op: Any, path: Path, namespace: str | None, types: list, values: list, outs: list,
               result: OpResult) -> None:
    """Types (and small values) from running ``op`` on its known input values, when it runs."""
    folded = _fold(op, path, namespace, [None if t is ABSENT else v for v, t in zip(values, types)])  # type: ignore[arg-type]
    if folded is None:
        return
    result.unknown = False
    result.values = {}
    for j, value in enumerate(folded[:len(outs)]):
        if isinstance(value, np.generic):
            value = np.asarray(value)
        outs[j] = _type_of_value(value)
        if isinstance(value, np.ndarray) and value.size <= KEEP_LIMIT:
            result.values[j] = value


def _refine_declared(op: Any, path: Path, declared: list, outs: list, result: OpResult) -> None:
    """Narrow each inferred output by its declared type; a conflict is a problem."""
    for j, d in enumerate(declared):
        if d is None:
            continue
        try:
            outs[j] = refine(outs[j], d)
        except TypeMismatch:
            result.problems.append(Problem(
                path, f"output port {op.outputs[j].name!r} of type {outs[j]!r} (inferred)",
                f"declared {d!r}"))


def infer_op(
    op: Any,
    path: Path,
    namespace: str | None,
    types: list,
    values: list,
    body: Callable[..., Any] | None,
) -> OpResult:
    """Output types (and known values) of ``op`` given its input types and values."""
    result = OpResult()
    types = _declared_inputs(op, path, types, result.problems)
    result.inputs = types
    n_out = len(op.outputs)
    declared = _declared_outputs(op, path, result.problems)
    attrs = dict(op.attrs.items()) if op.attrs else {}
    parsed = parse(namespace)
    rule = None if parsed is None or op.type is None else lookup(parsed[0], parsed[1], op.type)
    outs: list = [None] * n_out
    refused = dtype_problems(op, path, namespace, types) if parsed is not None else []
    if refused:
        result.problems += refused  # the rule would type what the schema does not allow
    elif rule is None:
        result.unknown = True
    else:
        _apply_rule(rule, Node(op, attrs, types, values, parsed[2], body), path, outs, result)  # type: ignore[index]
    if parsed is not None and not result.problems and _foldable(values, types) and _small(outs, rule):
        _fold_into(op, path, namespace, types, values, outs, result)
    _refine_declared(op, path, declared, outs, result)
    result.outputs = outs
    return result
