"""Conv without columns: one accumulating GEMM per kernel offset over shifted rows.

For unit strides and one group, in the flattened channels-last padded input ``(N * prod(P), C)``
kernel offset ``k`` of every output position is the row ``offset(k)`` further on, so the output
at padded width is ``sum_k rows[offset(k):][:R] @ W_k`` over views of the input itself; the
overhang is cropped. Each product is added into the output by BLAS itself (``beta = 1``), so
there is neither the ``K``-fold column copy of im2col nor a pass per offset to add the products.

The products go through ``cblas_?gemm`` of numpy's own BLAS (see ``cblas.py``); where it
cannot be found, numpy's matmul adds each product.
"""

from __future__ import annotations

import numpy as np

from amanda.exec.kernels.cblas import accumulate, cblas_gemm
from amanda.exec.kernels.scratch import scratch
from amanda.exec.kernels.spatial import padded_channels_last

__all__ = ["shifted_rows"]


def shifted_rows(
    x: np.ndarray, packed: np.ndarray, kernel: list[int], dilations: list[int], pads: list[int],
    out: list[int],
) -> np.ndarray:
    """The ``(N, *out, M)`` channels-last conv of ``x`` ``(N, C, *S)`` by ``packed`` ``(*K * C, M)``
    (the weights as :func:`amanda.exec.kernels.conv_last.packed` lays them out), a view of a scratch
    buffer, without bias; unit strides only.

    >>> x = np.arange(4, dtype=np.float32).reshape(1, 1, 4)
    >>> shifted_rows(x, np.ones((2, 1), np.float32), [2], [1], [0, 0], [3])[..., 0].tolist()
    [[1.0, 3.0, 5.0]]
    """
    c, m = x.shape[1], packed.shape[1]
    memory = padded_channels_last(x, pads)
    rows = memory.reshape(-1, c)
    steps = [s // memory.strides[-2] for s in memory.strides[1:-1]]  # rows per step of each axis
    offsets = [sum(o * d * t for o, d, t in zip(k, dilations, steps)) for k in np.ndindex(*kernel)]
    count = rows.shape[0] - offsets[-1]  # the last valid position plus the last offset fits
    weights = packed.reshape(len(offsets), c, m)
    y = scratch((rows.shape[0], m), x.dtype, "conv.gemm")
    head = y[:count]
    gemm = cblas_gemm(x.dtype) if packed.dtype == x.dtype else None
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

