"""Training losses of the ONNX default domain: NegativeLogLikelihoodLoss and
SoftmaxCrossEntropyLoss.

Both take scores shaped ``[N, C, d1, ...]`` and integer targets ``[N, d1, ...]``; a target
equal to ``ignore_index`` contributes nothing, not even to the mean's denominator. With
class ``weights`` the mean divides by the summed weights of the counted targets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.autodiff.node import Node, const, rank, shape_of, size_of
from amanda.autodiff.rules_nn import i64
from amanda.build import ops
from amanda.build.values import Value
from amanda.exec.kernels.math_util import as_array, attr_str
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.rules.generators import loss

Attrs = Mapping[str, Any]


def _nll(attrs: Attrs, log_prob: np.ndarray, target: np.ndarray, weight: np.ndarray | None) -> np.ndarray:
    reduction = attr_str(attrs, "reduction", "mean")
    ignore = attrs.get("ignore_index")
    target = target.astype(np.int64, copy=False)
    keep = np.ones(target.shape, bool) if ignore is None else target != int(ignore)
    safe = np.where(keep, target, 0)
    picked = np.take_along_axis(log_prob, np.expand_dims(safe, 1), axis=1)[:, 0]
    w = np.ones(target.shape, log_prob.dtype) if weight is None else weight[safe].astype(log_prob.dtype)
    w = np.where(keep, w, 0).astype(log_prob.dtype)
    loss = -picked * w
    if reduction == "none":
        return loss.astype(log_prob.dtype, copy=False)
    total = loss.sum(dtype=np.float64)
    if reduction == "sum":
        return as_array(total, log_prob.dtype)
    if reduction != "mean":
        raise ValueError(f"reduction must be 'none', 'sum' or 'mean', found {reduction!r}")
    denominator = w.sum(dtype=np.float64)
    return as_array(total / denominator if denominator else np.float64(0.0), log_prob.dtype)


@kernel("NegativeLogLikelihoodLoss", since=12)
def nll_loss_kernel(attrs: Attrs, x: np.ndarray, target: np.ndarray, weight: Any = None) -> tuple:
    """ONNX NegativeLogLikelihoodLoss over log-probabilities ``x``."""
    return (_nll(attrs, x, target, weight),)


def _label_coefficients(n: Node, scores: Value, labels: Value) -> tuple[Value, Value]:
    """The labels with ``ignore_index`` made safe to one-hot, and each label's coefficient of
    the output gradient (class weight, zero where ignored, divided as the mean divides), shaped
    to multiply ``[N, C, ...]``; shared by SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss."""
    weights = n.inputs[2] if len(n.inputs) > 2 else None
    if n.need(2):  # never zeros in silence
        raise n.fail("class weights the loss is not differentiated by (constants)", "weights that need a gradient")
    g = n.grad()
    ignore = n.attr("ignore_index")
    safe: Value = labels
    w: Value | None = None
    if ignore is not None:
        keep = ops.Not(ops.Equal(labels, np.array(int(ignore), np.int64)))
        safe = ops.Where(keep, labels, np.array(0, np.int64))
        w = ops.Cast(keep, to=np.dtype(scores.type.dtype))
    if weights is not None:
        picked = ops.Gather(weights, safe)
        w = picked if w is None else ops.Mul(picked, w)
    coef = g if w is None else ops.Mul(g, w)
    if n.attr("reduction", "mean") == "mean":
        count = ops.Cast(size_of(labels), to=np.dtype(scores.type.dtype)) if w is None else ops.ReduceSum(w, keepdims=0)
        coef = ops.Div(coef, count)
    if rank(coef) > 0:
        coef = ops.Unsqueeze(coef, i64([1]))
    return safe, coef


def _onehot(safe: Value, scores: Value) -> Value:
    return ops.OneHot(safe, shape_of(scores, 1, 2), const([0, 1], scores), axis=1)


def nll_vjp(n: Node) -> list:
    """NegativeLogLikelihoodLoss (reductions, class weights, ignore_index): ``-onehot(labels)``
    times each label's coefficient."""
    scores, labels = n.given(0, 1)
    safe, coef = _label_coefficients(n, scores, labels)
    return [ops.Neg(ops.Mul(_onehot(safe, scores), coef))] + [None] * (len(n.inputs) - 1)


define("NegativeLogLikelihoodLoss", type_rule=loss, vjp=nll_vjp)


@kernel("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy_kernel(attrs: Attrs, scores: np.ndarray, labels: np.ndarray, weights: Any = None) -> tuple:
    """ONNX SoftmaxCrossEntropyLoss: the loss and the log-softmax over the class axis 1."""
    wide = scores.astype(np.float64) if scores.dtype != np.float64 else scores
    shifted = wide - np.max(wide, axis=1, keepdims=True)
    log_prob = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    loss = _nll(attrs, log_prob, labels, weights)
    return (loss.astype(scores.dtype, copy=False), log_prob.astype(scores.dtype))


def softmax_xent_vjp(n: Node) -> list:
    """SoftmaxCrossEntropyLoss (reductions none/sum/mean, class weights, ignore_index):
    ``(softmax(scores) - onehot(labels)) * weight``, divided as the mean divided; a gradient
    of the ``log_prob`` output goes back through its log-softmax."""
    scores, labels = n.given(0, 1)
    safe, coef = _label_coefficients(n, scores, labels)
    gx = ops.Mul(ops.Sub(ops.Softmax(scores, axis=1), _onehot(safe, scores)), coef)
    if len(n.grads) > 1 and n.grads[1] is not None:
        g1, axis = n.grads[1], i64([1])
        gx = ops.Add(gx, ops.Sub(g1, ops.Mul(ops.Exp(n.outputs[1]), ops.ReduceSum(g1, axis, keepdims=1))))
    return [gx] + [None] * (len(n.inputs) - 1)


define("SoftmaxCrossEntropyLoss", type_rule=loss, vjp=softmax_xent_vjp)
