"""The elementwise rules of ``rules_unary`` (activations, trigonometric and hyperbolic
functions, Clip, PRelu) and the variadic ones (Sum, Mean, Max, Min) agree with central finite
differences in float64 over several attribute settings; an elementwise op without a derivative
is an error naming it, never another op's derivative."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import amanda
from amanda import Input, ops
from amanda.autodiff import Node
from amanda.autodiff.rules_unary import unary_vjp
from amanda.build import Ops
from tests.autodiff.fd import check

SETTINGS = settings(max_examples=6, deadline=None)
shapes = st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple)


def away(x: np.ndarray, *kinks: float) -> np.ndarray:
    """``x`` moved off the points where the op has a kink (differences straddling one are wrong)."""
    for k in kinks:
        x = np.where(np.abs(x - k) < 1e-2, x + 0.05, x)
    return x


def sample(seed: int, shape: tuple, low: float = -4.0, high: float = 4.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape)


# op type -> (opset, attribute settings, input range, kinks)
CASES = {
    "Reciprocal": (17, [{}], (0.5, 3.0), ()),
    "Sin": (17, [{}], (-4, 4), ()), "Cos": (17, [{}], (-4, 4), ()), "Tan": (17, [{}], (-1.2, 1.2), ()),
    "Asin": (17, [{}], (-0.9, 0.9), ()), "Acos": (17, [{}], (-0.9, 0.9), ()), "Atan": (17, [{}], (-4, 4), ()),
    "Sinh": (17, [{}], (-3, 3), ()), "Cosh": (17, [{}], (-3, 3), ()), "Asinh": (17, [{}], (-4, 4), ()),
    "Acosh": (17, [{}], (1.2, 4), ()), "Atanh": (17, [{}], (-0.9, 0.9), ()),
    "Softplus": (17, [{}], (-4, 4), ()), "Softsign": (17, [{}], (-4, 4), ()),
    "Selu": (17, [{}, {"alpha": 2.0, "gamma": 0.5}], (-3, 3), (0,)),
    "ThresholdedRelu": (17, [{}, {"alpha": 0.3}, {"alpha": -1.0}], (-3, 3), (1.0, 0.3, -1.0)),
    "Shrink": (17, [{}, {"lambd": 1.0, "bias": 0.3}], (-3, 3), (0.5, -0.5, 1.0, -1.0)),
    "HardSigmoid": (17, [{}, {"alpha": 0.5, "beta": 0.1}, {"alpha": 1.0, "beta": -0.3}], (-5, 5),
                    (-2.5, 2.5, -0.2, 1.8, 0.3, 1.3)),
    "HardSwish": (17, [{}], (-5, 5), (-3, 3)),
    "Mish": (18, [{}], (-4, 4), ()),
    "Swish": (24, [{}, {"alpha": 0.7}], (-4, 4), ()),
    "LeakyRelu": (17, [{"alpha": 0.3}], (-3, 3), (0,)),
    "Elu": (17, [{"alpha": 0.4}], (-3, 3), (0,)),
    **{k: (17, [{}], (-3, 3), (-3, -2.5, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 2.5, 3))
       for k in ("Sign", "Floor", "Ceil", "Round")},
}


@pytest.mark.parametrize("op_type", sorted(CASES))
def test_unary_rules_match_differences(op_type: str) -> None:
    """Each elementwise op of one input, with each of its attribute settings, on inputs spread
    over all its pieces (HardSigmoid's and HardSwish's flat and sloped ones included)."""
    opset, settings_, (low, high), kinks = CASES[op_type]
    builder = getattr(Ops(f"amanda/onnx/{opset}"), op_type)
    for i, attrs in enumerate(settings_):
        x = away(sample(i, (4, 5), low, high), *kinks)
        check(lambda x, attrs=attrs: builder(x, **attrs), {"x": x})


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_celu_slopes_in_float32(alpha: float) -> None:
    """Celu (float32 only in ONNX, so no float64 differences): its gradient is 1 above 0 and
    exp(x / alpha) below (numpy oracle)."""
    xs = np.array([-4.0, -1.5, -0.3, 0.2, 1.0, 3.0], np.float32)
    x = Input("x", "float32", (6,))
    net = amanda.model([x], {"loss": ops.ReduceSum(ops.Celu(x, alpha=alpha), keepdims=0)}, name="net")
    with amanda.Session(amanda.grad(net, "loss", ["x"]), threads=1) as s:
        (gx,) = s.run(["grad/x"], {"x": xs})
    np.testing.assert_allclose(gx, np.where(xs > 0, 1.0, np.exp(xs / alpha)), rtol=1e-6)


def test_hard_swish_slopes_on_each_piece() -> None:
    """HardSwish's gradient is 0 below -3, 1 above 3 and x/3 + 1/2 between (numpy oracle)."""
    xs = np.array([-5.0, -3.5, -2.0, 0.0, 1.5, 2.9, 3.5, 7.0])
    x = Input("x", "float64", (8,))
    net = amanda.model([x], {"loss": ops.ReduceSum(ops.HardSwish(x), keepdims=0)}, name="net")
    with amanda.Session(amanda.grad(net, "loss", ["x"]), threads=1) as s:
        (gx,) = s.run(["grad/x"], {"x": xs})
    np.testing.assert_allclose(gx, np.where(xs < -3, 0.0, np.where(xs > 3, 1.0, xs / 3 + 0.5)))


