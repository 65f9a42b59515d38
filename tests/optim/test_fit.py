"""fit/evaluate/predict: the same losses as a hand-written loop of session runs, metrics equal to
numpy's, early stopping at the right epoch, the validation split's rows, clipping against numpy
gradients, learning-rate schedules carrying the state, and errors with did-you-mean."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import Input, layers, model, ops
from amanda.errors import format_path
from amanda.optim import (
    SGD,
    Adam,
    EarlyStopping,
    LambdaCallback,
    LearningRateScheduler,
    TerminateOnNaN,
    TopKAccuracy,
    evaluate,
    fit,
    minimize,
    predict,
)

RNG = np.random.default_rng(0)
X = RNG.standard_normal((35, 4)).astype(np.float32)
Y = ((X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0)).astype(np.int64)


def mlp() -> amanda.Container:
    x, labels = Input("x", "float32", ("batch", 4)), Input("labels", "int64", ("batch",))
    h = layers.BatchNorm(8, name="bn")(layers.Dense(4, 8, activation="tanh", name="hidden")(x))
    logits = layers.Dense(8, 3, name="fc")(h)
    net = model([x, labels], {"loss": ops.SoftmaxCrossEntropyLoss(logits, labels)[0], "logits": logits}, name="net")
    return layers.seeded(net, seed=0)


def line() -> amanda.Container:
    """loss = mean((x @ w - y)^2), one weight ``w`` (zeros)."""
    x, y = Input("x", "float32", ("batch", 3)), Input("y", "float32", ("batch", 1))
    w = ops.Constant(value=np.zeros((3, 1), np.float32), name="w")
    pred = ops.MatMul(x, w)
    err = ops.Sub(pred, y)
    return model([x, y], {"loss": ops.ReduceMean(ops.Mul(err, err), keepdims=0), "pred": pred}, name="line")


def test_fit_equals_a_hand_written_loop_and_lowers_the_loss():
    history = fit(mlp(), X, Y, optimizer=Adam(lr=0.05), epochs=3, batch_size=10, seed=7, verbose=False)
    trainer = minimize(mlp(), "loss", Adam(lr=0.05))
    rng, losses = np.random.default_rng(7), []
    with amanda.Session(trainer) as session:
        for _ in range(3):
            order = rng.permutation(len(X))
            for start in range(0, len(X), 10):
                rows = order[start:start + 10]
                losses.append(float(session.run(["loss", "train"], {"x": X[rows], "labels": Y[rows]},
                                                phase="train")[0]))
    assert history.steps == losses and len(losses) == 12
    means = [np.average(losses[i:i + 4], weights=[10, 10, 10, 5]) for i in (0, 4, 8)]
    np.testing.assert_allclose(history.history["loss"], means, rtol=1e-12)
    assert history.history["loss"][-1] < history.history["loss"][0] * 0.8 and history.epoch == [0, 1, 2]


def test_fit_takes_a_training_container_and_an_iterable_of_batches():
    batches = [(X[i:i + 8], Y[i:i + 8]) for i in range(0, 32, 8)]
    history = fit(minimize(mlp(), "loss", SGD(lr=0.1)), batches, epochs=2, verbose=False)
    trainer = minimize(mlp(), "loss", SGD(lr=0.1))
    with amanda.Session(trainer) as session:
        losses = [float(session.run(["loss", "train"], {"x": x, "labels": y}, phase="train")[0])
                  for _ in range(2) for x, y in batches]
    assert history.steps == losses


def test_metrics_equal_numpy():
    frozen = fit(mlp(), X, Y, optimizer=Adam(lr=0.05), epochs=2, batch_size=8, verbose=False).model()
    with amanda.Session(frozen) as session:
        logits = session.run(["logits"], {"x": X, "labels": Y})[0]
    np.testing.assert_array_equal(predict(frozen, X, batch_size=8), logits)
    rank = (logits > logits[np.arange(len(Y)), Y][:, None]).sum(axis=1)  # scores above the label's

    def margin(y_true, y_pred):
        return float(np.mean(y_pred.max(axis=1)))

    got = evaluate(frozen, X, Y, batch_size=8, metrics=["accuracy", TopKAccuracy(2), margin])
    assert got["accuracy"] == pytest.approx(np.mean(logits.argmax(axis=1) == Y), rel=1e-12)
    assert got["top_2_accuracy"] == pytest.approx(np.mean(rank < 2), rel=1e-12)
    assert got["margin"] == pytest.approx(logits.max(axis=1).mean(), rel=1e-6)
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    assert got["loss"] == pytest.approx(-np.log(probs[np.arange(len(Y)), Y]).mean(), rel=1e-5)


def test_regression_metrics_equal_numpy():
    x = RNG.standard_normal((20, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)
    history = fit(line(), x, y, optimizer=SGD(lr=0.1), weights=["w"], epochs=1, batch_size=20, shuffle=False,
                  metrics=["mse", "mean_absolute_error"], verbose=False)
    # one batch of the whole data, predictions from the zero weight: pred == 0
    assert history.history["mse"] == [pytest.approx(float(np.mean(y.astype(np.float64) ** 2)))]
    assert history.history["mean_absolute_error"] == [pytest.approx(float(np.mean(np.abs(y))))]
    assert history.history["loss"][0] == pytest.approx(float(np.mean(y.astype(np.float64) ** 2)), rel=1e-6)


def test_early_stopping_stops_at_the_right_epoch():
    # lr=0: the loss never improves after the first epoch; patience 2 stops after epoch 2
    stop = EarlyStopping(monitor="loss", patience=2)
    history = fit(mlp(), X, Y, optimizer=SGD(lr=0.0), epochs=10, callbacks=[stop], verbose=False)
    assert history.epoch == [0, 1, 2] and stop.stopped_epoch == 2 == history.stopped_epoch

    class Loop:
        epoch, stop = 0, False

    rule, loop = EarlyStopping(monitor="val_loss", patience=2, min_delta=0.01), Loop()
    for epoch, value in enumerate([1.0, 0.9, 0.895, 0.85, 0.845, 0.844, 0.5]):
        loop.epoch = epoch
        rule.on_epoch_end(loop, {"val_loss": value})
        if loop.stop:
            break
    assert rule.stopped_epoch == 5  # best 0.85 at epoch 3; 4 and 5 do not beat it by 0.01


def test_validation_split_takes_the_last_rows():
    seen: list[np.ndarray] = []

    def record(y_true, y_pred):
        seen.append(np.array(y_true))
        return 0.0

    x = np.arange(40, dtype=np.float32)[:, None].repeat(3, axis=1)
    y = np.arange(40, dtype=np.float32)[:, None]
    history = fit(line(), x, y, optimizer=SGD(lr=0.0), weights=["w"], epochs=1, batch_size=7, validation_split=0.25,
                  metrics=[record], seed=1, verbose=False)
    training, held = np.concatenate(seen[:5]), np.concatenate(seen[5:])
    assert sorted(training.ravel().tolist()) == list(range(30)) and training.ravel().tolist() != list(range(30))
    assert held.ravel().tolist() == list(range(30, 40))
    assert history.history["val_loss"] == [pytest.approx(float(np.mean(y[30:].astype(np.float64) ** 2)))]


@pytest.mark.parametrize("value, norm", [(0.5, None), (None, 1.0), (0.3, 0.2)])
def test_clipping_against_numpy_gradients(value, norm):
    x = RNG.standard_normal((6, 3)).astype(np.float32)
    y = RNG.standard_normal((6, 1)).astype(np.float32) * 4
    history = fit(line(), x, y, optimizer=SGD(lr=1.0), weights=["w"], epochs=1, batch_size=6, shuffle=False, clip_value=value,
                  clip_norm=norm, verbose=False)
    g = 2.0 / 6 * x.astype(np.float64).T @ (-y.astype(np.float64))  # the gradient at w = 0
    if value is not None:
        g = np.clip(g, -value, value)
    if norm is not None:
        g = g * min(1.0, norm / (np.sqrt((g * g).sum()) + 1e-6))
    w = history.model().child("w").attrs["value"]
    np.testing.assert_allclose(w, -g, rtol=1e-5)
    assert any(c.type == "Clipping" for c in history.trainer.children)


def test_a_learning_rate_schedule_keeps_the_state():
    lrs = []
    schedule = LearningRateScheduler(lambda epoch, lr: 0.05 if epoch == 0 else 0.0)
    watch = LambdaCallback(on_epoch_begin=lambda loop: lrs.append(loop.lr))
    history = fit(mlp(), X, Y, optimizer=Adam(lr=0.05), epochs=3, batch_size=35, shuffle=False,
                  callbacks=[schedule, watch], verbose=False)
    assert history.history["lr"] == [0.05, 0.0, 0.0] and lrs == [0.05, 0.0, 0.0]
    first, second, third = history.steps
    assert second < first and second == third  # trained weights carried over, then frozen by lr 0


def test_terminate_on_nan_and_named_callbacks():
    x = X.copy()
    x[3] = np.nan
    history = fit(mlp(), x, Y, optimizer=SGD(lr=0.1), epochs=3, batch_size=5, shuffle=False,
                  callbacks=["terminate_on_nan"], verbose=False)
    assert len(history.steps) == 1 and np.isnan(history.steps[0]) and history.epoch == []
    assert isinstance(TerminateOnNaN(), amanda.optim.Callback)


def test_bad_arguments_say_what_and_suggest():
    with pytest.raises(amanda.ArgumentError, match="did you mean 'accuracy'"):
        fit(mlp(), X, Y, optimizer=SGD(), metrics=["acuracy"])
    with pytest.raises(amanda.ArgumentError, match="did you mean 'early_stopping'"):
        fit(mlp(), X, Y, optimizer=SGD(), callbacks=["early_stoping"])
    with pytest.raises(amanda.ArgumentError, match="did you mean 'val_loss'"):
        fit(mlp(), X, Y, optimizer=SGD(), validation_split=0.2, callbacks=[EarlyStopping("val_los")], verbose=False)
    with pytest.raises(amanda.ArgumentError, match="did you mean 'labels'"):
        fit(mlp(), {"x": X, "label": Y}, optimizer=SGD())
    with pytest.raises(amanda.ArgumentError, match="optimiser"):
        fit(mlp(), X, Y)
    with pytest.raises(amanda.ArgumentError, match="one length"):
        fit(mlp(), X, Y[:-1], optimizer=SGD())
    with pytest.raises(amanda.ArgumentError, match="validation_split"):
        fit(mlp(), X, Y, optimizer=SGD(), validation_split=1.5)
    with pytest.raises(amanda.ArgumentError, match="clip_norm"):
        fit(mlp(), X, Y, optimizer=SGD(), clip_norm=-1)
    with pytest.raises(amanda.ArgumentError, match="learning rate"):
        fit(minimize(mlp(), "loss", SGD()), X, Y, callbacks=[LearningRateScheduler(lambda e, lr: 0.5)], verbose=False)
    with pytest.raises(amanda.ArgumentError, match="used-up generator"):
        fit(minimize(mlp(), "loss", SGD()), ((X, Y) for _ in range(1)), epochs=2, verbose=False)


@pytest.mark.parametrize("call, where", [
    (lambda: fit("net", X, Y, optimizer=SGD()), "model"),
    (lambda: fit(mlp(), {"x": [[1.0], [1.0, 2.0]], "labels": Y}, optimizer=SGD()), "x/x"),
    (lambda: fit(mlp(), X, [[1], [1, 2]], optimizer=SGD()), "x/labels"),
    (lambda: fit(mlp(), X, Y, optimizer=SGD(), epochs=10**20), "epochs"),
    (lambda: fit(mlp(), X, Y, optimizer=SGD(), shuffle=np.zeros(2)), "shuffle"),
    (lambda: fit(mlp(), X, Y, optimizer=SGD(), verbose="no"), "verbose"),
    (lambda: fit(mlp(), X, Y, optimizer=SGD(), validation_split=np.zeros(2)), "validation_split"),
    (lambda: evaluate(mlp(), X, Y, output=np.zeros(2)), "output"),
    (lambda: evaluate(mlp(), X, Y, session="s"), "session"),
    (lambda: predict(3, X), "model"),
    (lambda: EarlyStopping(monitor=3), "EarlyStopping/monitor"),
    (lambda: EarlyStopping(min_delta="0.1"), "EarlyStopping/min_delta"),
    (lambda: EarlyStopping(mode=np.zeros(2)), "EarlyStopping/mode"),
    (lambda: TopKAccuracy([[[1]]]), "TopKAccuracy/k"),
])
def test_wrong_types_name_the_argument(call, where):
    """Each wrong-typed argument is an ArgumentError at its name, saying what it found."""
    with pytest.raises(amanda.ArgumentError) as info:
        call()
    assert format_path(info.value.path) == where and info.value.found


def test_the_progress_bar_shows_the_loss(monkeypatch, capsys):
    monkeypatch.setenv("AMANDA_PROGRESS", "1")
    fit(mlp(), X, Y, optimizer=SGD(lr=0.1), epochs=2, batch_size=10, metrics=["accuracy"])
    shown = capsys.readouterr().err
    assert "fit" in shown and "epoch 1 loss" in shown and "accuracy" in shown
    monkeypatch.setenv("AMANDA_PROGRESS", "1")
    fit(mlp(), X, Y, optimizer=SGD(lr=0.1), epochs=1, verbose=False)
    assert "loss" not in capsys.readouterr().err


def test_validation_data_and_evaluate_with_a_session(tmp_path):
    from amanda.optim import Checkpoint

    saver = Checkpoint(tmp_path / "e{epoch}-s{step}.npz")
    history = fit(mlp(), {"x": X[:25], "labels": Y[:25]}, optimizer=SGD(lr=0.1), epochs=2, batch_size=10,
                  validation_data=[(X[25:], Y[25:])], metrics=["accuracy"], callbacks=[saver], verbose=False)
    assert [p.rsplit("/", 1)[-1] for p in saver.written] == ["e0-s3.npz", "e1-s6.npz"]
    assert all((tmp_path / p.rsplit("/", 1)[-1]).exists() for p in saver.written)
    with amanda.Session(history.trainer) as session:
        cold = evaluate(history.trainer, X[25:], Y[25:], session=session)  # the initial weights
    frozen = history.model()
    with amanda.Session(frozen) as session:
        logits = session.run(["logits"], {"x": X[25:], "labels": Y[25:]})[0]
    warm = evaluate(frozen, {"x": X[25:], "labels": Y[25:]}, metrics=["accuracy"])
    assert warm["accuracy"] == pytest.approx(np.mean(logits.argmax(axis=1) == Y[25:]))
    assert history.history["val_accuracy"][-1] == pytest.approx(warm["accuracy"])
    assert history.history["val_loss"][-1] == pytest.approx(warm["loss"], rel=1e-6) and cold["loss"] != warm["loss"]
