"""TensorFlow graphs in a Session: stateful ops run natively, everything else is converted.

TensorFlow's reference variables keep their semantics in the session's state:
``VariableV2`` outputs a reference (uninitialised until assigned, as in TensorFlow);
``Assign``, ``AssignAdd`` and ``AssignSub`` update it and output the reference;
``Identity`` of a reference reads the value at the moment it runs (``StopGradient`` and
``Snapshot``, which the same table rule maps, pass their input through); ``NoOp`` only orders;
``Placeholder`` must be fed. These kernels live in the ``amanda/tensorflow`` family.

For the other ops the session converts the graph with the shipped TensorFlow -> ONNX table
(without its rules for variables, Identity and NoOp, which stay native), passing through
what no rule maps, and translates the names the user fetches and feeds by through the
conversion's NameMap. Where a variable feeds an ordinary op, a native ``<variable>/read``
Identity is put in between, as TensorFlow 1 graphs do themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.containers import SELF, Container, Edge, op
from amanda.errors import ExecutionError
from amanda.exec.dispatch import OpContext, parse_namespace, session_op_types
from amanda.exec.kernels.registry import fact, register_fact
from amanda.exec.state import VariableRef, stateful_kernel
from amanda.ops.definition import define

__all__ = ["TENSORFLOW", "executable_form", "needs_conversion"]

TENSORFLOW = "amanda/tensorflow"
# op types with native kernels (what conversion leaves alone)
REF_INPUT = "tensorflow.ref_input"  # registry fact: the input position that takes a variable reference
_KEPT_RULES = {"identity", "noop"}


def _tf(op_type: str, ref_input: int | None = None) -> Any:
    """Register a TensorFlow session kernel (its op reads or writes session state); ``ref_input``
    is the input that takes a variable's reference rather than its value."""
    if ref_input is not None:
        register_fact(TENSORFLOW, op_type, REF_INPUT, ref_input)
    return stateful_kernel(op_type, family=TENSORFLOW)


def _key(ctx: OpContext, ref: Any) -> str:
    if not isinstance(ref, VariableRef):
        raise ExecutionError.at(ctx.path, "a reference to a variable (a VariableV2 output)", type(ref).__name__)
    return ref.key


def _value(ctx: OpContext, ref: Any) -> np.ndarray:
    key = _key(ctx, ref)
    if key not in ctx.state:
        raise ExecutionError.at(ctx.path, f"an initialised variable {key!r}", "a variable never assigned",
                                "run its initializer (an Assign) first")
    return ctx.state[key]


def _store(ctx: OpContext, ref: Any, value: Any) -> tuple:
    array = np.array(value, copy=True)
    array.setflags(write=False)  # a value read earlier stays what it was
    ctx.state[_key(ctx, ref)] = array
    return (ref,)


@_tf("VariableV2")
def variable_v2(ctx: OpContext, attrs: Mapping[str, Any]) -> tuple:
    """A reference to this op's variable (keyed by shared_name, else the op's uid)."""
    return (VariableRef(ctx.key),)


@_tf("Assign", ref_input=0)
def assign(ctx: OpContext, attrs: Mapping[str, Any], ref: Any, value: Any) -> tuple:
    """Store ``value`` in the variable; output the reference."""
    dtype = attrs.get("T")
    return _store(ctx, ref, np.asarray(value, dtype=np.dtype(dtype) if dtype else None))


@_tf("AssignAdd", ref_input=0)
def assign_add(ctx: OpContext, attrs: Mapping[str, Any], ref: Any, value: Any) -> tuple:
    """Add ``value`` to the variable; output the reference."""
    old = _value(ctx, ref)
    return _store(ctx, ref, (old + value).astype(old.dtype, copy=False))


@_tf("AssignSub", ref_input=0)
def assign_sub(ctx: OpContext, attrs: Mapping[str, Any], ref: Any, value: Any) -> tuple:
    """Subtract ``value`` from the variable; output the reference."""
    old = _value(ctx, ref)
    return _store(ctx, ref, (old - value).astype(old.dtype, copy=False))


@_tf("Identity", ref_input=0)
def identity(ctx: OpContext, attrs: Mapping[str, Any], x: Any) -> tuple:
    """The input; a reference is read (the value as it is when this op runs)."""
    return (_value(ctx, x) if isinstance(x, VariableRef) else x,)


