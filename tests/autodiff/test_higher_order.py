"""Second-order and forward-mode derivatives: ``grad`` of a gradient container, ``hvp`` and
``jvp`` of an MLP and a small CNN, each checked against central differences in float64 (of the
first gradient, or of the loss alone for the Hessian)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import amanda
from amanda import Input, model, ops
from amanda.autodiff import hvp, jvp
from amanda.errors import ArgumentError, PathError
from tests.autodiff.fd import numeric

RNG = np.random.default_rng(0)
W2 = RNG.standard_normal((5, 2))
CNN_B, CNN_W = RNG.standard_normal(3), RNG.standard_normal((12, 2))


def mlp() -> amanda.Container:
    """A two-layer MLP with tanh, relu and sigmoid whose first layer's weight is an input (so
    differences can move it), a squared loss and its pre-loss output ``out``; the input feeds
    two branches (a fan-out)."""
    x, w1 = Input("x", "float64", (4, 3)), Input("w1", "float64", (3, 5))
    w2 = ops.Constant(value=W2, name="w2")
    h = ops.Tanh(ops.MatMul(x, w1))
    h = ops.Add(ops.Sigmoid(h), ops.Relu(h))
    out = ops.Add(ops.MatMul(h, w2), ops.ReduceSum(ops.Mul(x, x), np.array([1], np.int64), keepdims=1))
    return model([x, w1], {"loss": ops.ReduceSum(ops.Mul(out, out), keepdims=0), "out": out}, name="net")


def cnn(bias: np.ndarray = CNN_B) -> amanda.Container:
    """Conv (kernel ``k`` an input, bias the constant ``b``), tanh, max and average pooling,
    sigmoid, a dense layer and a squared loss; ``out`` is the dense layer's output."""
    x, k = Input("x", "float64", (2, 1, 6, 6)), Input("k", "float64", (3, 1, 3, 3))
    b = ops.Constant(value=bias, name="b")
    h = ops.Tanh(ops.Conv(x, k, b, pads=[1, 1, 1, 1]))
    h = ops.MaxPool(h, kernel_shape=[2, 2], strides=[2, 2])[0]
    h = ops.Flatten(ops.AveragePool(ops.Sigmoid(h), kernel_shape=[2, 2], strides=[1, 1]))
    out = ops.MatMul(h, ops.Constant(value=CNN_W, name="w"))
    return model([x, k], {"loss": ops.ReduceSum(ops.Mul(out, out), keepdims=0), "out": out}, name="cnn")


MLP_FEEDS = {"x": RNG.standard_normal((4, 3)), "w1": RNG.standard_normal((3, 5))}
CNN_FEEDS = {"x": RNG.standard_normal((2, 1, 6, 6)), "k": RNG.standard_normal((3, 1, 3, 3))}
CASES = {"mlp": (mlp, MLP_FEEDS, "w1"), "cnn": (cnn, CNN_FEEDS, "k")}


@pytest.mark.parametrize("case", ["mlp", "cnn"])
@pytest.mark.parametrize("same", [False, True])
def test_second_order_gradients_match_differences_of_the_first(case: str, same: bool) -> None:
    """``grad(grad(net, loss, [a]), "grad/a", [b])`` is the gradient of ``sum(grad/a)`` with
    respect to ``b`` (a block of the Hessian applied to ones): central differences of the first
    gradient agree. With ``b == a`` the answer's gradient is named ``grad/grad/a``, since
    ``grad/a`` is its loss."""
    build, feeds, weight = CASES[case]
    first, second = ("x", "x") if same else ("x", weight)
    g1 = amanda.grad(build(), "loss", [first])
    g2 = amanda.grad(g1, f"grad/{first}", [second])
    label = f"grad/grad/{first}" if same else f"grad/{second}"
    assert g2.output_names == (f"grad/{first}", label)
    with amanda.Session(g2, threads=1) as s:
        (got,) = s.run([label], feeds)
    with amanda.Session(g1, threads=1) as s:
        expected = numeric(lambda values: float(np.sum(s.run([f"grad/{first}"], values)[0])), feeds, second)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert np.abs(expected).max() > 1e-2  # the second derivative is not trivially zero


def _along(f: Callable[[dict], float], tangents: dict, eps: float = 1e-4) -> Callable[[dict], float]:
    """The derivative of ``f`` along ``tangents`` by central differences (a function of the feeds)."""
    def directional(values: dict) -> float:
        up = {k: v + eps * tangents[k] if k in tangents else v for k, v in values.items()}
        down = {k: v - eps * tangents[k] if k in tangents else v for k, v in values.items()}
        return (f(up) - f(down)) / (2 * eps)
    return directional


