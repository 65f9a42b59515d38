"""Fusions the kernels exploit, as rewrite rules (:mod:`amanda.rewrite`): Conv+BatchNormalization
folded for inference, MatMul+Add as one Gemm (or amanda's own MatMulAdd), and the erf form of
GELU and SiLU as one Gelu / Swish op (where the opset has it, or amanda's own for a Session).

Each fusion is one :class:`~amanda.rewrite.Rule` of at most ten lines: the pattern as builder
code, which says which inputs are constants (``const``) and which attributes they need
(``real``), the replacement, and a guard for what a pattern cannot say (a known rank, the
level's opset: :mod:`amanda.rewrite.context`).
:func:`~amanda.passes.rules.apply_rules` replaces their matches level by level.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from amanda.containers import Container
from amanda.containers.arguments import expect_container
from amanda.ops.catalog import FUSED
from amanda.passes.level import level_namespaces, own_namespace
from amanda.passes.report import PassResult
from amanda.passes.rules import apply_rules
from amanda.rewrite import Optional, Rule
from amanda.rewrite.context import MatchContext, const_value, context_of, rank, target
from amanda.rewrite.library import erf_gelu, erf_gelu_half_inside, silu
from amanda.rewrite.pattern import const, real
from amanda.types import infer_types

__all__ = ["CONV_BATCHNORM", "GELU", "MATMUL_ADD", "SWISH", "fuse_conv_batchnorm", "fuse_gelu", "fuse_gelu_internal",
           "fuse_matmul_add", "fuse_matmul_add_internal", "fuse_swish_internal"]

# Each rule is one block below, from its "# rule:" line to the blank line after it; a helper
# used by one rule only lies inside its block (tests/passes/test_fusion_rules.py counts them).
# The rules are made while amanda is imported, so they build no namespace (check=False; the
# tests check them).

# rule: conv_batchnorm. Conv (constant weights) read only by an inference BatchNormalization -> one Conv
def _fold(op: Any, x: Any, w: Any, b: Any, scale: Any, bias: Any, mean: Any, var: Any, conv: Any, bn: Any) -> Any:
    k = scale.value.astype(np.float64) / np.sqrt(var.value.astype(np.float64) + float(bn.attrs.get("epsilon", 1e-5)))
    w2 = w.value * k.reshape(-1, *[1] * (w.value.ndim - 1))  # each output channel's filter scaled
    b2 = ((0.0 if b.source is None else b.value) - mean.value) * k + bias.value  # b.source None: no bias
    return op.Conv(x, w2.astype(w.value.dtype), b2.astype(w.value.dtype), _like=conv)
CONV_BATCHNORM = Rule("conv_batchnorm", lambda op, x, w, b, scale, bias, mean, var: op.BatchNormalization(
    op.Conv(x, const(w), Optional(const(b)), _as="conv"), const(scale), const(bias), const(mean), const(var),
    training_mode=real(0, default=0), epsilon=real(default=1e-5), _as="bn"),
    _fold, guard=lambda m: len(m.op("conv").outputs) == 1, check=False)

# rule: matmul_add. MatMul by a constant matrix read only by an Add of a constant row -> amanda's own
# MatMulAdd (any rank, the bias written first and added to by BLAS) or Gemm (a left operand known 2-D)
MATMUL_ADD = Rule(
    "matmul_add", lambda op, a, b, c: op.Add(op.MatMul(a, const(b, ndim=2), _as="mm"), const(c, ndim=(0, 1))),
    lambda op, a, b, c, match: op.MatMulAdd(a, b, c, _ports=(("A", "B", "C"), ("Y",)), namespace=FUSED)
    if context_of(match).internal else op.Gemm(a, b, c, **own_namespace(match.op("mm"))),
    guard=lambda m: const_value(m, "c").size in (1, const_value(m, "b").shape[1]) if context_of(m).internal
    else rank(m, "mm") == 2, check=False)

# rule: gelu. The erf form of GELU (either association) -> one Gelu (ONNX's from opset 20)
GELU = tuple(Rule("gelu", pattern, lambda op, x, match: op.Gelu(x, **target(match, 20) or {}),
                  guard=lambda m: target(m, 20) is not None, check=False) for pattern in (erf_gelu, erf_gelu_half_inside))

# rule: swish. SiLU, Mul(x, Sigmoid(x)) -> one Swish (ONNX's from opset 24)
SWISH = Rule("swish", silu, lambda op, x, match: op.Swish(x, **target(match, 24) or {}),
             guard=lambda m: target(m, 24) is not None, check=False)


_INTERNAL = MatchContext(internal=True)


def _by_level(model: Container, internal: bool) -> Callable[[Container, tuple], MatchContext]:
    """Each level's match context by path: its namespace, and whether amanda's own ops may be
    made (one context per distinct namespace, made once: a pass visits every level)."""
    namespaces = level_namespaces(model)
    contexts = {ns: MatchContext(ns, internal=internal) for ns in {*namespaces.values(), None}}
    return lambda m, p: contexts[namespaces.get(p)]


def fuse_conv_batchnorm(model: Container) -> PassResult:
    """Fold inference BatchNormalization into the Conv before it (constant weights only).

    >>> import amanda, numpy as np
    >>> c = lambda n, v: amanda.op("Constant", n, [], ["output"], {"value": np.asarray(v, np.float32)})
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y"],
    ...     children=[c("w", np.ones((1, 1, 1, 1))), c("s", [2]), c("b", [1]), c("m", [0]), c("v", [1]),
    ...     amanda.op("Conv", "conv", ["X", "W"], ["Y"]),
    ...     amanda.op("BatchNormalization", "bn", ["X", "scale", "B", "input_mean", "input_var"], ["Y"], {"epsilon": 0.0})],
    ...     edges=[("g:x", "conv:X"), ("w:output", "conv:W"), ("conv:Y", "bn:X"), ("s:output", "bn:scale"),
    ...      ("b:output", "bn:B"), ("m:output", "bn:input_mean"), ("v:output", "bn:input_var"), ("bn:Y", "g:y")])
    >>> out, report = fuse_conv_batchnorm(g)
    >>> report.replaced, out.child("conv_W").attrs["value"].ravel().tolist()
    (('conv', 'bn'), [2.0])
    """
    expect_container(model, "model")
    return apply_rules("fuse_conv_batchnorm", model, [CONV_BATCHNORM])


def fuse_matmul_add(model: Container) -> PassResult:
    """Turn a 2-D MatMul by a constant matrix plus a constant bias row into one Gemm
    (named after the Add, whose readers it feeds); needs the inferred rank of the left operand."""
    expect_container(model, "model")
    try:
        types = infer_types(model)
    except Exception:  # noqa: BLE001 - without types no MatMul is known to be 2-D
        types = None
    return apply_rules("fuse_matmul_add", model, [MATMUL_ADD], lambda m, p: MatchContext(types=types, path=p))


def fuse_matmul_add_internal(model: Container) -> PassResult:
    """A MatMul of any rank by a constant matrix, read only by an Add of a constant row (a
    dense or Linear layer) -> amanda's own MatMulAdd (namespace ``amanda/fused``, run only by
    amanda), which writes the bias first and lets BLAS add the product to it: no types needed,
    so it costs a Session's plan nothing like :func:`fuse_matmul_add`'s second inference.

    >>> import amanda, numpy as np
    >>> c = lambda n, v: amanda.op("Constant", n, [], ["output"], {"value": np.asarray(v, np.float32)})
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y"], children=[c("w", [[1, 2], [3, 4]]),
    ...     c("b", [10, 20]), amanda.op("MatMul", "m", ["A", "B"], ["Y"]), amanda.op("Add", "a", ["A", "B"], ["C"])],
    ...     edges=[("g:x", "m:A"), ("w:output", "m:B"), ("m:Y", "a:A"), ("b:output", "a:B"), ("a:C", "g:y")],
    ...     attrs={"namespace": "amanda/onnx/17"})
    >>> out, report = fuse_matmul_add_internal(g)
    >>> out.child("a").type, report.replaced
    ('MatMulAdd', ('m', 'a'))
    >>> amanda.Session(out).run(["y"], {"x": np.ones((1, 1, 2), np.float32)})[0].tolist()
    [[[14.0, 26.0]]]
    """
    return apply_rules("fuse_matmul_add_internal", model, [MATMUL_ADD], lambda m, p: _INTERNAL)


def fuse_gelu(model: Container) -> PassResult:
    """Replace the erf form of GELU (``x * 0.5 * (1 + erf(x / sqrt 2))``, as exported by torch)
    with one Gelu op, in levels whose ONNX opset has Gelu (20 and later)."""
    expect_container(model, "model")
    return apply_rules("fuse_gelu", model, GELU, _by_level(model, internal=False))


def fuse_gelu_internal(model: Container) -> PassResult:
    """:func:`fuse_gelu`, and below opset 20 into amanda's own ``Gelu`` (namespace
    ``amanda/fused``), which only amanda runs: a Session uses it in its plans, where one
    float32 pass replaces five ops; a model meant for export should use :func:`fuse_gelu`.

    >>> import amanda, numpy as np
    >>> c = lambda n, v: amanda.op("Constant", n, [], ["output"], {"value": np.float32(v)})
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y"], children=[c("r2", 2 ** 0.5), c("one", 1),
    ...     c("half", 0.5), amanda.op("Div", "d", ["A", "B"], ["C"]), amanda.op("Erf", "e", ["input"], ["output"]),
    ...     amanda.op("Add", "a", ["A", "B"], ["C"]), amanda.op("Mul", "m", ["A", "B"], ["C"]),
    ...     amanda.op("Mul", "h", ["A", "B"], ["C"])],
    ...     edges=[("g:x", "d:A"), ("r2:output", "d:B"), ("d:C", "e:input"), ("e:output", "a:A"), ("one:output", "a:B"),
    ...      ("g:x", "m:A"), ("a:C", "m:B"), ("m:C", "h:A"), ("half:output", "h:B"), ("h:C", "g:y")],
    ...     attrs={"namespace": "amanda/onnx/17"})
    >>> out, report = fuse_gelu_internal(g)
    >>> out.child("h").type, out.child("h").attrs["namespace"], report.replaced
    ('Gelu', 'amanda/fused', ('d', 'e', 'a', 'm', 'h'))
    >>> [round(float(v), 4) for v in amanda.Session(out).run(["y"], {"x": np.float32([-1, 0, 2])})[0]]
    [-0.1587, 0.0, 1.9545]
    """
    return apply_rules("fuse_gelu_internal", model, GELU, _by_level(model, internal=True))


def fuse_swish_internal(model: Container) -> PassResult:
    """``Mul(x, Sigmoid(x))`` as one Swish: ONNX's from opset 24, amanda's own (namespace
    ``amanda/fused``, run only by amanda) below; a Session uses it in its plans."""
    return apply_rules("fuse_swish_internal", model, [SWISH], _by_level(model, internal=True))
