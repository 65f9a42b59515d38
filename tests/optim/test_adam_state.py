"""Adam's fused step on a scalar (0-d) weight, where numpy's operations give scalars that
cannot be written into: it trains as the formula says."""

from __future__ import annotations

import numpy as np

import amanda
from amanda import Input, model, ops
from amanda.optim import Adam, freeze, minimize


def test_a_scalar_weight_trains_with_adam_as_the_formula_says() -> None:
    """``loss = (s * x - 3)^2`` summed, ``s`` a 0-d weight: two Adam steps against numpy."""
    x = Input("x", "float32", (4,))
    s = ops.Constant(value=np.array(1.0, np.float32), name="s")
    err = ops.Sub(ops.Mul(x, s), np.float32(3))
    net = model([x], {"loss": ops.ReduceSum(ops.Mul(err, err), keepdims=0)}, name="scalar")
    trainer = minimize(net, "loss", Adam(lr=0.1), weights=["s"])
    data = np.array([1.0, 2.0, -1.0, 0.5], np.float32)
    w, m, v = 1.0, 0.0, 0.0
    for t in (1, 2):
        g = float(np.sum(2 * (w * data - 3) * data))
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        w -= 0.1 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    with amanda.Session(trainer) as session:
        for _ in range(2):
            session.run(["train"], {"x": data}, phase="train")
        got = freeze(trainer, session).child("s").attrs["value"]
    assert np.shape(got) == ()
    np.testing.assert_allclose(float(got), w, rtol=1e-5)
