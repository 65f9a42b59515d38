"""Random ops: deterministic given a seed, fresh without one, and drawn from the right
distribution (checked with fixed seeds, so the statistics cannot flake)."""

from __future__ import annotations

import numpy as np
import pytest

import amanda

NS = "amanda/onnx/22"


def run(op_type: str, attrs: dict, feeds: dict | None = None) -> np.ndarray:
    inputs = list(feeds or {})
    op = amanda.op(op_type, "r", inputs, ["y"], attrs)
    g = amanda.Container("G", "g", inputs=inputs, outputs=["y"], children=[op],
                         edges=[*((f"g:{i}", f"r:{i}") for i in inputs), ("r:y", "g:y")],
                         attrs={"namespace": NS})
    with amanda.Session(g, threads=1) as s:
        return s.run(["y"], feeds or {})[0]


def test_seeded_ops_repeat_and_unseeded_ops_do_not() -> None:
    """The same seed gives the same values on every run; no seed gives new values."""
    a = run("RandomNormal", {"shape": [50], "seed": 3.0})
    b = run("RandomNormal", {"shape": [50], "seed": 3.0})
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, run("RandomNormal", {"shape": [50], "seed": 4.0}))
    assert not np.array_equal(run("RandomUniform", {"shape": [50]}), run("RandomUniform", {"shape": [50]}))


def test_normal_and_uniform_have_their_moments_and_ranges() -> None:
    """RandomNormal has the asked mean and scale; RandomUniform stays in [low, high)."""
    x = run("RandomNormal", {"shape": [200_000], "mean": 2.0, "scale": 3.0, "seed": 1.0})
    assert x.dtype == np.float32
    assert abs(x.mean() - 2.0) < 0.03 and abs(x.std() - 3.0) < 0.03
    u = run("RandomUniform", {"shape": [100_000], "low": -1.0, "high": 5.0, "seed": 2.0, "dtype": 11})
    assert u.dtype == np.float64 and u.min() >= -1.0 and u.max() < 5.0
    assert abs(u.mean() - 2.0) < 0.03


def test_like_forms_take_shape_and_dtype_from_their_input() -> None:
    """RandomNormalLike and RandomUniformLike copy the input's shape and (default) dtype."""
    x = np.zeros((3, 4), np.float64)
    assert run("RandomNormalLike", {"seed": 0.0}, {"x": x}).shape == (3, 4)
    y = run("RandomUniformLike", {"seed": 0.0}, {"x": x})
    assert y.dtype == np.float64 and y.shape == (3, 4)


def test_bernoulli_frequencies_follow_p() -> None:
    """Bernoulli gives 0/1 values whose mean per position approaches p."""
    p = np.tile(np.array([0.0, 0.25, 0.9, 1.0], np.float32), (50_000, 1))
    y = run("Bernoulli", {"seed": 5.0}, {"p": p})
    assert set(np.unique(y)) <= {0.0, 1.0} and y.dtype == np.float32
    np.testing.assert_allclose(y.mean(axis=0), [0.0, 0.25, 0.9, 1.0], atol=0.01)


def test_multinomial_samples_follow_the_softmax() -> None:
    """Multinomial draws class indices with the softmax probabilities of each row."""
    logits = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]], np.float32) + 1e-12)
    y = run("Multinomial", {"sample_size": 40_000, "seed": 7.0}, {"x": logits})
    assert y.shape == (2, 40_000) and y.dtype == np.int32
    freq = np.stack([np.bincount(row, minlength=3) / row.size for row in y])
    np.testing.assert_allclose(freq, [[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]], atol=0.01)


@pytest.mark.parametrize("op_type", ["RandomNormal", "RandomUniform"])
def test_random_ops_run_again_in_one_session(op_type: str) -> None:
    """An unseeded random op is not folded at plan time: two runs of one plan differ."""
    op = amanda.op(op_type, "r", [], ["y"], {"shape": [8]})
    g = amanda.Container("G", "g", outputs=["y"], children=[op], edges=[("r:y", "g:y")],
                         attrs={"namespace": NS})
    with amanda.Session(g, threads=1) as s:
        assert not np.array_equal(s.run(["y"])[0], s.run(["y"])[0])
