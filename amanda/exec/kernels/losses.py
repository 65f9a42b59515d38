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

from amanda.exec.kernels.math_util import as_array, attr_str
from amanda.exec.kernels.registry import kernel

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


@kernel("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy_kernel(attrs: Attrs, scores: np.ndarray, labels: np.ndarray, weights: Any = None) -> tuple:
    """ONNX SoftmaxCrossEntropyLoss: the loss and the log-softmax over the class axis 1."""
    wide = scores.astype(np.float64) if scores.dtype != np.float64 else scores
    shifted = wide - np.max(wide, axis=1, keepdims=True)
    log_prob = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    loss = _nll(attrs, log_prob, labels, weights)
    return (loss.astype(scores.dtype, copy=False), log_prob.astype(scores.dtype))
