"""The typed op builder: ``ops.Gemm(x, w, b, transB=1)``, generated from a namespace's schemas.

Positional arguments are the schema's inputs in order (a variadic input takes the rest; None
leaves an optional input out); keyword arguments are its attributes, checked against the
schema and completed with its defaults. Arrays and numbers become ``Constant`` ops. Every call
infers its outputs' types at once and returns one ``Value`` per output (a tuple when the op has
several). A misspelt op, input count or attribute raises at the call, with the valid names.

>>> import numpy as np
>>> x = Input("x", "float32", ("batch", 4))
>>> y = ops.Relu(ops.Gemm(x, np.ones((3, 4), np.float32), transB=1))
>>> y.type
float32[batch,3]
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.build.values import Call, Input, Value
from amanda.containers.arguments import brief, expect_str, shown
from amanda.containers.container import Container
from amanda.containers.edge import Port
from amanda.errors import ArgumentError, SchemaError
from amanda.io.onnx.ports import port_names
from amanda.namespaces.history import extra_input_names, moved_hint
from amanda.namespaces.namespace import namespace as lookup_namespace
from amanda.namespaces.op_fit import validate_op
from amanda.types.node import ABSENT
from amanda.types.ops import infer_op
from amanda.types.tensor_type import TensorType, dtype_name, dtype_problem

__all__ = ["DEFAULT_NAMESPACE", "Input", "OpBuilder", "Ops", "UnknownOpError", "ops"]


class UnknownOpError(SchemaError, AttributeError):
    """An op type the namespace does not define (also an AttributeError, so ``hasattr`` works)."""

#: the ONNX opset ``amanda.ops`` builds in: the newest every supported onnxruntime runs
DEFAULT_NAMESPACE = "amanda/onnx/17"
_counter = itertools.count()


class Ops:
    """Op functions for every op type of one namespace: ``Ops("amanda/onnx/13").Gemm``."""

    def __init__(self, namespace: str = DEFAULT_NAMESPACE) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise ArgumentError.at("namespace", "a namespace name such as 'amanda/onnx/17'", shown(namespace))
        self._name = namespace
        self._loaded: Any = None  # looked up on first use: importing amanda builds no namespace

    @property
    def _namespace(self) -> Any:
        if self._loaded is None:
            self._loaded = lookup_namespace(self._name)
        return self._loaded

    def __getattr__(self, op_type: str) -> OpBuilder:
        if op_type.startswith("_"):
            raise AttributeError(op_type)
        try:
            schema = self._namespace.schema(op_type)
        except SchemaError as exc:  # it names the namespace and the close matches
            raise UnknownOpError(str(exc), path=exc.path, expected=exc.expected, found=exc.found) from None
        return OpBuilder(self._name, schema)

    def __dir__(self) -> list[str]:
        return sorted(self._namespace.op_types)


class OpBuilder:
    """One op type's function: call it with values (and attributes) to add the op."""

    def __init__(self, namespace: str, schema: Any) -> None:
        self.namespace = namespace
        self.schema = schema
        self.__doc__ = schema.doc or f"{schema.type} of {namespace}"

    def __repr__(self) -> str:
        inputs = ", ".join(p.name + ("?" if p.optional else "") + ("..." if p.variadic else "") for p in self.schema.inputs)
        return f"<op {self.schema.type}({inputs}) of {self.namespace}>"

    def __call__(self, *args: Any, name: str | None = None, **attrs: Any) -> Any:
        schema = self.schema
        expect_str(name, "name", "an op name (a non-empty string)", optional=True)
        label = name or f"{schema.type}_{next(_counter)}"
        where = (label,)
        names, values = self._inputs(_trim(args), label)
        outputs = [p.name for p in schema.outputs if not p.variadic] or [f"{schema.outputs[0].name}_0"]
        given = [n for n, v in zip(names, values) if v is not None]
        attrs = _attributes(schema, {k: _attr(v) for k, v in attrs.items() if v is not None},
                            dict(zip(names, values)), where, given, outputs)
        op = Container(schema.type, label, inputs=[Port(n) for n in names], outputs=outputs,
                       attrs={**attrs, "namespace": self.namespace})
        types = [v.type if v is not None else ABSENT for v in values]
        known = [v.constant if v is not None else None for v in values]
        result = infer_op(op, where, self.namespace, types, known, None)
        if result.problems:
            problem = result.problems[0]
            raise ArgumentError.at(problem.path, problem.expected, problem.found)
        call = Call(op, tuple((n, v) for n, v in zip(names, values) if v is not None))
        outs = _output_values(call, schema, label, outputs, result, attrs)
        return outs[0] if len(outs) == 1 else outs

    def _inputs(self, args: tuple, label: str) -> tuple[tuple[str, ...], list[Value | None]]:
        """Port names for the positional inputs, and each as a Value (None: left out)."""
        fixed = [p for p in self.schema.inputs if not p.variadic]
        if len(args) > len(fixed) and len(fixed) == len(self.schema.inputs):
            moved = [moved_hint(self.schema, n, "input") for n in extra_input_names(self.schema, len(args))]
            raise ArgumentError.at((label,), f"at most {len(fixed)} inputs ({', '.join(p.name for p in fixed)})",
                                   f"{len(args)} inputs", "; ".join(m for m in moved if m))
        names = port_names(self.schema.inputs, len(args), "input")
        own = lookup_namespace(self.namespace).op_types
        space = self.namespace if "Constant" in own or "Const" in own else DEFAULT_NAMESPACE
        return names, [_as_value(a, f"{label}/{n}", space) for a, n in zip(args, names)]


