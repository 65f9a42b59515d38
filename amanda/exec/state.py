"""Session state: stateful kernels and the ``amanda/core`` variable ops.

A stateful kernel is a session kernel (see :mod:`amanda.exec.dispatch`): it gets an
:class:`~amanda.exec.dispatch.OpContext` whose ``state`` is the session's store, a
dict that lives as long as the session and survives across runs. Each op's default
key is its ``shared_name`` attribute, else its uid, so state follows an op through
transforms that keep its identity (wrapping, editing), like weights do.

The ``amanda/core`` namespace holds resource-style variables, as in TensorFlow's
``VarHandleOp`` / ``ReadVariableOp`` / ``AssignVariableOp``: a ``Variable`` op outputs a
reference, and the ops that read or write the variable take that reference as an
input, so the dataflow says which variable they touch.

- ``Variable`` (no inputs; output: the reference). Attributes: ``value`` (the initial
  value) or ``shape`` and ``dtype`` (zeros); optional ``shared_name``.
- ``Read`` (input: reference; output: the current value).
- ``Assign`` (inputs: reference, value; output: the new value).
- ``AssignAdd`` (inputs: reference, delta; output: the new value).

Values in the store are read-only arrays that are replaced, so a value a ``Read``
returned stays what it was when read. The one exception is an optimiser's update of an
array nothing but the store refers to (:mod:`amanda.exec.update_in_place`): no one can see it.

>>> import amanda, numpy as np
>>> from amanda import Container, op
>>> g = Container("G", "g", outputs=["v"], attrs={"namespace": "amanda/core"}, children=[
...     op("Variable", "w", outputs=["ref"], attrs={"value": np.float32(1)}),
...     op("AssignAdd", "inc", inputs=["ref", "delta"], outputs=["value"]),
...     op("Constant", "one", outputs=["output"], attrs={"value": np.float32(2),
...        "namespace": "amanda/onnx/17"})],
...     edges=[("w:ref", "inc:ref"), ("one:output", "inc:delta"), ("inc:value", "g:v")])
>>> from amanda.exec import Session
>>> s = Session(g, threads=1)
>>> [float(s.run(["v"])[0]) for _ in range(3)]
[3.0, 5.0, 7.0]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from amanda.containers.lazy import is_mapped
from amanda.containers.uids import key_of
from amanda.errors import ExecutionError
from amanda.exec.dispatch import OpContext, session_kernel
from amanda.exec.kernels.registry import declare
from amanda.ops.effects import Effect

__all__ = ["CORE", "VariableRef", "stateful_kernel", "state_key"]

CORE = "amanda/core"


def stateful_kernel(op_type: str, family: str = CORE, since: int = 1, domain: str = "") -> Callable:
    """Register ``fn(ctx, attrs, *inputs) -> tuple`` as a stateful kernel; ``ctx.state`` is the
    session's store; the op's registry entry says it is ``Effect.STATEFUL`` (never merged,
    removed, folded or cached). TensorFlow's ``VariableV2``/``Assign`` register here too."""
    declare(op_type, family=family, domain=domain, effect=Effect.STATEFUL)
    return session_kernel(op_type, family, since, domain)


def state_key(op: Any) -> str:
    """The default state key of an op: its ``shared_name`` attribute, else its uid."""
    return key_of(op)


class VariableRef:
    """A reference to one variable of a session's store; the value a ``Variable`` op outputs."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def __repr__(self) -> str:
        return f"VariableRef({self.key!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VariableRef) and other.key == self.key

    def __hash__(self) -> int:
        return hash(("VariableRef", self.key))


def _frozen(value: Any) -> np.ndarray:
    if is_mapped(value):
        return value  # type: ignore[no-any-return]  # a lazy weight: read-only, copied by its first update
    array = np.array(value, copy=True)
    array.setflags(write=False)
    return array


def _initial(attrs: Mapping[str, Any], ctx: OpContext) -> np.ndarray:
    if attrs.get("value") is not None:
        return _frozen(attrs["value"])
    if attrs.get("shape") is not None:
        return _frozen(np.zeros(tuple(attrs["shape"]), dtype=np.dtype(attrs.get("dtype", "float32"))))
    raise ExecutionError.at(ctx.path, "a `value` or `shape` attribute on a Variable", "neither")


def _ref(ctx: OpContext, ref: Any) -> str:
    if not isinstance(ref, VariableRef):
        raise ExecutionError.at(ctx.path, "a variable reference (the output of a Variable op)", type(ref).__name__)
    if ref.key not in ctx.state:
        raise ExecutionError.at(ctx.path, f"an initialised variable {ref.key!r}", "no value")
    return ref.key


@stateful_kernel("Variable")
def variable(ctx: OpContext, attrs: Mapping[str, Any]) -> tuple:
    """A reference to this op's variable, initialised on first use."""
    if ctx.key not in ctx.state:
        ctx.state[ctx.key] = _initial(attrs, ctx)
    return (VariableRef(ctx.key),)


@stateful_kernel("Read")
def read(ctx: OpContext, attrs: Mapping[str, Any], ref: Any) -> tuple:
    """The variable's current value."""
    return (ctx.state[_ref(ctx, ref)],)


@stateful_kernel("Assign")
def assign(ctx: OpContext, attrs: Mapping[str, Any], ref: Any, value: Any) -> tuple:
    """Replace the variable's value; output the new value."""
    key = _ref(ctx, ref)
    new = _frozen(value)
    ctx.state[key] = new
    return (new,)


@stateful_kernel("AssignAdd")
def assign_add(ctx: OpContext, attrs: Mapping[str, Any], ref: Any, delta: Any) -> tuple:
    """Add ``delta`` to the variable (keeping its dtype); output the new value."""
    key = _ref(ctx, ref)
    old = ctx.state[key]
    new = _frozen(np.asarray(old + delta).astype(old.dtype, copy=False))
    ctx.state[key] = new
    return (new,)
