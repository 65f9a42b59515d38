"""Conv without columns: one accumulating GEMM per kernel offset over shifted rows.

For unit strides and one group, in the flattened channels-last padded input ``(N * prod(P), C)``
kernel offset ``k`` of every output position is the row ``offset(k)`` further on, so the output
at padded width is ``sum_k rows[offset(k):][:R] @ W_k`` over views of the input itself; the
overhang is cropped. Each product is added into the output by BLAS itself (``beta = 1``), so
there is neither the ``K``-fold column copy of im2col nor a pass per offset to add the products.

numpy's matmul cannot accumulate, so the products call ``cblas_?gemm`` of the BLAS numpy loaded
(the library :mod:`amanda.exec.blas` sets the threads of, found through threadpoolctl). scipy's
GEMM would load a second OpenBLAS whose idle threads spin against the first one's (ResNet at two
threads: 8 -> 16 ms). Where that symbol cannot be found, numpy's matmul adds each product.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from amanda.exec.kernels.scratch import scratch
from amanda.exec.kernels.spatial import pad_spatial

__all__ = ["cblas_gemm", "shifted_rows"]

_ROW_MAJOR, _NO_TRANS = 101, 111
_GEMM: dict[str, Any] = {}  # dtype char -> cblas gemm function (or None), found on first use
_LOCK = threading.Lock()


def _find(char: str) -> Any:
    from amanda.exec.blas import _blas_libraries

    real = ctypes.c_float if char == "f" else ctypes.c_double
    for lib in _blas_libraries():
        get = getattr(lib, "_get_symbol", None)
        fn = get(f"cblas_{'s' if char == 'f' else 'd'}gemm") if get is not None else None
        if fn is None:
            continue
        size = ctypes.c_int64 if getattr(lib, "_symbol_suffix", "") in ("64_", "_64") else ctypes.c_int
        fn.restype = None
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, size, size, size, real, ctypes.c_void_p,
                       size, ctypes.c_void_p, size, real, ctypes.c_void_p, size]
        return fn
    return None


def cblas_gemm(dtype: np.dtype) -> Any:
    """The ``cblas_?gemm`` of numpy's BLAS for ``dtype`` (float32 or float64), or None.

    >>> gemm = cblas_gemm(np.dtype(np.float32))
    >>> c = np.ones((2, 2), np.float32)
    >>> a = np.ones((2, 3), np.float32)
    >>> gemm is None or accumulate(gemm, a, np.ones((3, 2), np.float32), c, 1.0) is None
    True
    >>> gemm is None or c.tolist() == [[4.0, 4.0], [4.0, 4.0]]
    True
    """
    char = np.dtype(dtype).char
    if char not in _GEMM:
        with _LOCK:
            if char not in _GEMM:
                try:
                    _GEMM[char] = _find(char)
                except Exception:  # noqa: BLE001 - an unusual BLAS: numpy's matmul does the work
                    _GEMM[char] = None
    return _GEMM[char]


def accumulate(gemm: Any, a: np.ndarray, b: np.ndarray, c: np.ndarray, beta: float) -> None:
    """``c = a @ b + beta * c`` through ``gemm``; ``a``, ``b`` and ``c`` are row-major matrices
    whose rows are contiguous (``c`` writable, of the same dtype)."""
    m, k = a.shape
    n = b.shape[1]
    item = a.itemsize
    assert a.dtype == b.dtype == c.dtype and a.strides[1] == b.strides[1] == c.strides[1] == item
    gemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, n, k, 1.0, a.__array_interface__["data"][0],
         a.strides[0] // item, b.__array_interface__["data"][0], b.strides[0] // item, beta,
         c.__array_interface__["data"][0], c.strides[0] // item)


def shifted_rows(
    x: np.ndarray, packed: np.ndarray, kernel: list[int], dilations: list[int], pads: list[int],
    out: list[int],
) -> np.ndarray:
    """The ``(N, *out, M)`` channels-last conv of ``x`` ``(N, C, *S)`` by ``packed`` ``(*K * C, M)``
    (the weights as :func:`amanda.exec.kernels.conv._packed` lays them out), a view of a scratch
    buffer, without bias; unit strides only.

    >>> x = np.arange(4, dtype=np.float32).reshape(1, 1, 4)
    >>> shifted_rows(x, np.ones((2, 1), np.float32), [2], [1], [0, 0], [3])[..., 0].tolist()
    [[1.0, 3.0, 5.0]]
    """
    nd = len(dilations)
    n, c = x.shape[:2]
    m = packed.shape[1]
    memory = scratch(
        (n, *(x.shape[2 + i] + pads[i] + pads[nd + i] for i in range(nd)), c), x.dtype, "conv.nhwc"
    )
    pad_spatial(x, pads[:nd], pads[nd:], 0, into=np.moveaxis(memory, -1, 1))
    rows = memory.reshape(-1, c)
    steps = [s // memory.strides[-2] for s in memory.strides[1:-1]]  # rows per step of each axis
    offsets = [sum(o * d * t for o, d, t in zip(k, dilations, steps)) for k in np.ndindex(*kernel)]
    count = rows.shape[0] - offsets[-1]  # the last valid position plus the last offset fits
    weights = packed.reshape(len(offsets), c, m)
    y = scratch((rows.shape[0], m), x.dtype, "conv.gemm")
    head = y[:count]
    gemm = cblas_gemm(x.dtype)
    if gemm is not None:
        for k, offset in enumerate(offsets):
            accumulate(gemm, rows[offset : offset + count], weights[k], head, float(k > 0))
    else:
        np.matmul(rows[:count], weights[0], out=head)
        part = scratch((count, m), x.dtype, "conv.part")
        for k in range(1, len(offsets)):
            np.matmul(rows[offsets[k] : offsets[k] + count], weights[k], out=part)
            head += part
    return y.reshape(*memory.shape[:-1], m)[(slice(None), *(slice(0, o) for o in out))]