def _input_type(node: Any) -> list:
    """The type rule of a pass-through op: its input's type."""
    return [node.type(0)]


_STOP = define("StopGradient", family=TENSORFLOW, type_rule=_input_type,
               no_gradient="StopGradient blocks the gradient by definition")
_SNAPSHOT = define("Snapshot", family=TENSORFLOW, type_rule=_input_type,
                   gradient_gap="a TensorFlow op: amanda differentiates a graph in its ONNX form")


@_STOP.kernel
@_SNAPSHOT.kernel
def pass_through(attrs: Mapping[str, Any], x: Any) -> tuple:
    """The input (pure: no state; native because the table's identity rule is kept out)."""
    return (x,)


@_tf("NoOp")
def no_op(ctx: OpContext, attrs: Mapping[str, Any]) -> tuple:
    """Nothing: a NoOp only orders the ops around it by control edges."""
    return ()


@_tf("Placeholder")
def placeholder(ctx: OpContext, attrs: Mapping[str, Any]) -> tuple:
    """A Placeholder that runs was not fed."""
    raise ExecutionError.at(ctx.path, f"a value fed for {'/'.join(ctx.path)}:output", "no feed")


def needs_conversion(model: Container) -> bool:
    """Whether ``model`` is a TensorFlow graph with ops the native kernels do not cover."""
    from amanda.containers import walk

    native = set(session_op_types(TENSORFLOW))
    for _, node, attrs in walk(model):
        namespace = attrs.get("namespace")
        if node.is_op and namespace and parse_namespace(namespace)[0] == TENSORFLOW and node.type not in native:
            return True
    return False


def _reads(model: Container, variables: set[str], edge: Edge) -> bool:
    """Whether ``edge`` carries a variable's value to an ordinary reader (not into the
    reference input of an op that takes the variable itself)."""
    src, dst = edge.src, edge.dst
    if src.op is SELF or dst.op is SELF or len(src.op) != 1 or src.op[0] not in variables:
        return False
    target = model.child(dst.op[0]) if len(dst.op) == 1 else None
    ref = None if target is None else fact(TENSORFLOW, str(target.type), REF_INPUT)
    return not (ref is not None and dst.port == target.input_names[ref])  # type: ignore[union-attr]


def _with_reads(model: Container) -> Container:
    """Put a native ``<variable>/read`` Identity between each variable and its ordinary readers."""
    variables = {c.name for c in model.children if c.type == "VariableV2"}
    if not variables:
        return model
    readers: dict[str, list[Edge]] = {}
    for edge in model.edges:
        if _reads(model, variables, edge):
            readers.setdefault(edge.src.op[0], []).append(edge)
    if not readers:
        return model
    children = list(model.children)
    edges = [e for e in model.edges if not any(e in found for found in readers.values())]
    taken = {c.name for c in children}
    for variable, found in readers.items():
        name = f"{variable}/read"
        while name in taken:
            name += "_"
        taken.add(name)
        children.append(op("Identity", name, ["input"], ["output"], {"T": model.child(variable).attrs.get("dtype")}))
        edges.append(Edge(((variable,), found[0].src.port), ((name,), "input")))
        edges += [Edge(((name,), "output"), e.dst, attrs=e.attrs) for e in found]
    return model.evolve(children=children, edges=edges)


def executable_form(model: Container, target: str = "amanda/onnx/17") -> tuple[Container, Any]:
    """The model as a Session runs it, and the NameMap from the model's names to its names."""
    from amanda.rewrite.mapping import MappingTable
    from amanda.rewrite.mapping.tables.tensorflow_onnx import tensorflow_to_onnx
    from amanda.rewrite.mapping.tables.tensorflow_onnx_scopes import opening_scopes

    shipped = tensorflow_to_onnx().select(skip=["variables"])
    table = opening_scopes(MappingTable(shipped.source, target, [r for r in shipped.rules if r.name not in _KEPT_RULES],
                                        name="tensorflow_for_session"))
    prepared = _with_reads(model)
    converted, names = table.apply(prepared, on_unmatched="pass", with_names=True)
    return converted, names
