"""Second-order gradients: ``grad`` of a gradient container (whose fan-out Sum, shape queries
and comparisons now have rules) agrees with central differences of the first gradient."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import Input, model, ops
from tests.autodiff.fd import numeric

RNG = np.random.default_rng(0)


def mlp() -> amanda.Container:
    """A two-layer MLP with tanh, relu and sigmoid whose first layer's weight is an input (so
    differences can move it), and a squared loss; the input feeds two branches (a fan-out)."""
    x, w1 = Input("x", "float64", (4, 3)), Input("w1", "float64", (3, 5))
    w2 = ops.Constant(value=RNG.standard_normal((5, 2)), name="w2")
    h = ops.Tanh(ops.MatMul(x, w1))
    h = ops.Add(ops.Sigmoid(h), ops.Relu(h))
    out = ops.Add(ops.MatMul(h, w2), ops.ReduceSum(ops.Mul(x, x), np.array([1], np.int64), keepdims=1))
    return model([x, w1], {"loss": ops.ReduceSum(ops.Mul(out, out), keepdims=0)}, name="net")


@pytest.mark.parametrize(("first", "second"), [("x", "w1"), ("w1", "x")])
def test_second_order_gradients_of_an_mlp_match_differences_of_the_first(first: str, second: str) -> None:
    """``grad(grad(net, loss, [first]), "grad/first", [second])`` is the gradient of
    ``sum(grad/first)`` with respect to ``second`` (a block of the Hessian applied to ones):
    central differences of the first gradient agree."""
    net = mlp()
    feeds = {"x": RNG.standard_normal((4, 3)), "w1": RNG.standard_normal((3, 5))}
    g1 = amanda.grad(net, "loss", [first])
    g2 = amanda.grad(g1, f"grad/{first}", [second])
    with amanda.Session(g2, threads=1) as s:
        (got,) = s.run([f"grad/{second}"], feeds)
    with amanda.Session(g1, threads=1) as s:
        expected = numeric(lambda values: float(np.sum(s.run([f"grad/{first}"], values)[0])), feeds, second)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert np.abs(expected).max() > 1e-2  # the second derivative is not trivially zero
