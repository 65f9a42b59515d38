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

from amanda.exec.kernels.math_util import as_array
from amanda.exec.kernels.registry import kernel

Attrs = Mapping[str, Any]


@kernel("Identity", since=1)
def identity_kernel(attrs: Attrs, x: Any) -> tuple:
    """ONNX Identity: the input itself (tensors, sequences and optionals alike)."""
    return (x,)


def _dropout(attrs: Attrs, x: np.ndarray, ratio: float, training: bool, mask_dtype: Any) -> tuple:
    if not training or ratio == 0:
        return (x, np.ones(x.shape, dtype=mask_dtype))
    seed = attrs.get("seed")
    if seed is not None:
        draws = np.random.RandomState(int(seed)).uniform(0.0, 1.0, x.shape)
    else:
        draws = np.random.default_rng().uniform(0.0, 1.0, x.shape)
    mask = draws >= ratio
    with np.errstate(all="ignore"):
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
