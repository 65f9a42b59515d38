"""Learning-rate schedules as ops: SGD, Adam and AdamW at a scheduled rate move the weights as
numpy formulas written here do; the rate is an op of the training container; a scheduled run
resumes from a checkpoint exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

import amanda
from amanda import Input, model, ops
from amanda.optim import SGD, Adam, AdamW, Checkpoint, fit, freeze, minimize
from amanda.optim.schedules import CosineDecay, Scheduled, StepDecay, Warmup

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 3)).astype(np.float32)
Y = RNG.standard_normal((6, 1)).astype(np.float32)


def line() -> amanda.Container:
    x, y = Input("x", "float32", ("batch", 3)), Input("y", "float32", ("batch", 1))
    w = ops.Constant(value=np.full((3, 1), 0.5, np.float32), name="w")
    err = ops.Sub(ops.MatMul(x, w), y)
    return model([x, y], {"loss": ops.ReduceMean(ops.Mul(err, err), keepdims=0)}, name="line")


def trained(optimizer, steps: int) -> np.ndarray:
    trainer = minimize(line(), "loss", optimizer, weights=["w"])
    with amanda.Session(trainer) as session:
        for _ in range(steps):
            session.run(["train"], {"x": X, "y": Y}, phase="train")
        return np.asarray(freeze(trainer, session).child("w").attrs["value"], np.float64)


def grad(w: np.ndarray) -> np.ndarray:
    return 2.0 / len(X) * X.T.astype(np.float64) @ (X.astype(np.float64) @ w - Y)


def test_sgd_at_a_step_decayed_rate():
    w = np.full((3, 1), 0.5)
    for t in range(5):
        w = w - 0.1 * 0.5 ** (t // 2) * grad(w)
    np.testing.assert_allclose(trained(Scheduled(SGD(lr=0.1), StepDecay(2, 0.5)), 5), w, rtol=1e-5)


@pytest.mark.parametrize("make, decay, decoupled", [(Adam, 0.0, False), (Adam, 0.1, False), (AdamW, 0.1, True)])
def test_adam_at_a_warmed_up_cosine_rate(make, decay, decoupled):
    def factor(t):
        return min(1.0, (t + 1) / 2) * (0.1 + 0.9 * (1 + math.cos(math.pi * min(t, 5) / 5)) / 2)

    w, m, v = np.full((3, 1), 0.5), np.zeros((3, 1)), np.zeros((3, 1))
    for t in range(7):
        lr, g = 0.05 * factor(t), grad(w)
        if decoupled:
            w = w * (1 - lr * decay)
        else:
            g = g + decay * w
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        w = w - lr * (m / (1 - 0.9 ** (t + 1))) / (np.sqrt(v / (1 - 0.999 ** (t + 1))) + 1e-8)
    schedule = Warmup(2, CosineDecay(5, final=0.1))
    np.testing.assert_allclose(trained(Scheduled(make(lr=0.05, weight_decay=decay), schedule), 7), w, rtol=1e-5)


def test_the_rate_is_an_op_of_the_training_container():
    trainer = minimize(line(), "loss", Scheduled(Adam(lr=0.05), CosineDecay(10)), weights=["w"])
    found = {path[-1]: node.type for path, node, _ in amanda.walk(trainer) if path}
    assert found["lr/rate"] == "Mul" and found["lr/step"] == "Variable"


def test_a_scheduled_run_resumes_exactly(tmp_path):
    opt = Scheduled(Adam(lr=0.05), Warmup(3, StepDecay(2, 0.5)))
    whole = fit(line(), X, Y, optimizer=opt, weights=["w"], epochs=4, batch_size=2, verbose=False)
    path = tmp_path / "c.npz"
    fit(line(), X, Y, optimizer=opt, weights=["w"], epochs=2, batch_size=2, callbacks=[Checkpoint(path)],
        verbose=False)
    resumed = fit(line(), X, Y, optimizer=opt, weights=["w"], epochs=4, batch_size=2, resume=path, verbose=False)
    assert resumed.steps == whole.steps and len(set(whole.steps)) == 12


def test_bad_schedules_say_what():
    with pytest.raises(amanda.ArgumentError, match="every"):
        StepDecay(0)
    with pytest.raises(amanda.ArgumentError, match="final"):
        CosineDecay(10, final=2.0)
    with pytest.raises(amanda.ArgumentError, match="then"):
        Warmup(3, then=0.5)
    with pytest.raises(amanda.ArgumentError, match="SGD, Adam or AdamW"):
        Scheduled("adam", CosineDecay(3))
    with pytest.raises(amanda.ArgumentError, match="Schedule"):
        Scheduled(Adam(), lambda t: 1.0)


def test_a_learning_rate_callback_rebuilds_a_scheduled_optimiser_at_its_new_base_rate():
    from amanda.optim import LearningRateScheduler

    opt = Scheduled(SGD(lr=0.1), StepDecay(100))
    zero = LearningRateScheduler(lambda epoch, lr: 0.0 if epoch else lr)
    history = fit(line(), X, Y, optimizer=opt, weights=["w"], epochs=3, batch_size=6, callbacks=[zero], verbose=False)
    assert history.history["lr"] == [0.1, 0.0, 0.0] and history.steps[1] == history.steps[2] < history.steps[0]
    assert opt.with_lr(0.3).optimizer.lr == 0.3 and opt.with_lr(0.3).schedule == opt.schedule
