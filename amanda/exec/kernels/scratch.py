"""Per-thread scratch buffers for kernel temporaries (im2col columns, GEMM results).

A fresh multi-megabyte ``np.empty`` is usually mmapped and page-faulted on
first touch, which costs as much as the copy that fills it; reusing one buffer
per thread and slot avoids that. A scratch array never leaves the kernel that
asked for it: it is overwritten by the next call on the same thread.
"""

from __future__ import annotations

import math
import threading

import numpy as np

# Larger temporaries are allocated fresh so an idle thread never pins much memory.
MAX_BYTES = 64 << 20

_local = threading.local()


def scratch(shape: tuple[int, ...], dtype: np.dtype, slot: str) -> np.ndarray:
    """An uninitialised ``shape`` array of ``dtype``, reused per thread and ``slot``.

    >>> a = scratch((2, 3), np.dtype(np.float32), "doc")
    >>> a.shape, a.dtype
    ((2, 3), dtype('float32'))
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize  # np.prod costs ~5 µs a call
    if nbytes > MAX_BYTES:
        return np.empty(shape, dtype)
    buffers = getattr(_local, "buffers", None)
    if buffers is None:
        buffers = _local.buffers = {}
    buf = buffers.get(slot)
    if buf is None or buf.nbytes < nbytes:
        buf = buffers[slot] = np.empty(max(nbytes, 1), dtype=np.uint8)
    return buf[:nbytes].view(dtype).reshape(shape)
