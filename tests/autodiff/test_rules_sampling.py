"""GridSample: gradients of the input and of the grid agree with central differences in
float64, 2-D and 3-D, linear and nearest, zeros and border padding, with and without
align_corners; cubic mode is refused naming the op."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda.build import Ops
from tests.autodiff.fd import check


def arr(seed: int, shape: tuple) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize(("mode", "padding", "align"), [
    ("linear", "zeros", 0), ("linear", "zeros", 1), ("linear", "border", 0), ("linear", "border", 1),
])
def test_bilinear(mode, padding, align):
    """Bilinear sampling: X and the grid (points inside and outside the input) get gradients."""
    grid = np.random.default_rng(1).uniform(-1.3, 1.3, (2, 3, 2, 2))
    check(lambda x, g: Ops("amanda/onnx/20").GridSample(x, g, mode=mode, padding_mode=padding, align_corners=align),
          {"x": arr(0, (2, 2, 3, 4)), "g": grid})


def test_trilinear():
    """Three spatial axes (opset 20)."""
    grid = np.random.default_rng(2).uniform(-1.1, 1.1, (1, 2, 2, 1, 3))
    check(lambda x, g: Ops("amanda/onnx/20").GridSample(x, g), {"x": arr(3, (1, 1, 2, 3, 2)), "g": grid})


def test_nearest():
    """Nearest: X gets the gradient of the points that read it; the grid none."""
    grid = np.random.default_rng(4).uniform(-0.9, 0.9, (1, 2, 3, 2))
    check(lambda x: Ops("amanda/onnx/20").GridSample(x, grid, mode="nearest"), {"x": arr(5, (1, 2, 3, 3))})


def test_cubic_is_refused():
    """Cubic mode is a SchemaError naming the op."""
    x = amanda.Input("x", "float64", (1, 1, 3, 3))
    grid = amanda.ops.Constant(value=np.zeros((1, 2, 2, 2)))
    y = Ops("amanda/onnx/20").GridSample(x, grid, mode="cubic", name="cubic")
    net = amanda.model([x], {"loss": amanda.ops.ReduceSum(y, keepdims=0)})
    with pytest.raises(amanda.SchemaError, match="cubic"):
        amanda.grad(net, "loss", ["x"])
