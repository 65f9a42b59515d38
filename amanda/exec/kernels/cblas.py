"""The accumulating GEMM of numpy's own BLAS, which numpy does not expose.

numpy's matmul cannot add a product into an existing result (``beta = 1``). ``cblas_?gemm`` is
called through ctypes on the library that :mod:`amanda.exec.blas` already controls (found by
threadpoolctl), so it runs on the threads a run set; scipy's GEMM would load a second OpenBLAS
whose idle threads spin against the first one's (ResNet at two threads: 8 -> 16 ms). Where the
symbol is missing (another BLAS), the callers fall back to numpy.

OpenBLAS's transposing copy (``?omatcopy``) was tried for the conv results' layout change too:
twice numpy's speed alone, no gain inside a model.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from amanda.errors import ExecutionError

__all__ = ["accumulate", "cblas_gemm", "rows_times"]

_ROW_MAJOR, _NO_TRANS = 101, 111
BIAS_IN_GEMM = 32768  # output elements from which rows_times lets BLAS add the bias
_FOUND: dict[str, Any] = {}  # routine name ("sgemm", "dgemm") -> ctypes function or None
_LOCK = threading.Lock()


def _find(name: str) -> Any:
    from amanda.exec.blas import _blas_libraries

    real = ctypes.c_float if name[0] == "s" else ctypes.c_double
    for lib in _blas_libraries():
        # OpenBLAS only: its build configuration tells the integer width (other BLAS may build either)
        get = getattr(lib, "_get_symbol", None)
        if getattr(lib, "internal_api", None) != "openblas" or get is None:
            continue
        fn, config = get(f"cblas_{name}"), get("openblas_get_config")
        if fn is None or config is None:
            continue
        config.restype = ctypes.c_char_p
        size = ctypes.c_int64 if b"USE64BITINT" in (config() or b"") else ctypes.c_int
        pointer, flag = ctypes.c_void_p, ctypes.c_int
        fn.restype = None
        # order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc
        fn.argtypes = [flag, flag, flag, size, size, size, real, pointer, size, pointer, size, real, pointer, size]
        return fn
    return None


def _routine(name: str) -> Any:
    if name not in _FOUND:
        with _LOCK:
            if name not in _FOUND:
                try:
                    _FOUND[name] = _find(name)
                except Exception:  # noqa: BLE001 - an unusual BLAS: numpy does the work
                    _FOUND[name] = None
    return _FOUND[name]


def _prefix(dtype: np.dtype) -> str | None:
    return {"f": "s", "d": "d"}.get(np.dtype(dtype).char)


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
    prefix = _prefix(dtype)
    return None if prefix is None else _routine(prefix + "gemm")


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def accumulate(gemm: Any, a: np.ndarray, b: np.ndarray, c: np.ndarray, beta: float) -> None:
    """``c = a @ b + beta * c`` through ``gemm``; ``a``, ``b`` and ``c`` are row-major matrices
    whose rows are contiguous (``c`` writable, of the same dtype)."""
    m, k = a.shape
    n = b.shape[1]
    item = a.itemsize
    # BLAS reads and writes raw memory: a wrong shape or dtype would crash the process, so this
    # is checked always (an assert would vanish under -O)
    if not (a.dtype == b.dtype == c.dtype and b.shape[0] == k and c.shape == (m, n) and c.flags.writeable
            and a.strides[1] == b.strides[1] == c.strides[1] == item
            and min(a.strides[0], b.strides[0], c.strides[0]) >= item):
        raise ExecutionError.at("accumulate", f"row-major {a.dtype} matrices (m, k) @ (k, n) -> writable (m, n)",
                                f"{a.dtype}{a.shape} @ {b.dtype}{b.shape} -> {c.dtype}{c.shape}")
    gemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, n, k, 1.0, _address(a), a.strides[0] // item, _address(b),
         b.strides[0] // item, beta, _address(c), c.strides[0] // item)


def rows_times(rows: np.ndarray, packed: np.ndarray, bias: np.ndarray | None,
               out: np.ndarray | None = None) -> np.ndarray:
    """``rows @ packed + bias`` as a fresh ``(R, M)`` array (rows contiguous, C-ordered), or
    written into ``out`` (a C-contiguous ``(R, M)`` array of the rows' dtype) and returned.

    The bias is written first and BLAS adds the product into it (``beta = 1``): one write pass
    instead of a read-and-write pass over the output afterwards (EfficientNet's 16->96 expansion
    at 56x56: 308 -> 229 µs; a (256, 256) @ (256, 256) layer: 169 -> 141 µs); below
    ``BIAS_IN_GEMM`` outputs OpenBLAS's ``beta = 1`` path costs more than the pass it saves
    ((64, 512) @ (512, 10): 11 -> 19 µs), so the bias is added after the product.

    >>> rows_times(np.ones((2, 3), np.float32), np.ones((3, 2), np.float32), np.float32([1, 2])).tolist()
    [[4.0, 5.0], [4.0, 5.0]]
    """
    y = np.empty((rows.shape[0], packed.shape[1]), dtype=rows.dtype) if out is None else out
    # the size first: a small product (a recurrent model's output layer) asks nothing else
    fits = (rows.shape[0] * packed.shape[1] >= BIAS_IN_GEMM and bias is not None and packed.dtype == rows.dtype
            and packed.flags.c_contiguous and rows.flags.c_contiguous and rows.size > 0)
    gemm = cblas_gemm(rows.dtype) if fits else None
    if gemm is None:
        # np.dot of two 2-D arrays of one dtype costs less per call than np.matmul (same GEMM)
        (np.dot if packed.dtype == rows.dtype else np.matmul)(rows, packed, out=y)
        if bias is not None:
            y += bias
    else:
        y[...] = bias
        accumulate(gemm, rows, packed, y, 1.0)
    return y