def _output_values(call: Call, schema: Any, label: str, outputs: list[str], result: Any,
                   attrs: Mapping[str, Any]) -> tuple[Value, ...]:
    """A :class:`Value` for each output of ``call``, typed by inference (``result``) or else by
    the dtype attribute constraining its port."""
    typed = [t if t is not None else _attr_type(schema, port, attrs) for port, t in zip(outputs, result.outputs)]
    return tuple(Value(call, port, t, f"{label}.{port}", result.values.get(j) if result.values else None)
                 for j, (port, t) in enumerate(zip(outputs, typed)))


def _port_schema(ports: Any, name: str) -> Any:
    """The schema port of an input or output name (``values_2`` is variadic ``values``'s)."""
    for port in ports:
        if port.name == name or (port.variadic and name.rsplit("_", 1)[0] == port.name):
            return port
    return None


def _attr_type(schema: Any, port: str, attrs: Mapping[str, Any]) -> Any:
    """An output's type from the dtype attribute constraining its port (TensorFlow's ``T`` or
    ``dtype``) where no type rule gave one: the dtype is known, the shape is not."""
    declared = _port_schema(schema.outputs, port)
    dtype = attrs.get(declared.type_constraint) if declared is not None and declared.type_constraint else None
    return TensorType(dtype, None) if isinstance(dtype, str) and dtype_problem(dtype) is None else None


def _attributes(schema: Any, attrs: dict[str, Any], values: Mapping[str, Value | None], where: tuple,
                given: list[str], outputs: list[str]) -> dict[str, Any]:
    """The op's attributes, checked against the schema (with its ports) and completed with its
    defaults; a type attribute not given (TensorFlow's ``T``, ``Tshape``) is the dtype of the first
    input on a port it constrains whose dtype is known, before its default."""
    for key, attr in schema.attrs.items():
        if attr.type == "dtype" and key not in attrs:
            own = [v.type.dtype for n, v in values.items()
                   if v is not None and getattr(v.type, "dtype", None)
                   and getattr(_port_schema(schema.inputs, n), "type_constraint", None) == key]
            if own:
                attrs[key] = own[0]
    problems = validate_op(schema, where, schema.type, given, outputs, attrs)
    if problems:
        first = problems[0]  # its hint: a close name, or where the name moved between opsets
        raise ArgumentError.at(first.path, first.expected, first.found, first.hint)
    for key, attr in schema.attrs.items():
        if key not in attrs and attr.default is not None:
            attrs[key] = attr.default
    return attrs


def _trim(args: tuple) -> tuple:
    """Trailing omitted (None) inputs are simply not given."""
    given = list(args)
    while given and given[-1] is None:
        given.pop()
    return tuple(given)


def _attr(value: Any) -> Any:
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        from amanda.types.tensor_type import ONNX_DTYPES

        name = dtype_name(value)
        codes = {v: k for k, v in ONNX_DTYPES.items()}
        return codes.get(name or "", value)
    return value


def _as_value(arg: Any, label: str, namespace: str = DEFAULT_NAMESPACE) -> Value | None:
    """A Value for one positional input: Values pass, arrays and numbers become constants (of
    ``namespace``: the op's own where it has a ``Constant``, or TensorFlow's ``Const``, so a
    model keeps one namespace)."""
    if arg is None or isinstance(arg, Value):
        return arg
    if isinstance(arg, (np.ndarray, np.generic, int, float, bool, list, tuple)):
        try:
            array = np.asarray(arg)
        except (ValueError, TypeError, OverflowError):  # a ragged list, an int beyond int64
            raise ArgumentError.at(label, "a Value, an array or a number (nested lists of one shape)",
                                   brief(arg)) from None
        if array.dtype == np.float64 and not isinstance(arg, (np.ndarray, np.generic)):
            array = array.astype(np.float32)  # Python floats build float32 constants, as models use
        if array.dtype == object:
            raise ArgumentError.at(label, "a Value, an array or a number", type(arg).__name__)
        const_name = f"{label}_const_{next(_counter)}"
        attrs = {"value": array, "namespace": namespace, "initializer": True}
        if "Constant" not in lookup_namespace(namespace).op_types:  # TensorFlow's Const
            attrs = {"value": array, "dtype": dtype_name(array.dtype), "namespace": namespace}
        const = Container("Constant" if "initializer" in attrs else "Const", const_name,
                          outputs=["output"], attrs=attrs)
        return Value(Call(const, ()), "output", TensorType(dtype_name(array.dtype), array.shape), const_name, array)
    raise ArgumentError.at(label, "a Value (from Input or an op), an array or a number", type(arg).__name__)


ops = Ops()
"""The ops of :data:`DEFAULT_NAMESPACE`, as ``amanda.ops.Relu(x)``."""
