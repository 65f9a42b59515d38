"""Defining an op in one place: its kernel, type rule and gradient side by side.

``define`` returns an :class:`OpDefinition` whose decorators register each fact in the one
op registry (:mod:`amanda.ops.registry`); the executor, type inference and ``grad`` read them
from there, so a new op is one file::

    scale = define("Scale", family="amanda/onnx", domain="com.example", schema="amanda/onnx/com.example")

    @scale.kernel
    def _run(attrs, x):
        return (x * attrs.get("factor", 2.0),)

    @scale.type_rule
    def _types(node):
        return [node.type(0)]

    @scale.vjp
    def _grad(n):
        return [ops.Mul(n.grad(), const(n.attr("factor", 2.0), n.grad()))]

>>> d = define("Twice", family="amanda/doc-example")
>>> _ = d.kernel(lambda attrs, x: (x * 2,))
>>> _ = d.not_differentiable("an example without a gradient")
>>> d.entry.differentiable, d.entry.no_gradient, len(d.entry.kernels)
(False, 'an example without a gradient', 1)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from amanda.ops.registry import ONNX, OpDef, declare, entry, kernel, session_kernel

__all__ = ["OpDefinition", "define"]

F = TypeVar("F", bound=Callable[..., Any])


class OpDefinition:
    """The facts of one op type being defined; each decorator registers one of them."""

    def __init__(self, op_type: str, family: str, domain: str) -> None:
        self.op_type, self.family, self.domain = op_type, family, domain

    @property
    def entry(self) -> OpDef:
        """The op's registry entry as it stands now."""
        found = entry(self.family, self.op_type, domain=self.domain)
        assert found is not None  # define declared it
        return found

    def kernel(self, fn: F | None = None, *, since: int = 1, dtypes: Iterable[Any] | None = None,
               heavy: bool = False, output_count: bool = False) -> Any:
        """Register ``fn(attrs, *inputs) -> tuple`` as a kernel (``@d.kernel`` or
        ``@d.kernel(since=13, dtypes=[...])``); see :func:`amanda.ops.registry.kernel`."""
        register = kernel(self.op_type, since, family=self.family, domain=self.domain, dtypes=dtypes,
                          heavy=heavy, output_count=output_count)
        return register(fn) if fn is not None else register

    def session_kernel(self, fn: F | None = None, *, since: int = 1) -> Any:
        """Register ``fn(ctx, attrs, *inputs) -> tuple`` as a session kernel."""
        register = session_kernel(self.op_type, self.family, since, self.domain)
        return register(fn) if fn is not None else register

    def type_rule(self, fn: F) -> F:
        """Register ``fn(node) -> output types`` (see :class:`amanda.types.node.Node`)."""
        declare(self.op_type, family=self.family, domain=self.domain, type_rule=fn)
        return fn

    def vjp(self, fn: F) -> F:
        """Register ``fn(node) -> one gradient (or None) per input`` (see
        :class:`amanda.autodiff.node.Node`)."""
        declare(self.op_type, family=self.family, domain=self.domain, vjp=fn)
        return fn

    def not_differentiable(self, reason: str) -> OpDefinition:
        """Mark the op as having no gradient, saying why (a boolean output, a random draw …)."""
        declare(self.op_type, family=self.family, domain=self.domain, no_gradient=reason)
        return self


def define(op_type: str, *, family: str = ONNX, domain: str = "", **facts: Any) -> OpDefinition:
    """Start (or continue) the definition of ``op_type`` in ``family`` and ``domain``, with
    the typed facts given (``effect``, ``bodies``, ``schema``, ``fresh`` … see
    :func:`amanda.ops.registry.declare`)."""
    declare(op_type, family=family, domain=domain, **facts)
    return OpDefinition(op_type, family, domain)