@pytest.mark.parametrize("bounds", ["both", "low", "high", "crossed"])
def test_clip(bounds: str) -> None:
    """Clip: the input's gradient where it was not clipped, each bound's where it clipped;
    with min > max everything is max."""
    low, high = {"both": (-0.5, 0.7), "low": (-0.5, None), "high": (None, 0.7), "crossed": (0.5, -0.2)}[bounds]
    feeds = {"x": away(sample(0, (3, 4), -2, 2), -0.5, 0.7, 0.5, -0.2)}
    if low is not None:
        feeds["lo"] = np.array(low)
    if high is not None:
        feeds["hi"] = np.array(high)
    check(lambda x, lo=None, hi=None: ops.Clip(x, lo, hi), feeds)


def test_clip_before_opset_11_reads_its_bounds_from_attributes() -> None:
    """An opset-10 Clip (bounds as attributes) differentiates in its input."""
    old = Ops("amanda/onnx/10")
    check(lambda x: old.Clip(x, min=-0.5, max=0.7), {"x": away(sample(1, (3, 4), -2, 2), -0.5, 0.7)})


@pytest.mark.parametrize("slope_shape", [(3, 1, 1), (1,), (2, 3, 2, 2)])
def test_prelu(slope_shape: tuple) -> None:
    """PRelu: input and slope gradients, the slope broadcast per channel, shared, or full."""
    feeds = {"x": away(sample(0, (2, 3, 2, 2), -2, 2), 0), "slope": sample(1, slope_shape, -1, 1)}
    check(lambda x, slope: ops.PRelu(x, slope), feeds)


@SETTINGS
@given(st.integers(1, 3), st.sampled_from(["Sum", "Mean", "Max", "Min"]), st.data())
def test_variadic_ops(count: int, op_type: str, data: st.DataObject) -> None:
    """Sum, Mean, Max and Min of one to three inputs broadcast against each other."""
    big = data.draw(shapes)
    feeds = {}
    for i in range(count):
        tail = list(big[data.draw(st.integers(0, len(big) - 1)):])
        shape = tuple(1 if data.draw(st.booleans()) else d for d in tail)
        feeds[f"x{i}"] = sample(data.draw(st.integers(0, 99)), shape)
    check(lambda **xs: getattr(ops, op_type)(*xs.values()), feeds)


def test_max_shares_the_gradient_between_ties() -> None:
    """Max of two equal inputs gives each half the gradient (numpy oracle)."""
    a, b = Input("a", "float64", (3,)), Input("b", "float64", (3,))
    net = amanda.model([a, b], {"loss": ops.ReduceSum(ops.Max(a, b), keepdims=0)}, name="net")
    with amanda.Session(amanda.grad(net, "loss", ["a", "b"]), threads=1) as s:
        ga, gb = s.run(["grad/a", "grad/b"], {"a": np.array([1.0, 2.0, 3.0]), "b": np.array([1.0, 0.0, 4.0])})
    np.testing.assert_array_equal(ga, [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(gb, [0.5, 0.0, 1.0])


def test_an_elementwise_op_without_a_derivative_is_named() -> None:
    """The elementwise rule given an op type it has no derivative for raises a SchemaError naming
    the op's path and type (it used to fall through to Gelu's derivative)."""
    x = Input("x", "float64", (3,))
    y = ops.Hardmax(x)
    node = Node(("net", "hm"), amanda.op("Hardmax", "hm"), [x], [y], [None], [True])
    with pytest.raises(amanda.SchemaError, match=r"`net/hm` \(Hardmax\)"):
        unary_vjp(node)
