"""Matrix products of the ONNX default domain: MatMul, Gemm, Einsum, MatMulInteger."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.exec.kernels.cblas import accumulate, cblas_gemm, rows_times
from amanda.exec.kernels.math_util import as_array, attr_str, wide
from amanda.exec.kernels.registry import kernel
from amanda.exec.kernels.relaid import relaid_if_constant
from amanda.ops.catalog import FUSED

Attrs = Mapping[str, Any]


def _product(fn: Any, *xs: np.ndarray) -> np.ndarray:
    """``fn`` over ``xs`` in a dtype numpy has loops for, cast back to the first input's."""
    dtype = xs[0].dtype
    work = [x.astype(wide(dtype), copy=False) for x in xs]
    return as_array(fn(*work)).astype(dtype, copy=False)


#: A narrow-float weight (float16, bfloat16 ...) widens to float32 this many bytes at a time
SLAB_BYTES = 1 << 24


def _slabbed(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``a @ b`` for a large narrow-float matrix ``b`` (``a`` of its dtype), widened to float32 one
    slab of ``SLAB_BYTES`` rows at a time and accumulated by BLAS: widening it whole would copy a
    weight twice its size on every call, and a model mapped from its file would hold that copy
    beside the pages it maps. None where that does not apply.

    >>> b = np.arange(12, dtype=np.float16).reshape(4, 3)
    >>> _slabbed(np.ones((2, 4), np.float16), b) is None  # a small weight is widened whole
    True
    """
    if b.ndim != 2 or a.dtype != b.dtype or wide(b.dtype) == b.dtype or 2 * b.nbytes <= SLAB_BYTES:
        return None
    k, n = b.shape
    gemm = cblas_gemm(np.dtype(np.float32))
    rows = a.reshape(-1, k).astype(np.float32)
    out = np.zeros((rows.shape[0], n), np.float32)
    step = max(1, SLAB_BYTES // (4 * n))
    for i in range(0, k, step):
        slab = b[i:i + step].astype(np.float32)
        if gemm is not None:
            accumulate(gemm, rows[:, i:i + step], slab, out, 1.0)
        else:  # pragma: no cover - a BLAS amanda cannot call
            out += rows[:, i:i + step] @ slab
    return out.astype(b.dtype).reshape(*a.shape[:-1], n)


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # (..., m, k) @ (k, n) is one (prod(...) * m, k) @ (k, n) GEMM: numpy would loop over
    # the batch, and one large GEMM is markedly faster than many small ones; a non-contiguous
    # ``a`` (a transposed view) is copied first: one pass, where numpy's fallback would run
    # one small product per batch row
    if b.ndim == 2 and a.ndim > 2:
        rows = np.ascontiguousarray(a).reshape(-1, a.shape[-1])
        return np.matmul(rows, b).reshape(*a.shape[:-1], b.shape[-1])
    return np.matmul(a, b)


def _dense(a: np.ndarray, b: np.ndarray, c: np.ndarray | None) -> np.ndarray | None:
    """``a @ b + c`` for a float dense layer (2-D ``a`` and ``b``, a row ``c``) with fewer rows than
    outputs, computed as ``(b.T @ a.T).T``: the result is the transposed view of an
    ``(N, M)`` array, which the next such layer reads as its ``a.T`` without a copy.

    OpenBLAS runs the MLP's (64, 784) @ (784, 512) about 10% faster in that orientation
    (two threads: 483 -> 435 µs for the three layers), as onnxruntime's MLAS-sized gap asks.
    None where the layer does not fit (the caller computes it as usual)."""
    m, n = a.shape[0], b.shape[1]
    if (m >= n or a.dtype != b.dtype or a.dtype.char not in "fd"
            or (c is not None and (c.dtype != a.dtype or c.shape not in ((n,), (1, n))))):
        return None
    # a plan's constant weights only (a transposed weight, Gemm's transB, needs no copy): a
    # variable's value is new after each training step, and copying it per call cost the MLP's
    # training step 0.8 ms; whether a product runs transposed never depends on earlier calls,
    # as the two orientations differ in the last bits
    bt = b.T if b.flags.f_contiguous and not b.flags.writeable else (
        relaid_if_constant(b, "T", lambda w: np.ascontiguousarray(w.T)) if b.flags.c_contiguous else None)
    if bt is None:
        return None
    out = np.matmul(bt, a.T)
    if c is not None:
        out += c.reshape(n, 1)
    return out.T


@kernel("MatMul", since=1, heavy=True)
def matmul_kernel(attrs: Attrs, a: np.ndarray, b: np.ndarray) -> tuple:
    """ONNX MatMul: numpy ``matmul`` semantics, batch dimensions broadcast."""
    dense = _dense(a, b, None) if a.ndim == b.ndim == 2 else None
    if dense is None:
        dense = _slabbed(a, b)
    return (_product(_matmul, a, b) if dense is None else dense,)


@kernel("MatMulAdd", family=FUSED, heavy=True)
def matmul_add_kernel(attrs: Attrs, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple:
    """amanda's fused ``Add(MatMul(a, b), c)`` (a Linear layer: ``b`` a constant matrix, ``c`` a
    bias row), made by :func:`amanda.passes.fuse.fuse_matmul_add_internal` for a Session's plans.

    The bias is written first and BLAS adds the product into it, so the Add costs neither a
    dispatch nor a pass of its own; a 2-D product with fewer rows than outputs runs transposed
    (see ``_dense``). Anything else computes exactly what the two ops would."""
    n = b.shape[-1]
    if (b.ndim == 2 and a.ndim >= 2 and c.ndim <= 1 and c.size in (1, n) and a.dtype == b.dtype == c.dtype
            and a.dtype.char in "fd"):
        row = c.reshape(-1)
        if a.ndim > 2:
            rows = np.ascontiguousarray(a).reshape(-1, a.shape[-1])
            return (rows_times(rows, b, row).reshape(*a.shape[:-1], n),)
        dense = _dense(a, b, row)
        if dense is None:  # BLAS reads a transposed (F-ordered) ``a`` as it is: no copy
            dense = np.matmul(a, b)
            dense += row
        return (dense,)
    y = _product(_matmul, a, b)
    return (as_array(np.add(y, c.astype(y.dtype, copy=False))),)


@kernel("Gemm", since=1, heavy=True)
def gemm_kernel(attrs: Attrs, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> tuple:
    """ONNX Gemm: ``alpha * A' @ B' + beta * C`` with optional transposes; C broadcasts."""
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha == beta == 1.0 and a.ndim == b.ndim == 2 and not int(attrs.get("transA", 0)):
        dense = _dense(a, b.T if int(attrs.get("transB", 0)) else b, c)
        if dense is not None:
            return (dense,)
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
