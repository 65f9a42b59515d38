"""Einsum, Det, ReduceProd and CumProd agree with central finite differences in float64."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import ops
from amanda.build import Ops
from tests.autodiff.fd import check

I64 = np.int64


def arr(seed: int, shape: tuple) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize(("equation", "shapes"), [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("ij->", [(3, 4)]),
    ("ij->ji", [(2, 3)]),
    ("ij,j", [(2, 3), (3,)]),                      # implicit output
    ("i,j->ij", [(3,), (2,)]),                     # outer product
    ("ijk,ik->j", [(2, 3, 2), (2, 2)]),            # a letter only the first operand has comes back broadcast
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)]),  # broadcast ellipsis
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 2), (1, 2, 2, 2)]),
])
def test_einsum(equation, shapes):
    """Einsum's gradients, one Einsum per operand, on ONNX's node-test equations and more."""
    feeds = {f"x{i}": arr(i, s) for i, s in enumerate(shapes)}
    check(lambda **xs: ops.Einsum(*xs.values(), equation=equation), feeds)


def test_einsum_with_a_diagonal_is_refused():
    """A repeated subscript in an operand (a diagonal) is a SchemaError naming the op."""
    x = amanda.Input("x", "float64", (3, 3))
    net = amanda.model([x], {"loss": ops.ReduceSum(ops.Einsum(x, equation="ii->i", name="diag"), keepdims=0)})
    with pytest.raises(amanda.SchemaError, match="diag"):
        amanda.grad(net, "loss", ["x"])


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (2, 3, 3), (4, 4)])
def test_det(shape):
    """Det: the cofactor matrix, batched too."""
    check(lambda x: ops.Det(x), {"x": arr(3, shape)})


def test_det_of_a_singular_matrix():
    """The cofactors give a gradient where the inverse does not exist (numpy's cofactors)."""
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    x = amanda.Input("x", "float64", (3, 3))
    net = amanda.model([x], {"loss": ops.Det(x)})
    with amanda.Session(amanda.grad(net, "loss", ["x"])) as s:
        (got,) = s.run(["grad/x"], {"x": a})
    cof = np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1)) for j in range(3)]
                    for i in range(3)])
    np.testing.assert_allclose(got, cof, atol=1e-12)


@pytest.mark.parametrize(("axes", "keepdims"), [(None, 1), ([1], 0), ([0, 2], 1), ([-1], 0)])
def test_reduce_prod(axes, keepdims):
    """ReduceProd over any axes (opset 18's axes input)."""
    axes_in = None if axes is None else np.array(axes, I64)
    check(lambda x: Ops("amanda/onnx/18").ReduceProd(x, axes_in, keepdims=keepdims), {"x": arr(4, (2, 3, 2))})


@pytest.mark.parametrize("zeros", [1, 2])
def test_reduce_prod_with_zeros(zeros):
    """One zero: only it gets the product of the others; two: nobody gets anything (numpy)."""
    x0 = np.array([[2.0, 0.0, 3.0, 0.5], [1.0, 2.0, 3.0, 4.0]])
    if zeros == 2:
        x0[0, 3] = 0.0
    x = amanda.Input("x", "float64", (2, 4))
    net = amanda.model([x], {"loss": ops.ReduceSum(ops.ReduceProd(x, axes=[1], keepdims=0), keepdims=0)})
    with amanda.Session(amanda.grad(net, "loss", ["x"])) as s:
        (got,) = s.run(["grad/x"], {"x": x0})
    expected = np.array([[np.prod(np.delete(row, j)) for j in range(4)] for row in x0])
    np.testing.assert_allclose(got, expected)


@pytest.mark.parametrize(("exclusive", "reverse", "axis"), [(0, 0, 0), (1, 0, 1), (0, 1, -1), (1, 1, 0)])
def test_cumprod(exclusive, reverse, axis):
    """CumProd (opset 26), exclusive and reverse, on inputs without zeros."""
    x = arr(5, (3, 4)) + 3.0
    check(lambda x: Ops("amanda/onnx/26").CumProd(x, np.array(axis, I64), exclusive=exclusive, reverse=reverse),
          {"x": x})


@pytest.mark.parametrize(("shape", "opset", "attrs", "length"), [
    ((2, 5, 1), 20, {}, None),                                  # real signal, axis -2
    ((2, 4, 2), 20, {"inverse": 1}, None),                      # complex, inverse
    ((1, 6, 1), 20, {"onesided": 1}, None),
    ((1, 3, 2), 20, {}, 5),                                     # zero-padded to dft_length
    ((1, 4, 2), 20, {"inverse": 1, "onesided": 1}, 6),          # irfft
    ((3, 4, 2, 2), 17, {"axis": 1}, None),                      # opset 17's axis attribute
])
def test_dft(shape, opset, attrs, length):
    """DFT, forward and inverse, one- and two-sided, with dft_length, on real and complex input."""
    n_len = None if length is None else np.array(length, I64)
    check(lambda x: Ops(f"amanda/onnx/{opset}").DFT(x, n_len, **attrs), {"x": arr(6, shape)})


@pytest.mark.parametrize(("parts", "window", "frame_length", "onesided"),
                         [(1, True, None, 1), (1, False, 4, 0), (2, True, 4, 0), (1, True, 3, 1)])
def test_stft(parts, window, frame_length, onesided):
    """STFT (opset 17): the signal and the window get gradients; frames overlap (step 2)."""
    feeds = {"signal": arr(7, (2, 9, parts))}
    if window:
        feeds["window"] = arr(8, (frame_length or 4,))
    length = None if frame_length is None else np.array(frame_length, I64)

    def build(signal, window=None):
        return Ops("amanda/onnx/17").STFT(signal, np.array(2, I64), window, length, onesided=onesided)

    check(build, feeds)
