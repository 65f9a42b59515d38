"""Matrix products of the ONNX default domain: MatMul, Gemm, Einsum, MatMulInteger."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.exec.kernels.math_util import as_array, attr_str, wide
from amanda.exec.kernels.registry import kernel

Attrs = Mapping[str, Any]


def _product(fn: Any, *xs: np.ndarray) -> np.ndarray:
    """``fn`` over ``xs`` in a dtype numpy has loops for, cast back to the first input's."""
    dtype = xs[0].dtype
    work = [x.astype(wide(dtype), copy=False) for x in xs]
    return as_array(fn(*work)).astype(dtype, copy=False)


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # (..., m, k) @ (k, n) is one (prod(...) * m, k) @ (k, n) GEMM: numpy would loop over
    # the batch, and one large GEMM is markedly faster than many small ones; a non-contiguous
    # ``a`` (a transposed view) is copied first: one pass, where numpy's fallback would run
    # one small product per batch row
    if b.ndim == 2 and a.ndim > 2:
        rows = np.ascontiguousarray(a).reshape(-1, a.shape[-1])
        return np.matmul(rows, b).reshape(*a.shape[:-1], b.shape[-1])
    return np.matmul(a, b)


@kernel("MatMul", since=1, heavy=True)
def matmul_kernel(attrs: Attrs, a: np.ndarray, b: np.ndarray) -> tuple:
    """ONNX MatMul: numpy ``matmul`` semantics, batch dimensions broadcast."""
    return (_product(_matmul, a, b),)


@kernel("Gemm", since=1, heavy=True)
def gemm_kernel(attrs: Attrs, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> tuple:
    """ONNX Gemm: ``alpha * A' @ B' + beta * C`` with optional transposes; C broadcasts."""
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    wa = a.astype(wide(a.dtype), copy=False)
    wb = b.astype(wide(a.dtype), copy=False)
    if int(attrs.get("transA", 0)):
        wa = wa.T
    if int(attrs.get("transB", 0)):
        wb = wb.T
    out = wa @ wb
    # multiply only when needed so integer Gemm stays exact
    if alpha != 1.0:
        out = alpha * out
    if c is not None:
        wc = c.astype(out.dtype, copy=False)
        out = out + (beta * wc if beta != 1.0 else wc)
    return (as_array(out).astype(a.dtype, copy=False),)


@kernel("Einsum", since=12, heavy=True)
def einsum_kernel(attrs: Attrs, *xs: np.ndarray) -> tuple:
    """ONNX Einsum: numpy ``einsum`` with the ``equation`` attribute."""
    equation = attr_str(attrs, "equation", "").replace(" ", "")
    return (_product(lambda *w: np.einsum(equation, *w), *xs),)


def _zero_point(zp: np.ndarray | None, row_wise: bool) -> Any:
    if zp is None:
        return 0
    zp = np.asarray(zp).astype(np.int32)
    # a 1-D zero point of A is per row (the M axis): make it a column
    return zp.reshape(-1, 1) if row_wise and zp.ndim == 1 else zp


@kernel("MatMulInteger", since=10, heavy=True)
def matmul_integer_kernel(
    attrs: Attrs,
    a: np.ndarray,
    b: np.ndarray,
    a_zero_point: np.ndarray | None = None,
    b_zero_point: np.ndarray | None = None,
) -> tuple:
    """ONNX MatMulInteger: 8-bit operands minus zero points, multiplied into int32."""
    wa = a.astype(np.int32) - _zero_point(a_zero_point, row_wise=True)
    wb = b.astype(np.int32) - _zero_point(b_zero_point, row_wise=False)
    return (as_array(np.matmul(wa, wb)).astype(np.int32, copy=False),)
