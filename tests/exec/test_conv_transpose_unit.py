"""ConvTranspose at unit strides in one group runs as a Conv of the flipped weights: the same
values as the scatter of each input position's weighted kernel, pads of every sign, dilations,
1-D to 3-D, a bias."""

import itertools

import numpy as np
import pytest

from amanda.opset.onnx.conv import conv_transpose_kernel as conv_transpose

RNG = np.random.default_rng(5)


def _scatter(x, w, b, pads, dilation):
    """Each input position adds its value times the kernel into the output (float64), then
    the pads are cut (a negative pad adds zeros)."""
    nd = x.ndim - 2
    size, k = x.shape[2], w.shape[2]
    full = size + (k - 1) * dilation
    out = np.zeros((x.shape[0], w.shape[1], *[full] * nd))
    for idx in itertools.product(range(size), repeat=nd):
        for kk in itertools.product(range(k), repeat=nd):
            at = tuple(i + q * dilation for i, q in zip(idx, kk))
            out[(slice(None), slice(None), *at)] += x[(slice(None), slice(None), *idx)].astype(np.float64) @ \
                w[(slice(None), slice(None), *kk)].astype(np.float64)
    margin = max(0, -min(pads))
    grown = np.zeros(out.shape[:2] + (full + 2 * margin,) * nd)
    grown[(slice(None), slice(None), *(slice(margin, margin + full),) * nd)] = out
    cut = tuple(slice(margin + pads[0], margin + full - pads[1]) for _ in range(nd))
    return grown[(slice(None), slice(None), *cut)] + b.reshape(-1, *[1] * nd)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("pads", [(0, 0), (1, 1), (2, 0), (3, 1), (-1, 0)])
@pytest.mark.parametrize("dilation", [1, 2])
def test_unit_stride_conv_transpose_matches_the_scatter(nd, pads, dilation):
    x = RNG.standard_normal((2, 3, *[4] * nd)).astype(np.float32)
    w = RNG.standard_normal((3, 5, *[3] * nd)).astype(np.float32)
    b = RNG.standard_normal(5).astype(np.float32)
    attrs = {"pads": [pads[0]] * nd + [pads[1]] * nd, "dilations": [dilation] * nd}
    got = conv_transpose(attrs, x, w, b)[0]
    want = _scatter(x, w, b, pads, dilation)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_strided_and_grouped_keep_the_column_scatter():
    """Strides or groups take the other path; both paths agree where they meet (stride 1)."""
    x = RNG.standard_normal((2, 4, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    unit = conv_transpose({"pads": [1, 1, 1, 1]}, x, w)[0]
    # two groups of the same weights: each group's result is a unit-stride transpose of its half
    grouped = conv_transpose({"pads": [1, 1, 1, 1], "group": 2}, x, np.concatenate([w[:2], w[2:]]))[0]
    halves = [conv_transpose({"pads": [1, 1, 1, 1]}, x[:, 2 * i:2 * i + 2], w[2 * i:2 * i + 2])[0] for i in range(2)]
    np.testing.assert_allclose(grouped, np.concatenate(halves, axis=1), rtol=1e-5, atol=1e-5)
    assert unit.shape == (2, 3, 5, 5)
