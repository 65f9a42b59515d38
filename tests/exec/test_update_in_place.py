"""Adam's updates write the session's stored weight and moments in place when nothing else refers
to them, give the same bits as the path that makes new arrays, and never change a value a
caller holds."""

import numpy as np
import pytest

import amanda
from amanda import Input, layers, ops
from amanda.optim import SGD, Adam, AdamW, CosineDecay, Scheduled, minimize

RNG = np.random.default_rng(3)


def _linear():
    """loss = sum(x @ w): the gradient of w is x^T @ ones, whatever w is."""
    x = Input("x", "float32", (4, 3))
    w0 = RNG.standard_normal((3, 2)).astype(np.float32)
    net = amanda.model([x], {"loss": ops.ReduceSum(ops.MatMul(x, ops.Constant(value=w0, name="w")), keepdims=0)},
                       name="net")
    return net, {"x": RNG.standard_normal((4, 3)).astype(np.float32)}, w0


def _conv_net():
    x = Input("x", "float32", ("batch", 2, 6, 6))
    h = layers.relu()(layers.BatchNorm(16, name="bn")(layers.Conv(2, 16, 3, padding="same", name="conv")(x)))
    h = layers.Conv(16, 8, 3, padding="same", name="conv2")(h)  # 16x3x3 columns: a relaid (packed) weight
    loss = ops.ReduceMean(ops.Mul(h, h), keepdims=0)
    net = layers.seeded(amanda.model([x], {"loss": loss}, name="net"), 0)
    return net, {"x": RNG.standard_normal((3, 2, 6, 6)).astype(np.float32)}


def _steps(session, feeds, n, hold=None):
    losses = []
    for _ in range(n):
        if hold is not None:
            hold.append(dict(session.state))
        losses.append(session.run(["loss", "train"], feeds, phase="train")[0].tobytes())
    return losses


def test_adam_writes_the_stored_arrays_and_matches_numpys_adam():
    net, feeds, w0 = _linear()
    session = amanda.Session(minimize(net, "loss", Adam(lr=0.1), weights=["w"]), threads=1)
    _steps(session, feeds, 1)
    arrays = {k: v for k, v in session.state.items() if v.shape == (3, 2)}
    ids = {k: id(v) for k, v in arrays.items()}
    del arrays
    _steps(session, feeds, 2)
    stored = {k: v for k, v in session.state.items() if v.shape == (3, 2)}
    assert len(stored) == 3 and {k: id(v) for k, v in stored.items()} == ids  # weight, m, v: the same arrays
    assert all(not v.flags.writeable for v in stored.values())
    g = feeds["x"].astype(np.float64).T @ np.ones((4, 2))
    w, m, v = w0.astype(np.float64), np.zeros((3, 2)), np.zeros((3, 2))
    for t in (1, 2, 3):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w = w - 0.1 / (1 - 0.9 ** t) * m / (np.sqrt(v) / np.sqrt(1 - 0.999 ** t) + 1e-8)
    weight = next(a for a in stored.values() if not np.allclose(a, m, atol=1e-6) and not np.allclose(a, v, atol=1e-6))
    np.testing.assert_allclose(weight, w, rtol=1e-5, atol=1e-6)


def test_a_held_or_fetched_value_never_changes():
    net, feeds, _ = _linear()
    trainer = minimize(net, "loss", Adam(lr=0.1), weights=["w"])
    session = amanda.Session(trainer, threads=1)
    _steps(session, feeds, 1)
    held = dict(session.state)
    copies = {k: v.copy() for k, v in held.items()}
    fetched = session.run(["net_grad/net/w/read:value", "train"], feeds, phase="train")[0]
    before = fetched.copy()
    _steps(session, feeds, 2)
    for k, v in held.items():
        np.testing.assert_array_equal(v, copies[k])
    np.testing.assert_array_equal(fetched, before)
    assert not any(np.array_equal(v, before) for v in session.state.values())  # the weight did move


OPTIMIZERS = {"adam": Adam(lr=0.01), "l2": Adam(lr=0.01, weight_decay=0.1), "adamw": AdamW(lr=0.01),
              "adamw-scheduled": Scheduled(AdamW(lr=0.01), CosineDecay(10)), "sgd": SGD(lr=0.1, momentum=0.9)}


@pytest.mark.parametrize("kind", ["adam", "adamw", "adamw-scheduled"])
def test_every_weight_and_moment_stays_the_same_array(kind):
    net, feeds = _conv_net()
    session = amanda.Session(minimize(net, "loss", OPTIMIZERS[kind]), threads=1)
    _steps(session, feeds, 1)
    ids = {k: id(v) for k, v in session.state.items() if v.ndim}  # not the scalar step counts
    _steps(session, feeds, 2)
    kept = [k for k, v in session.state.items() if k in ids and id(v) == ids[k] and "moving_" not in k]
    # six weights (two convs, BatchNorm's scale and bias), each with m and v. BatchNorm's moving
    # statistics are new arrays each step, but a freed array's id can be reused by the next one,
    # so they are left out rather than counted.
    assert len(kept) == 3 * 6


@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_in_place_and_new_arrays_give_the_same_bits(kind):
    """A session whose stored arrays a caller holds makes new arrays each step; the other writes
    in place (conv weights too, whose kernels keep relaid copies): the same losses and state."""
    net, feeds = _conv_net()
    trainer = minimize(net, "loss", OPTIMIZERS[kind])
    free, held = amanda.Session(trainer, threads=1), amanda.Session(trainer, threads=1)
    hold: list = []
    assert _steps(free, feeds, 4) == _steps(held, feeds, 4, hold)
    assert free.state.keys() == held.state.keys()
    for key, value in free.state.items():
        assert value.tobytes() == held.state[key].tobytes(), key
    threaded = amanda.Session(trainer, threads=2)
    assert _steps(threaded, feeds, 4) == _steps(amanda.Session(trainer, threads=1), feeds, 4)


def test_value_cache_sees_each_update():
    net, feeds = _conv_net()
    trainer = minimize(net, "loss", Adam(lr=0.01))
    assert _steps(amanda.Session(trainer, threads=1, cache=True), feeds, 3) == \
        _steps(amanda.Session(trainer, threads=1), feeds, 3)


def test_the_plan_runs_one_step_per_weight_update():
    net, feeds, _ = _linear()
    session = amanda.Session(minimize(net, "loss", Adam(lr=0.1), weights=["w"]), threads=1, profile=True)
    _steps(session, feeds, 1)
    types = [e.op_type for e in session.profile.events]
    assert types.count("AdamStep") == 1 and types.count("Assign") == 0  # the step's three assigns are in it
    assert types.count("AssignAdd") == 1  # the step count is not an Adam update
