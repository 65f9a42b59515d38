"""Central finite differences in float64: the oracle every gradient rule is checked against."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

import amanda
from amanda import Input, model, ops


def numeric(f: Callable[[dict], float], feeds: dict, name: str, eps: float = 1e-6) -> np.ndarray:
    """d f / d feeds[name] by central differences, one element at a time."""
    base = feeds[name]
    out = np.zeros(base.shape, np.float64)
    for index in np.ndindex(base.shape):
        for sign in (1, -1):
            moved = base.copy()
            moved[index] += sign * eps
            out[index] += sign * f({**feeds, name: moved})
    return out / (2 * eps)


def check(build: Callable[..., amanda.Container | object], feeds: Mapping[str, np.ndarray],
          wrt: list[str] | None = None, seed: int = 0, rtol: float = 1e-5, atol: float = 1e-7, eps: float = 1e-6) -> float:
    """Build ``build(**inputs)``, take ``sum(out * r)`` for a random ``r`` as the loss, and check
    ``amanda.grad`` of it against central differences; the largest relative error found."""
    inputs = {k: Input(k, str(v.dtype), v.shape) for k, v in feeds.items()}
    out = build(**inputs)
    r = np.random.default_rng(seed).standard_normal(tuple(out.type.shape))
    loss = ops.ReduceSum(ops.Mul(out, r), keepdims=0)
    net = model(list(inputs.values()), {"loss": loss}, name="net")
    wrt = wrt or [k for k, v in feeds.items() if v.dtype == np.float64]
    g = amanda.grad(net, "loss", wrt)
    feeds = dict(feeds)
    with amanda.Session(g, threads=1) as s:
        got = s.run([f"grad/{w}" for w in wrt], feeds)
    worst = 0.0
    with amanda.Session(net, threads=1) as s:
        def f(values: dict) -> float:
            return float(s.run(["loss"], values)[0])

        for w, value in zip(wrt, got):
            expected = numeric(f, feeds, w, eps)
            assert value.shape == expected.shape, (w, value.shape, expected.shape)
            np.testing.assert_allclose(value, expected, rtol=rtol, atol=atol, err_msg=w)
            scale = np.maximum(np.abs(expected), 1e-3)
            worst = max(worst, float(np.max(np.abs(value - expected) / scale, initial=0.0)))
    return worst
