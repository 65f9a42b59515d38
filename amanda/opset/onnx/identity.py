"""Identity and Dropout of the ONNX default domain.

Dropout is an identity in inference; from opset 12 a ``training_mode`` input
turns it on, and a ``seed`` attribute makes the mask reproducible (drawn with
numpy's legacy ``RandomState(seed).uniform``, which is what the ONNX reference
uses, so seeded results match it bit for bit).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import const
from amanda.autodiff.rules_shape import rest
from amanda.autodiff.rules_unary import unary_vjp
from amanda.build import ops
from amanda.build.values import Value
from amanda.exec.kernels.math_util import as_array
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node
from amanda.types.rules.elementwise import same_as_first
from amanda.types.tensor_type import TensorType

Attrs = Mapping[str, Any]


@kernel("Identity", since=1)
def identity_kernel(attrs: Attrs, x: Any) -> tuple:
    """ONNX Identity: the input itself (tensors, sequences and optionals alike)."""
    return (x,)


define("Identity", type_rule=same_as_first, vjp=unary_vjp)


def _dropout(attrs: Attrs, x: np.ndarray, ratio: float, training: bool, mask_dtype: Any) -> tuple:
    if not training or ratio == 0:
        return (x, np.ones(x.shape, dtype=mask_dtype))
    seed = attrs.get("seed")
    if seed is not None:
        draws = np.random.RandomState(int(seed)).uniform(0.0, 1.0, x.shape)
    else:
        draws = np.random.default_rng().uniform(0.0, 1.0, x.shape)
    mask = draws >= ratio
    # where, not mask * x * scale: ratio 1 would give 0 * inf = nan
    y = as_array(np.where(mask, x * (1.0 / (1.0 - ratio)), 0)).astype(x.dtype, copy=False)
    return (y, mask.astype(mask_dtype))


@kernel("Dropout", since=1)
def dropout_v1_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX Dropout opsets 1-9: inference identity; the mask has the input's dtype.

    Training in these opsets has no switch a kernel can read (``is_test`` is gone
    from opset 7), so it is not supported.
    """
    return _dropout(attrs, x, float(attrs.get("ratio", 0.5)), False, x.dtype)


def dropout(node: Node) -> list:
    """Output like the input; the mask is bool of the same shape."""
    return [node.type(0), TensorType("bool", node.shape(0))]


def dropout_vjp(n: GradNode) -> list:
    """Dropout: the identity in inference mode; in training, the gradient through the kept mask
    (its ``mask`` output, or where the output is non-zero when the op has no mask port),
    scaled as the forward pass scaled."""
    g = n.grad()
    training = n.inputs[2] if len(n.inputs) > 2 else None
    if training is None or (training.constant is not None and not bool(np.asarray(training.constant))):
        return rest(n, g)
    ratio = float(n.known(1, "ratio")) if len(n.inputs) > 1 and n.inputs[1] is not None else 0.5
    if len(n.outputs) > 1:
        kept_mask = n.outputs[1]
    else:  # no mask port: an element was kept where the output is not zero (or the input was)
        x, y = n.inputs[0], n.outputs[0]
        kept_mask = ops.Or(ops.Not(ops.Equal(y, const(0, y))), ops.Equal(x, const(0, x)))
    mask = ops.Cast(kept_mask, to=np.dtype(g.type.dtype))
    kept = ops.Mul(g, mask)
    factor: Value | np.ndarray = const(1 / (1 - ratio), g)
    if training.constant is None:  # decided at run time: outside training the mask is all ones
        factor = ops.Where(training, factor, const(1, g))
    return rest(n, kept if ratio == 0 else ops.Mul(kept, factor))


define("Dropout", type_rule=dropout, vjp=dropout_vjp)


@kernel("Dropout", since=10)
def dropout_v10_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX Dropout opsets 10-11: inference identity with a bool mask."""
    return _dropout(attrs, x, float(attrs.get("ratio", 0.5)), False, np.bool_)


@kernel("Dropout", since=12)
def dropout_kernel(
    attrs: Attrs, x: np.ndarray, ratio: np.ndarray | None = None,
    training_mode: np.ndarray | None = None,
) -> tuple:
    """ONNX Dropout from opset 12: optional ``ratio`` and ``training_mode`` inputs."""
    r = 0.5 if ratio is None else float(np.asarray(ratio).reshape(-1)[0])
    training = training_mode is not None and bool(np.asarray(training_mode).reshape(-1)[0])
    return _dropout(attrs, x, r, training, np.bool_)
