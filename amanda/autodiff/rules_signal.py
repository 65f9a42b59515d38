"""The vector-Jacobian rules of DFT and STFT.

**DFT**: the transform is a linear map along its axis, whatever
``inverse``, ``onesided`` or ``dft_length`` say; ``grad`` computes its matrix by transforming
the identity with the kernel's own code and sends the gradient through the transpose (as the
Resize rule does). The signal length, the real/complex axis and ``dft_length`` (and, from
opset 20, the ``axis`` input) must be known when ``grad`` runs.

**STFT** is written again as a Gather of the frames, a Mul by the window and a DFT, and
differentiated through them (a composite rule): the signal and the window get gradients.
``frame_step`` and ``frame_length`` must be constants and the signal length known.
"""

from __future__ import annotations

import numpy as np

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node, const, rank
from amanda.build import ops

__all__ = ["dft_matrix", "dft_vjp", "stft_vjp"]

I64 = np.int64


def dft_matrix(n_in: int, c_in: int, length: int | None, inverse: bool, onesided: bool) -> np.ndarray:
    """The real matrix ``M`` with ``flat(y) = flat(x) @ M`` for one signal of ``n_in`` samples of
    ``c_in`` parts (1: real, 2: complex), ``flat`` joining samples and parts.

    >>> dft_matrix(2, 1, None, False, False).tolist()  # [x0 + x1, 0, x0 - x1, 0]
    [[1.0, 0.0, 1.0, 0.0], [1.0, 0.0, -1.0, 0.0]]
    """
    from amanda.exec.kernels.signal import _dft

    basis = np.eye(n_in * c_in).reshape(n_in * c_in, n_in, c_in)
    return _dft(basis, length, 1, inverse, onesided).reshape(n_in * c_in, -1)


def dft_vjp(n: Node) -> list:
    """DFT: the gradient through the transpose of the transform's matrix (module doc)."""
    x = n.given(0)
    r = rank(x, n)
    length = None if len(n.inputs) < 2 or n.inputs[1] is None else int(n.known(1, "dft_length").reshape(-1)[0])
    if n.opset is not None and n.opset < 20:
        axis = int(n.attr("axis", 1))
    else:
        axis = -2 if len(n.inputs) < 3 or n.inputs[2] is None else int(n.known(2, "axis").reshape(-1)[0])
    axis = (axis + r if axis < 0 else axis) % (r - 1)  # negative counts the real/complex axis, as the kernel
    shape = x.type.shape
    if type(shape[axis]) is not int or type(shape[-1]) is not int:
        raise n.fail("a known signal length and real/complex axis", repr(x.type))
    n_in, c_in = int(shape[axis]), int(shape[-1])
    matrix = dft_matrix(n_in, c_in, length, bool(int(n.attr("inverse", 0))), bool(int(n.attr("onesided", 0))))
    perm = [i for i in range(r - 1) if i != axis] + [axis, r - 1]
    back = [int(i) for i in np.argsort(perm)]
    lead = [0] * (r - 2)
    g = ops.Reshape(ops.Transpose(n.grad(), perm=perm), np.array([*lead, -1], I64))
    gx = ops.Reshape(ops.MatMul(g, const(matrix.T, g)), np.array([*lead, n_in, c_in], I64))
    return [ops.Transpose(gx, perm=back)] + [None] * (len(n.inputs) - 1)


def _stft(n: Node) -> list:
    """STFT: frames gathered, windowed and transformed along their samples."""
    signal = n.given(0)
    step = int(n.known(1, "frame_step").reshape(-1)[0])
    window = n.inputs[2] if len(n.inputs) > 2 else None
    shape = signal.type.shape
    if shape is None or type(shape[1]) is not int or type(shape[-1]) is not int:
        raise n.fail("a known signal length", repr(signal.type))
    if len(n.inputs) > 3 and n.inputs[3] is not None:
        length = int(n.known(3, "frame_length").reshape(-1)[0])
    elif window is not None and window.type.shape is not None and type(window.type.shape[0]) is int:
        length = int(window.type.shape[0])
    else:
        length = int(shape[1])
    frames = 1 + (int(shape[1]) - length) // step
    taken = np.arange(frames)[:, None] * step + np.arange(length)[None, :]
    picked = ops.Gather(signal, taken.astype(I64), axis=1)  # [batch, frames, length, parts]
    if window is not None:
        picked = ops.Mul(picked, ops.Reshape(window, np.array([1, 1, length, 1], I64)))
    onesided = int(n.attr("onesided", 1)) and int(shape[-1]) == 1
    return [ops.DFT(picked, axis=2, onesided=int(onesided))]


stft_vjp = composite(_stft)
