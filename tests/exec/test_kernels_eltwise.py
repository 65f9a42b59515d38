"""The float32 elementwise kernels (rational erf, fused activations) against float64 references and onnxruntime."""

from __future__ import annotations

import math

import numpy as np
import pytest

from amanda.exec.kernels.math_util import erf32


def _erf64(x: np.ndarray) -> np.ndarray:
    return np.array([math.erf(float(v)) for v in x])


def test_erf32_is_within_half_a_micro_of_float64_erf_on_a_dense_grid() -> None:
    """The rational float32 erf stays within 5e-7 of float64 erf over [-6, 6] (every 1e-4) and in the tails."""
    x = np.concatenate([np.linspace(-6, 6, 120_001), [1e-30, -1e-30, 1e-40, 30.0, -30.0]]).astype(np.float32)
    y = erf32(x)
    assert y.dtype == np.float32
    assert np.abs(y.astype(np.float64) - _erf64(x)).max() < 5e-7


def test_erf32_keeps_odd_symmetry_signs_and_special_values() -> None:
    """erf32 is odd, saturates to ±1 at ±inf, keeps nan and the sign of zero, and is relative-accurate near 0."""
    x = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-20, -1e-20])
    y = erf32(x)
    assert y[0] == 0 and not np.signbit(y[0]) and y[1] == 0 and np.signbit(y[1])
    assert y[2] == 1 and y[3] == -1 and np.isnan(y[4])
    np.testing.assert_allclose(y[5:], [2 / math.sqrt(math.pi) * 1e-20, -2 / math.sqrt(math.pi) * 1e-20], rtol=1e-6)
    grid = np.linspace(0, 5, 5001, dtype=np.float32)
    np.testing.assert_array_equal(erf32(-grid), -erf32(grid))


def test_erf32_does_not_modify_its_input() -> None:
    """erf32 writes into new buffers only."""
    x = np.linspace(-8, 8, 101, dtype=np.float32)
    kept = x.copy()
    erf32(x)
    np.testing.assert_array_equal(x, kept)


@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 4)])
def test_erf32_of_a_strided_view_matches_the_contiguous_copy(shape: tuple) -> None:
    """A transposed (non-contiguous) input gives the same values as its contiguous copy."""
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32).T
    np.testing.assert_array_equal(erf32(x), erf32(np.ascontiguousarray(x)))