@pytest.mark.parametrize("case", ["mlp", "cnn"])
def test_hessian_vector_products_match_second_differences_of_the_loss(case: str) -> None:
    """``hvp/a = sum_b H[a, b] @ tangent/b``: central differences (in ``a``) of central
    differences of the loss along the tangents agree, for two entries at once; the gradients it
    passes through match ``grad``'s."""
    build, feeds, weight = CASES[case]
    net = build()
    tangents = {k: RNG.standard_normal(v.shape) for k, v in feeds.items()}
    h = hvp(net, "loss", ["x", weight])
    assert h.type == "HessianVectorProduct"
    assert h.input_names == ("x", weight, "tangent/x", f"tangent/{weight}")
    assert h.output_names == ("loss", "grad/x", f"grad/{weight}", "hvp/x", f"hvp/{weight}")
    with amanda.Session(h, threads=1) as s:
        got = s.run(list(h.output_names), {**feeds, **{f"tangent/{k}": v for k, v in tangents.items()}})
    with amanda.Session(amanda.grad(net, "loss", ["x", weight]), threads=1) as s:
        first = s.run(["loss", "grad/x", f"grad/{weight}"], feeds)
    for a, b in zip(got[:3], first):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    with amanda.Session(net, threads=1) as s:
        along = _along(lambda values: float(s.run(["loss"], values)[0]), tangents)
        for name, value in zip(["x", weight], got[3:]):
            expected = numeric(along, feeds, name, eps=1e-4)
            np.testing.assert_allclose(value, expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())


def test_hessian_vector_product_with_respect_to_a_weight_path() -> None:
    """An op path in ``wrt`` (the CNN's constant bias ``b``): differences rebuild the model with
    the moved bias."""
    tangent = RNG.standard_normal(3)
    h = hvp(cnn(), "loss", ["b"])
    with amanda.Session(h, threads=1) as s:
        (got,) = s.run(["hvp/b"], {**CNN_FEEDS, "tangent/b": tangent})

    def loss(values: dict) -> float:
        with amanda.Session(cnn(values["b"]), threads=1) as s:
            return float(s.run(["loss"], CNN_FEEDS)[0])

    expected = numeric(_along(loss, {"b": tangent}), {"b": CNN_B}, "b", eps=1e-4)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)
    assert np.abs(expected).max() > 1e-2


@pytest.mark.parametrize("case", ["mlp", "cnn"])
def test_jacobian_vector_products_match_differences_along_the_tangent(case: str) -> None:
    """``jvp/out`` (forward mode by the double-vjp trick) of a matrix output with respect to
    two entries is the derivative of ``out`` along the tangents, by central differences."""
    build, feeds, weight = CASES[case]
    net = build()
    tangents = {k: RNG.standard_normal(v.shape) for k, v in feeds.items()}
    j = jvp(net, "out", ["x", weight])
    assert j.type == "JacobianVectorProduct"
    assert j.output_names == ("out", "jvp/out")
    with amanda.Session(j, threads=1) as s:
        out, got = s.run(["out", "jvp/out"], {**feeds, **{f"tangent/{k}": v for k, v in tangents.items()}})
    eps = 1e-6
    with amanda.Session(net, threads=1) as s:
        plain = s.run(["out"], feeds)[0]
        up = s.run(["out"], {k: v + eps * tangents[k] for k, v in feeds.items()})[0]
        down = s.run(["out"], {k: v - eps * tangents[k] for k, v in feeds.items()})[0]
    np.testing.assert_array_equal(out, plain)
    expected = (up - down) / (2 * eps)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


def test_hvp_and_jvp_refuse_bad_arguments() -> None:
    """A loss that is not an output, and an input already named like a tangent input."""
    with pytest.raises(PathError) as info:
        hvp(mlp(), "los", ["x"])
    assert info.value.path == "net:los"
    with pytest.raises(PathError):
        jvp(mlp(), "output", ["x"])
    t = Input("tangent/x", "float64", (2,))
    x = Input("x", "float64", (2,))
    clash = model([x, t], {"loss": ops.ReduceSum(ops.Mul(x, t), keepdims=0)}, name="clash")
    with pytest.raises(ArgumentError) as info:
        hvp(clash, "loss", ["x"])
    assert "tangent/x" in info.value.path
