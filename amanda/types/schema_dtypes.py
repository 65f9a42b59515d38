"""Input dtypes checked against the op schema's type constraints.

An ONNX schema says which element types each input takes (``Relu``'s ``T`` is float, double,
float16, bfloat16 and the signed ints; ``Reshape``'s ``shape`` is ``tensor(int64)``), and that
inputs bound to one type parameter share one type (``Add``'s ``A`` and ``B``). Type inference
checks both, so the op builder refuses ``ops.Relu`` of a bool tensor at the call, and
``validate`` and ``infer_types`` report such an op in a model read from a file; onnxruntime
refuses these models when it loads them. Ports whose allowed types are written otherwise (other
vocabularies), and inputs whose dtype is unknown, are not checked.

>>> import amanda
>>> relu = amanda.op("Relu", "r", ["X"], ["Y"])
>>> for problem in dtype_problems(relu, ("r",), "amanda/onnx/17", [TensorType("bool", (2,))]):
...     print(problem.expected, "/", problem.found)
Relu: input X of dtype bfloat16, float16, float32, float64, int16, int32, int64 or int8 (type T) / bool
"""

from __future__ import annotations

import re
from typing import Any

from amanda.containers.records import Path
from amanda.errors import Problem, SchemaError
from amanda.types.tensor_type import ONNX_DTYPES, TensorType

__all__ = ["ONNX_TYPE_NAMES", "dtype_problems"]

_SPELLED = {"float32": "float", "float64": "double", "float4_e2m1fn": "float4e2m1", "float8_e8m0fnu": "float8e8m0",
            "float6_e2m3fn": "float6e2m3", "float6_e3m2fn": "float6e3m2"}
ONNX_TYPE_NAMES: dict[str, str] = {_SPELLED.get(name, name.replace("_", "")): name for name in ONNX_DTYPES.values()}
"""ONNX's element type spelling in schemas (``float``, ``double``, ``float8e4m3fn``) -> amanda's dtype name."""

_TENSOR = re.compile(r"tensor\((\w+)\)")
_Check = tuple[tuple[str, frozenset, str | None], ...]  # per schema port: (name, dtypes, type parameter)
_CACHE: dict[tuple[str, str], tuple[dict[str, Any], Any] | None] = {}


def _allowed(allowed_types: tuple[str, ...]) -> frozenset | None:
    """The dtypes a port's allowed types give a tensor; None (no check) when they name none, or
    are not ONNX type strings this module reads."""
    found = set()
    for text in allowed_types:
        match = _TENSOR.fullmatch(text)
        if match is not None:
            name = ONNX_TYPE_NAMES.get(match.group(1))
            if name is None:
                return None  # an element type this table does not know: do not guess
            found.add(name)
        elif not text.startswith(("seq(", "optional(", "map(", "sparse_tensor(")):
            return None
    return frozenset(found) or None  # no tensor type at all: sequences and optionals are the rules' to check


def _ports(namespace: str, op_type: str) -> tuple[dict[str, Any], Any] | None:
    """``({port name: (dtypes, type parameter)}, variadic entry or None)`` of a schema, cached."""
    key = (namespace, op_type)
    if key not in _CACHE:
        from amanda.namespaces.namespace import namespace as lookup

        try:
            schema = lookup(namespace).schema(op_type)
        except SchemaError:
            _CACHE[key] = None
            return None
        fixed, variadic = {}, None
        for port in schema.inputs:
            # a heterogeneous variadic port (Loop's V) binds its type parameter to no one dtype
            bind = port.type_constraint if port.homogeneous or not port.variadic else None
            entry = (_allowed(port.allowed_types), bind)
            if port.variadic:
                variadic = entry
            else:
                fixed[port.name] = entry
        _CACHE[key] = (fixed, variadic)
    return _CACHE[key]


def _listed(dtypes: frozenset) -> str:
    names = sorted(dtypes)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def dtype_problems(op: Any, path: Path, namespace: str | None, types: list) -> list[Problem]:
    """Inputs of ``op`` (given their ``types``, in the order of its non-captured input ports)
    whose dtype its schema does not allow, and type parameters bound to two dtypes."""
    if namespace is None or op.type is None:
        return []
    found = _ports(namespace, op.type)
    if found is None:
        return []
    fixed, variadic = found
    problems: list[Problem] = []
    bound: dict[str, tuple[str, str]] = {}  # type parameter -> (dtype, first port)
    ports = op.inputs
    if any(p.attrs for p in ports):  # rare: outer values a body captures are no schema ports
        ports = [p for p in ports if not p.attrs.get("captured")]
    for port, t in zip(ports, types):
        if type(t) is not TensorType or t.dtype is None:
            continue
        entry = fixed.get(port.name, variadic)
        if entry is None or entry[0] is None:
            continue
        dtypes, parameter = entry
        if t.dtype not in dtypes:
            kind = f" (type {parameter})" if parameter else ""
            problems.append(Problem(path, f"{op.type}: input {port.name} of dtype {_listed(dtypes)}{kind}", t.dtype))
            continue
        if parameter is not None:
            first = bound.setdefault(parameter, (t.dtype, port.name))
            if first[0] != t.dtype:
                problems.append(Problem(path, f"{op.type}: input {port.name} of the dtype of {first[1]} "
                                              f"({first[0]}; both are type {parameter})", t.dtype))
    return problems
