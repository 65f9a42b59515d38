"""Fusions the kernels exploit, as rewrite rules (:mod:`amanda.rewrite`): Conv+BatchNormalization
folded for inference, MatMul+Add as one Gemm (or amanda's own MatMulAdd), and the erf form of
GELU and SiLU as one Gelu / Swish op (where the opset has it, or amanda's own for a Session).

Each fusion is one :class:`~amanda.rewrite.Rule`: the pattern as builder code, the replacement,
and a guard for what a pattern cannot say (constant weights, a known rank, the level's opset).
:func:`~amanda.passes.rules.apply_rules` replaces their matches level by level.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from amanda.containers import Container
from amanda.containers.arguments import expect_container
from amanda.exec.dispatch import parse_namespace
from amanda.ops.catalog import FUSED
from amanda.passes.level import level_namespaces, own_namespace
from amanda.passes.report import PassResult
from amanda.passes.rules import apply_rules
from amanda.rewrite import Match, Optional, Rule
from amanda.rewrite.library import erf_gelu, erf_gelu_half_inside, matmul_add, silu
from amanda.types import TensorType, infer_types

__all__ = ["CONV_BATCHNORM", "GELU", "MATMUL_ADD", "SWISH", "fuse_conv_batchnorm", "fuse_gelu", "fuse_gelu_internal",
           "fuse_matmul_add", "fuse_matmul_add_internal", "fuse_swish_internal"]

GEMM_PORTS = (("A", "B", "C"), ("Y",))


def _opset(namespace: str | None) -> int:
    try:
        family, domain, opset = parse_namespace(namespace or "")
    except Exception:  # noqa: BLE001 - unreadable namespaces are not fused
        return 0
    return opset or 0 if family == "amanda/onnx" and not domain else 0


def _target(match: Match, since: int) -> dict[str, Any] | None:
    """Where the fused op lives: the matched ops' ONNX namespace from opset ``since``, else
    amanda's own when the context (level namespace, internal) asks for it, else None (no fusion)."""
    namespace, internal = match.context or (None, False)  # no context (amanda.rewrite): the ops' own
    own = next((own_namespace(match.view.ops[k]) for k in match.keys if "namespace" in match.view.ops[k].attrs), {})
    return own if _opset(own.get("namespace", namespace)) >= since else {"namespace": FUSED} if internal else None


def _real(value: Any) -> float | None:
    """``value`` as a float if it is a real number (a bool, int, float or numpy scalar), else None."""
    if isinstance(value, (bool, int, float, np.integer, np.floating)) or (
            isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biuf"):
        return float(value)
    return None


def _inference_epsilon(bn: Container) -> float | None:
    """The epsilon of a BatchNormalization in inference mode; None in training mode or for
    attributes no BatchNormalization can have (that op is left for the kernel to name)."""
    training, epsilon = _real(bn.attrs.get("training_mode", 0)), _real(bn.attrs.get("epsilon", 1e-5))
    return None if training is None or training else epsilon


def _folded(op: Any, x: Any, w: Any, b: Any, scale: Any, bias: Any, mean: Any, var: Any, conv: Any, bn: Any) -> Any:
    """The Conv with the BatchNormalization's scale and shift folded into its weights and bias."""
    k = np.asarray(scale.value, np.float64) / np.sqrt(np.asarray(var.value, np.float64) + (_inference_epsilon(bn) or 0.0))
    w2 = (w.value * k.reshape(-1, *([1] * (w.value.ndim - 1)))).astype(w.value.dtype)
    b2 = ((0.0 if b is None or b.source is None else b.value) - mean.value) * k + bias.value
    return op.Conv(x, w2, b2.astype(w.value.dtype), _like=conv)


def _foldable(m: Match) -> bool:
    constant = [m.constant(v) is not None for v in ("w", "scale", "bias", "mean", "var")]
    return all(constant) and (m.values["b"] is None or m.constant("b") is not None) and \
        _inference_epsilon(m.op("bn")) is not None and len(m.op("conv").outputs) == 1


def _linear(m: Match) -> bool:
    """A constant matrix and bias row; outside a Session's plans, a left operand known 2-D."""
    types, path, internal = m.context or (None, (), False)
    b, c = m.constant("b"), m.constant("c")
    if b is None or b.ndim != 2 or c is None or c.ndim > 1:
        return False
    if internal:
        return c.size in (1, b.shape[1])
    mm = m.op("mm")
    a = types.input(path + (mm.name,), mm.inputs[0].name) if types is not None else None
    return isinstance(a, TensorType) and a.shape is not None and len(a.shape) == 2


def _gemm(op: Any, a: Any, b: Any, c: Any, match: Match) -> Any:
    if match.context and match.context[2]:  # amanda's own: any rank, the bias written first and added to by BLAS
        return op.MatMulAdd(a, b, c, _ports=GEMM_PORTS, namespace=FUSED)
    return op.Gemm(a, b, c, **own_namespace(match.op("mm")))


# (made while amanda is imported, they build no namespace: check=False; the tests check them)
# Conv (constant weights) read only by an inference BatchNormalization -> one Conv
CONV_BATCHNORM = Rule(
    "conv_batchnorm",
    lambda op, x, w, b, scale, bias, mean, var: op.BatchNormalization(
        op.Conv(x, w, Optional(b), _as="conv"), scale, bias, mean, var, _as="bn"),
    _folded, guard=_foldable, check=False)
# MatMul by a constant matrix read only by an Add of a constant row -> Gemm or MatMulAdd
MATMUL_ADD = Rule("matmul_add", matmul_add, _gemm, guard=_linear, check=False)
# the erf form of GELU (either association) -> one Gelu
GELU = tuple(Rule("gelu", pattern, lambda op, x, match: op.Gelu(x, **_target(match, 20) or {}),
                  guard=lambda m: _target(m, 20) is not None, check=False) for pattern in (erf_gelu, erf_gelu_half_inside))
# SiLU, Mul(x, Sigmoid(x)) -> one Swish
SWISH = Rule("swish", silu, lambda op, x, match: op.Swish(x, **_target(match, 24) or {}),
             guard=lambda m: _target(m, 24) is not None, check=False)


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
    return apply_rules("fuse_matmul_add", model, [MATMUL_ADD], lambda m, p: (types, p, False))


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
    return apply_rules("fuse_matmul_add_internal", model, [MATMUL_ADD], lambda m, p: (None, p, True))


def fuse_gelu(model: Container) -> PassResult:
    """Replace the erf form of GELU (``x * 0.5 * (1 + erf(x / sqrt 2))``, as exported by torch)
    with one Gelu op, in levels whose ONNX opset has Gelu (20 and later)."""
    expect_container(model, "model")
    namespaces = level_namespaces(model)
    return apply_rules("fuse_gelu", model, GELU, lambda m, p: (namespaces.get(p), False))


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
    namespaces = level_namespaces(model)
    return apply_rules("fuse_gelu_internal", model, GELU, lambda m, p: (namespaces.get(p), True))


def fuse_swish_internal(model: Container) -> PassResult:
    """``Mul(x, Sigmoid(x))`` as one Swish: ONNX's from opset 24, amanda's own (namespace
    ``amanda/fused``, run only by amanda) below; a Session uses it in its plans."""
    namespaces = level_namespaces(model)
    return apply_rules("fuse_swish_internal", model, [SWISH], lambda m, p: (namespaces.get(p), True))
