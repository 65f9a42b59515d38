"""ConvTranspose, InstanceNormalization and Resize rules agree with central finite differences
in float64 over their attributes (strides, pads, groups, dilations, output_padding,
output_shape and auto_pad; resize modes, coordinate modes, scales and sizes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amanda import ops
from tests.autodiff.fd import check


def arr(seed: int, shape: tuple) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


@settings(max_examples=10, deadline=None)
@given(st.sampled_from([1, 2]), st.sampled_from([1, 2, 3]), st.sampled_from([0, 1]), st.sampled_from([1, 2]),
       st.sampled_from([0, 1]), st.booleans(), st.integers(0, 99))
def test_conv_transpose(group, stride, pad, dilation, out_pad, bias, seed):
    """ConvTranspose with groups, strides, pads, dilations, output_padding and bias: input,
    weight and bias gradients."""
    out_pad = min(out_pad, max(stride, dilation) - 1)
    c, m = 2 * group, 3 * group
    feeds = {"x": arr(seed, (2, c, 3, 4)), "w": arr(seed + 1, (c, m // group, 2, 3))}
    if bias:
        feeds["b"] = arr(seed + 2, (m,))
    attrs = dict(group=group, strides=[stride, stride], pads=[pad, 0, 0, pad], dilations=[dilation, 1],
                 output_padding=[out_pad, 0])
    check(lambda x, w, b=None: ops.ConvTranspose(x, w, b, **attrs), feeds)


@pytest.mark.parametrize("attrs", [{"output_shape": [7, 9], "strides": [2, 2]},
                                   {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
                                   {"auto_pad": "SAME_LOWER", "strides": [2, 1]},
                                   {"auto_pad": "VALID", "strides": [1, 2]}])
def test_conv_transpose_derived_pads(attrs):
    """ConvTranspose whose pads come from ``output_shape`` or auto_pad."""
    feeds = {"x": arr(0, (1, 2, 3, 4)), "w": arr(1, (2, 2, 3, 2))}
    check(lambda x, w: ops.ConvTranspose(x, w, **attrs), feeds)


def test_conv_transpose_1d():
    """A 1-D ConvTranspose differentiates too."""
    check(lambda x, w: ops.ConvTranspose(x, w, strides=[3], pads=[1, 2]), {"x": arr(0, (2, 2, 5)), "w": arr(1, (2, 1, 4))})


@pytest.mark.parametrize(("shape", "epsilon"), [((2, 3, 4), 1e-5), ((2, 2, 3, 3), 1e-2), ((1, 3, 2, 2, 2), 0.5)])
def test_instance_normalization(shape, epsilon):
    """InstanceNormalization over 1-D to 3-D spatial axes: input, scale and bias gradients."""
    feeds = {"x": arr(0, shape), "s": arr(1, (shape[1],)), "b": arr(2, (shape[1],))}
    check(lambda x, s, b: ops.InstanceNormalization(x, s, b, epsilon=epsilon), feeds, rtol=1e-4, atol=1e-6)


RESIZE = [
    ({"mode": "nearest"}, [1, 1, 2, 1.5], None),
    ({"mode": "nearest", "nearest_mode": "floor", "coordinate_transformation_mode": "asymmetric"}, [1, 1, 0.6, 2], None),
    ({"mode": "linear"}, [1, 1, 2, 1.5], None),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, None, [2, 3, 5, 3]),
    ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel", "antialias": 1}, [1, 1, 0.5, 0.75], None),
    ({"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, [1, 1, 1.5, 2], None),
    ({"mode": "linear", "axes": [3, 2]}, None, [7, 2]),
]


@pytest.mark.parametrize(("attrs", "scales", "sizes"), RESIZE)
def test_resize(attrs, scales, sizes):
    """Resize in nearest, linear (antialiased too) and cubic modes, under several coordinate
    transformations, by scales or sizes, on all axes or some."""
    scales_in = None if scales is None else np.array(scales, np.float32)
    sizes_in = None if sizes is None else np.array(sizes, np.int64)
    from amanda.build import Ops

    resize = Ops("amanda/onnx/18").Resize if {"antialias", "axes"} & set(attrs) else ops.Resize  # opset 18 attributes
    check(lambda x: resize(x, None, scales_in, sizes_in, **attrs), {"x": arr(0, (2, 3, 4, 5))})


def test_resize_crop_and_resize_with_extrapolation():
    """tf_crop_and_resize with a roi reaching outside the input: the extrapolated positions get
    no gradient, the rest do."""
    roi = np.array([0, 0, -0.2, 0.1, 1, 1, 1.1, 0.8], np.float32)
    check(lambda x: ops.Resize(x, roi, np.array([1, 1, 1.5, 1.2], np.float32), mode="linear",
                               coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=3.0),
          {"x": arr(0, (1, 2, 4, 5))})


def test_resize_at_opset_10_and_upsample():
    """Resize-10 and Upsample-9 (asymmetric coordinates, scales input) differentiate too."""
    from amanda.build import Ops

    for opset, kind in ((10, "Resize"), (9, "Upsample")):
        for mode in ("nearest", "linear"):
            build = getattr(Ops(f"amanda/onnx/{opset}"), kind)
            check(lambda x, build=build, mode=mode: build(x, np.array([1, 1, 2, 1.5], np.float32), mode=mode),
                  {"x": arr(1, (1, 2, 3, 4))})


def test_resize_in_an_unknown_mode_is_named():
    """A Resize in a mode it is not differentiable for is a SchemaError naming the op and mode."""
    import amanda
    from amanda import Input, model

    x = Input("x", "float64", (1, 1, 2, 2))
    y = ops.Resize(x, None, np.array([1, 1, 2, 2], np.float32), mode="area", name="up")
    net = model([x], {"loss": ops.ReduceSum(y, keepdims=0)}, name="net", )
    with pytest.raises(amanda.SchemaError, match=r"`up` \(Resize\).*'area'"):
        amanda.grad(net, "loss", ["x"])


@pytest.mark.parametrize(("p", "axis"), [(1, -1), (2, -1), (2, 0), (1, 1)])
def test_lp_normalization(p, axis):
    """LpNormalization with p 1 and 2 along several axes."""
    check(lambda x: ops.LpNormalization(x, p=p, axis=axis), {"x": arr(0, (3, 4, 2)) + 0.1})


def test_lp_normalization_of_a_zero_row_gives_a_zero_gradient():
    """Where the norm is zero (the output is zeros, as the kernel gives), the gradient is zero too."""
    import amanda
    from amanda import Input, model

    x = Input("x", "float64", (2, 3))
    net = model([x], {"loss": ops.ReduceSum(ops.LpNormalization(x), keepdims=0)}, name="net")
    with amanda.Session(amanda.grad(net, "loss", ["x"]), threads=1) as s:
        (gx,) = s.run(["grad/x"], {"x": np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 2.0]])})
    np.testing.assert_array_equal(gx[0], 0.0)
    assert np.isfinite(gx).all()


@pytest.mark.parametrize("axes", [None, [0, 2, 3], [1], [2, 3]])
def test_mean_variance_normalization(axes):
    """MeanVarianceNormalization over its default axes and others."""
    kw = {} if axes is None else {"axes": axes}
    check(lambda x: ops.MeanVarianceNormalization(x, **kw), {"x": arr(0, (2, 3, 2, 3))}, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(("axis", "scale_shape"), [(-1, (4,)), (1, (3, 4)), (1, (1, 4))])
def test_rms_normalization(axis, scale_shape):
    """RMSNormalization (opset 23) from several axes on, with a full or broadcast scale."""
    from amanda.build import Ops

    rms = Ops("amanda/onnx/23").RMSNormalization
    check(lambda x, s: rms(x, s, axis=axis), {"x": arr(0, (2, 3, 4)), "s": arr(1, scale_shape)}, rtol=1e-4, atol=1e-6)
