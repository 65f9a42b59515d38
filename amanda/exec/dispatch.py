"""Dispatch: from an op and its effective namespace to the function a plan step calls.

An op's effective namespace names a kernel *family* and a version:
``amanda/onnx/17`` is family ``amanda/onnx`` at opset 17, ``amanda/onnx-ml/3`` the
``ai.onnx.ml`` domain of the same family, ``amanda/core`` a family without versions.

>>> parse_namespace("amanda/onnx/17")
('amanda/onnx', '', 17)
>>> parse_namespace("amanda/onnx-ml/3")
('amanda/onnx', 'ai.onnx.ml', 3)
>>> parse_namespace("amanda/core")
('amanda/core', '', None)
>>> parse_namespace("amanda/onnx/com.example/2")
('amanda/onnx', 'com.example', 2)

Every kernel and every fact about an op lives in one entry of
:mod:`amanda.exec.kernels.registry`. *Plain* kernels are pure:
``fn(attrs, *inputs) -> tuple``. *Session* kernels (stateful ops, control flow) also
receive an :class:`OpContext` that gives them the session's state and a way to run nested
containers: ``fn(ctx, attrs, *inputs) -> tuple``; :mod:`amanda.exec.state` and
the control-flow families (:mod:`amanda.opset.onnx.control_flow`, ``scan``) register them
with :func:`session_kernel`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

import amanda.exec.kernels  # noqa: F401  (registers every kernel module)
from amanda.containers.records import Path
from amanda.errors import ExecutionError
from amanda.exec.kernels import registry
from amanda.exec.kernels.arity import OUTPUT_COUNT
from amanda.exec.kernels.registry import session_kernel, session_op_types
from amanda.namespaces.name import NamespaceName

if TYPE_CHECKING:
    from amanda.containers import Container

__all__ = [
    "BOOKKEEPING_ATTRS",
    "OpContext",
    "Resolved",
    "describe_inputs",
    "kernel_attrs",
    "parse_namespace",
    "resolve_kernel",
    "session_kernel",
    "session_op_types",
]

ONNX = registry.ONNX

# Attributes amanda itself writes on ops (importer hints, inherited metadata):
# they say where an op came from, not what it computes, so kernels never see them.
BOOKKEEPING_ATTRS = frozenset(
    {"namespace", "initializer", "captured", "metadata", "onnx", "doc_string"}
)
_BOOKKEEPING_PREFIXES = ("onnx_", "amanda_")



def parse_namespace(namespace: str) -> tuple[str, str, int | None]:
    """``(family, domain, opset)`` of a namespace name; opset None when it has no integer version.

    A version that is not an integer (``amanda/tensorflow/1.13.1``) selects the newest
    kernels of its family.
    """
    name = NamespaceName.parse(namespace)
    return name.family, name.domain, name.opset


def kernel_attrs(op: Container) -> Mapping[str, Any]:
    """The attributes a kernel sees: the op's own, minus amanda's bookkeeping keys.

    >>> from amanda.containers import op
    >>> dict(kernel_attrs(op("Constant", "c", attrs={"value": 1, "initializer": True})))
    {'value': 1}
    """
    own = {
        k: v
        for k, v in op.attrs.items()
        if k not in BOOKKEEPING_ATTRS and not k.startswith(_BOOKKEEPING_PREFIXES)
    }
    return MappingProxyType(own)


@dataclass
class OpContext:
    """What a session kernel may use beyond its inputs.

    ``state``: the session's variable store (key -> value); ``key``: this op's default
    state key (its ``shared_name`` attribute, else its uid); ``path``: where the op is,
    for messages; ``op``: the op itself; ``opset``: the version its namespace names;
    ``namespace``: its effective namespace; ``run_body``: runs a nested container
    (``run_body(body, inputs_by_name, output_names)``) with this session's executor;
    ``iteration``: called by a loop before its iteration ``i`` (counting from 0), raises
    an ExecutionError past the session's iteration limit or the run's timeout;
    ``body_runner``: ``body_runner(body, input_names, output_names)`` gives ``run(values) ->
    outputs`` for a body run many times (its plan made once); ``bodies``: what the op's
    kernel keeps between its runs (control flow keeps its bodies' runners there).
    """

    state: dict
    key: str
    path: Path
    op: Container
    opset: int | None
    namespace: str
    run_body: Callable[[Container, Mapping[str, Any], Sequence[str]], list]
    iteration: Callable[[int], None] = lambda i: None
    body_runner: Callable[[Container, Sequence[str], Sequence[str]], Callable[[Sequence[Any]], list]] | None = None
    bodies: dict = field(default_factory=dict)


@dataclass
class Resolved:
    """How a plan step computes one op.

    ``fn`` is a plain ``fn(attrs, *inputs)``; when ``session`` is set, ``fn`` still
    needs an :class:`OpContext` bound as its first argument by the planner.
    """

    fn: Callable[..., tuple]
    attrs: Mapping[str, Any]
    session: bool
    heavy: bool
    constant: bool = False  # the op's output is its value attribute (registry entry ``constant``)


class _ByDtype:
    """A kernel whose version depends on its input dtypes, resolved once per dtype tuple."""

    __slots__ = ("op_type", "opset", "family", "domain", "cache")

    def __init__(self, op_type: str, opset: int | None, family: str, domain: str) -> None:
        self.op_type, self.opset, self.family, self.domain = op_type, opset, family, domain
        self.cache: dict[tuple, Callable[..., tuple]] = {}

    def __call__(self, attrs: Mapping[str, Any], *args: Any) -> tuple:
        key = tuple(getattr(a, "dtype", None) for a in args)
        fn = self.cache.get(key)
        if fn is None:
            version = registry.lookup(self.op_type, self.opset, key, family=self.family,  # type: ignore[arg-type]
                                      domain=self.domain)
            if version is None:
                shown = ", ".join(str(d) for d in key)
                raise ExecutionError(f"no kernel version of {self.op_type} accepts input dtypes ({shown})")
            fn = self.cache[key] = version.fn
        return fn(attrs, *args)


def no_kernel_error(op: Container, path: str, namespace: str | None) -> ExecutionError:
    """The error for an op whose namespace has no kernel for its type."""
    if namespace is None:
        return ExecutionError(
            f"op `{path}` ({op.type}) has no namespace: set attrs.namespace on it or on an "
            "enclosing container (for example amanda/onnx/17)",
            path=path, expected="a namespace", found="none",
        )
    family, domain, _ = parse_namespace(namespace)
    where = f"{family}" + (f" (domain {domain})" if domain else "")
    if not registry.supported_op_types(family, domain) and not session_op_types(family, domain):
        return ExecutionError(
            f"namespace `{namespace}` has no kernels, so op `{path}` ({op.type}) cannot run; "
            "convert the model to an executable namespace such as amanda/onnx/17 first",
            path=path, expected="a namespace with kernels", found=namespace,
        )
    return ExecutionError(
        f"no kernel for op type `{op.type}` in namespace `{namespace}` (family {where}), "
        f"needed by `{path}`",
        path=path, expected=f"a kernel for {op.type}", found=f"none in {namespace}",
    )


def resolve_kernel(op: Container, path: str, namespace: str | None) -> Resolved:
    """The kernel for ``op`` under ``namespace``; ExecutionError naming type and namespace if none."""
    if namespace is None or op.type is None:
        raise no_kernel_error(op, path, namespace)
    family, domain, opset = parse_namespace(namespace)
    op_type = op.type
    attrs = kernel_attrs(op)
    newest = opset if opset is not None else 1 << 30
    found = registry.entry(family, op_type, domain=domain)
    if found is None:
        raise no_kernel_error(op, path, namespace)
    for session_version in found.session_kernels:
        if session_version.since <= newest:
            return Resolved(session_version.fn, attrs, session=True, heavy=False)
    candidates = found.kernels_at(opset)
    if not candidates:
        raise no_kernel_error(op, path, namespace)
    if any(v.output_count for v in candidates) and OUTPUT_COUNT not in attrs:
        # ops defined by how many outputs the node declares (Split < 18, MaxPool's Indices)
        attrs = MappingProxyType({**attrs, OUTPUT_COUNT: len(op.outputs)})
    _check_arity(op, path, namespace, found.arity(opset))
    first = candidates[0]
    fn: Callable[..., tuple]
    if first.accepts is None:
        fn = first.fn  # the newest applicable version takes every dtype: resolve it now
    else:
        fn = _ByDtype(op_type, opset, family, domain)
    return Resolved(fn, attrs, session=False, heavy=found.heavy, constant=found.constant)


def _schema_ports(namespace: str, op_type: str) -> str | None:
    try:
        from amanda.namespaces import namespace as lookup_namespace

        schema = lookup_namespace(namespace).schema(op_type)
        return ", ".join(p.name + ("..." if p.variadic else "") + ("?" if p.optional else "") for p in schema.inputs)
    except Exception:  # noqa: BLE001 - no schema to quote: the message names counts only
        return None


def _check_arity(op: Container, path: str, namespace: str, arity: tuple[int, float]) -> None:
    """An ExecutionError, at plan time, for an op with more input ports than any kernel version
    takes (too few is left to the run: the kernel's own error then names what is missing)."""
    names = op.input_names
    least, most = arity
    if len(names) <= most:
        return
    takes = f"{least} input{'s' if least != 1 else ''}" if least == most else f"{least} to {most} inputs"
    schema = _schema_ports(namespace, op.type or "")
    valid = f"{op.type} takes {takes}" + (f": {schema}" if schema else "")
    unknown = names[int(most):]
    shown = ", ".join(f"`{n}`" for n in unknown)
    raise ExecutionError(
        f"op `{path}` ({op.type}, {namespace}) has input port{'s' if len(unknown) > 1 else ''} {shown}, "
        f"which its kernel does not take; {valid}",
        path=path, expected=valid, found=", ".join(names))


def describe(value: Any) -> str:
    """A value's dtype and shape as messages show them.

    >>> describe(np.zeros((64, 784), np.float32)), describe(None), describe([1, 2])
    ('float32[64,784]', 'None', 'sequence[2]')
    """
    if isinstance(value, np.ndarray):
        return f"{value.dtype}[{','.join(str(d) for d in value.shape)}]"
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return f"sequence[{len(value)}]"
    if isinstance(value, np.generic):
        return f"{value.dtype}[]"
    return type(value).__name__


def describe_inputs(values: Sequence[Any]) -> str:
    """Every input described, comma separated (``float32[1,3], int64[2]``)."""
    return ", ".join(describe(v) for v in values)


def failure(path: str, op_type: str | None, namespace: str | None, inputs: Sequence[Any], exc: BaseException) -> ExecutionError:
    """The ExecutionError for a kernel that raised ``exc``.

    >>> str(failure("block1/conv", "Conv", "amanda/onnx/17", [np.zeros((1, 3), np.float32)], ValueError("bad")))
    'while executing `block1/conv` (Conv, amanda/onnx/17) with inputs float32[1,3]: ValueError: bad'
    """
    shown = describe_inputs(inputs) if inputs else "none"
    message = f"while executing `{path}` ({op_type}, {namespace}) with inputs {shown}: {type(exc).__name__}: {exc}"
    return ExecutionError(message, path=path, found=f"{type(exc).__name__}: {exc}")


def output_positions(op: Container, namespace: str | None) -> tuple[int, ...]:
    """The kernel result index of each declared output port of ``op``.

    An ONNX node may omit optional outputs (LSTM writing only ``Y_h``); its declared ports
    then sit at their schema positions, not at their declaration order.
    """
    names = op.output_names
    if namespace is None or op.type is None or parse_namespace(namespace)[0] != ONNX:
        return tuple(range(len(names)))
    return _schema_positions(namespace, op.type, names)


@functools.lru_cache(maxsize=4096)
def _schema_positions(namespace: str, op_type: str, names: tuple[str, ...]) -> tuple[int, ...]:
    from amanda.errors import AmandaError
    from amanda.namespaces import namespace as lookup_namespace

    try:
        schema = lookup_namespace(namespace).schema(op_type)
    except AmandaError:
        return tuple(range(len(names)))
    formal = {p.name: i for i, p in enumerate(schema.outputs) if not p.variadic}
    if all(n in formal for n in names):
        return tuple(formal[n] for n in names)
    return tuple(range(len(names)))  # variadic outputs are declared in order
