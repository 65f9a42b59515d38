"""Optimisers as containers: a step of SGD (momentum, Nesterov, weight decay), Adam and AdamW
moves the weights as torch.optim does (and as numpy formulas written here do); BatchNorm's
statistics update in the same step; freeze and save_weights give the trained model back."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import Input, layers, model, ops
from amanda.io.onnx import dump_onnx
from amanda.optim import SGD, Adam, AdamW, default_weights, freeze, minimize

RNG = np.random.default_rng(0)
FEEDS = [{"x": RNG.standard_normal((6, 5)).astype(np.float32), "labels": RNG.integers(0, 3, 6)} for _ in range(3)]


def mlp() -> amanda.Container:
    x, labels = Input("x", "float32", ("batch", 5)), Input("labels", "int64", ("batch",))
    h = layers.Dense(5, 7, activation="tanh", name="fc1")(x)
    logits = layers.Dense(7, 3, name="fc2", init="glorot_normal")(h)
    built = model([x, labels], {"loss": ops.SoftmaxCrossEntropyLoss(logits, labels)[0], "logits": logits}, name="mlp")
    return layers.seeded(built, 0)  # the same weights each time it is built


def trained(optimizer, steps: int = 3) -> tuple[dict, list[float]]:
    net = mlp()
    trainer = minimize(net, "loss", optimizer)
    losses = []
    with amanda.Session(trainer) as s:
        for feeds in FEEDS[:steps]:
            losses.append(float(s.run(["loss", "train"], feeds, phase="train")[0]))
        frozen = freeze(trainer, s)
    return {"/".join(p): np.asarray(frozen.descendant(p).attrs["value"]) for p in default_weights(mlp())}, losses


def torch_trained(make, steps: int = 3) -> tuple[dict, list[float]]:
    torch = pytest.importorskip("torch")
    start = {"/".join(p): np.asarray(mlp().descendant(p).attrs["value"]) for p in default_weights(mlp())}
    w = {k: torch.tensor(v, requires_grad=True) for k, v in start.items()}
    opt = make(torch.optim, list(w.values()))
    losses = []
    for feeds in FEEDS[:steps]:
        opt.zero_grad()
        h = torch.tanh(torch.tensor(feeds["x"]) @ w["fc1/kernel"] + w["fc1/bias"])
        loss = torch.nn.functional.cross_entropy(h @ w["fc2/kernel"] + w["fc2/bias"], torch.tensor(feeds["labels"]))
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return {k: t.detach().numpy() for k, t in w.items()}, losses


CASES = {
    "sgd": (SGD(lr=0.1), lambda o, p: o.SGD(p, lr=0.1)),
    "sgd_momentum_decay": (SGD(lr=0.1, momentum=0.9, weight_decay=0.01),
                           lambda o, p: o.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01)),
    "nesterov": (SGD(lr=0.05, momentum=0.8, nesterov=True), lambda o, p: o.SGD(p, lr=0.05, momentum=0.8, nesterov=True)),
    "adam": (Adam(lr=0.01), lambda o, p: o.Adam(p, lr=0.01)),
    "adam_l2": (Adam(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1),
                lambda o, p: o.Adam(p, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1)),
    "adamw": (AdamW(lr=0.01, weight_decay=0.1), lambda o, p: o.AdamW(p, lr=0.01, weight_decay=0.1)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_steps_match_torch_optim(case):
    """Three steps move every weight as torch.optim's same optimiser does, with the same losses."""
    ours, our_losses = trained(CASES[case][0])
    theirs, their_losses = torch_trained(CASES[case][1])
    np.testing.assert_allclose(our_losses, their_losses, rtol=1e-5)
    for name in theirs:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-4, atol=1e-6, err_msg=name)


def test_adam_matches_numpy_formulas():
    """Two Adam steps on y = x @ w with a squared loss equal the formulas written out in numpy."""
    x = Input("x", "float32", (4, 2))
    start = np.array([[0.5], [-1.0]], np.float32)
    w = ops.Constant(value=start, name="w")
    err = ops.Sub(ops.MatMul(x, w), np.ones((4, 1), np.float32))
    net = model([x], {"loss": ops.ReduceSum(ops.Mul(err, err), keepdims=0)}, name="lin")
    xs = np.arange(8, dtype=np.float32).reshape(4, 2) / 8
    lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-8
    with amanda.Session(minimize(net, "loss", Adam(lr=lr), weights=["w"])) as s:
        for _ in range(2):
            s.run(["train"], {"x": xs}, phase="train")
        got = freeze(minimize(net, "loss", Adam(lr=lr), weights=["w"]), s).child("w").attrs["value"]
    value, m, v = start.astype(np.float64), 0.0, 0.0
    for t in (1, 2):
        g = 2 * xs.T.astype(np.float64) @ (xs @ value - 1)
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        value = value - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    np.testing.assert_allclose(got, value, rtol=1e-5)


def cnn() -> amanda.Container:
    x, labels = Input("x", "float32", ("batch", 1, 6, 6)), Input("labels", "int64", ("batch",))
    h = layers.BatchNorm(2, name="bn", momentum=0.5)(layers.Conv(1, 2, 3, name="conv")(x))
    logits = layers.Dense(2, 3, name="fc")(layers.GlobalAvgPool(name="gap")(ops.Relu(h)))
    return model([x, labels], {"loss": ops.SoftmaxCrossEntropyLoss(logits, labels)[0], "logits": logits}, name="cnn")


def test_a_step_also_updates_batchnorm_statistics_and_freezes_for_onnxruntime(tmp_path):
    """One train step runs BatchNorm's running-statistics update (momentum formula in numpy) with
    the optimiser's; the frozen inference model holds the trained values, saves and loads by uid,
    and onnxruntime gives the session's inference outputs."""
    ort = pytest.importorskip("onnxruntime")
    net = cnn()
    trainer = minimize(net, "loss", SGD(lr=0.1))
    feeds = {"x": RNG.standard_normal((4, 1, 6, 6)).astype(np.float32), "labels": np.array([0, 1, 2, 1])}
    before = freeze(trainer)  # the initial weights
    with amanda.Session(trainer) as s:
        s.run(["loss", "train"], feeds, phase="train")
        after = freeze(trainer, s)
        logits = s.run(["logits"], feeds, phase="inference")[0]
    mean = after.descendant(("bn", "moving_mean")).attrs["value"]
    conv = before.child("conv")
    with amanda.Session(conv) as s1:
        c = s1.run(["y"], {"x": feeds["x"]})[0]
    np.testing.assert_allclose(mean, 0.5 * 0 + 0.5 * c.mean(axis=(0, 2, 3)), rtol=1e-5, atol=1e-6)
    assert not np.allclose(after.descendant(("fc", "kernel")).attrs["value"], before.descendant(("fc", "kernel")).attrs["value"])
    path = tmp_path / "trained.npz"
    amanda.save_weights(after, path)
    loaded = amanda.load_weights(net, path)
    np.testing.assert_array_equal(loaded.container.descendant(("fc", "kernel")).attrs["value"],
                                  after.descendant(("fc", "kernel")).attrs["value"])
    dump_onnx(after, tmp_path / "inference.onnx")
    theirs = ort.InferenceSession(str(tmp_path / "inference.onnx")).run(["logits"], feeds)[0]
    np.testing.assert_allclose(theirs, logits, rtol=1e-5, atol=1e-6)


def test_bad_arguments_raise():
    """A non-optimiser, bad hyper-parameters and a model without weights raise AmandaErrors."""
    with pytest.raises(amanda.ArgumentError):
        minimize(mlp(), "loss", "adam")
    with pytest.raises(amanda.ArgumentError, match="lr"):
        Adam(lr=-1)
    with pytest.raises(amanda.ArgumentError, match="nesterov"):
        SGD(nesterov=True)
    x = Input("x", "float32", (2,))
    with pytest.raises(amanda.PathError):
        minimize(model([x], {"loss": ops.ReduceSum(x, keepdims=0)}, name="bare"), "loss", SGD())


def test_trainable_and_freeze_check_their_arguments():
    """trainable refuses a non-weight; freeze refuses a non-container and a bad session; a model
    frozen without a session keeps its initial values."""
    net = mlp()
    with pytest.raises(amanda.ArgumentError, match="weight"):
        amanda.optim.trainable(net, [("fc1", "matmul")])
    with pytest.raises(amanda.ArgumentError):
        freeze("model")
    with pytest.raises(amanda.ArgumentError):
        freeze(net, session=42)
    held = amanda.optim.trainable(net)
    assert held.descendant(("fc1", "kernel")).type == "Weight"
    np.testing.assert_array_equal(freeze(held).descendant(("fc1", "kernel")).attrs["value"],
                                  net.descendant(("fc1", "kernel")).attrs["value"])


def test_freeze_refuses_a_session_that_never_ran_the_model():
    """A session that never ran the trainer (or one of another model) holds no trained values:
    freeze names the weights it lacks instead of returning the untrained ones; session=None
    gives the initial weights on purpose."""
    net = mlp()
    trainer = minimize(net, "loss", SGD(lr=0.1))
    with amanda.Session(trainer) as fresh, pytest.raises(amanda.ArgumentError, match=r"session.*fc1/kernel.*None"):
        freeze(trainer, fresh)
    with pytest.raises(amanda.ArgumentError, match="no value for"):
        freeze(trainer, {})
    with amanda.Session(net) as other:
        other.run(["loss"], FEEDS[0])
        with pytest.raises(amanda.ArgumentError, match="fc1/kernel"):
            freeze(trainer, other)
    np.testing.assert_array_equal(freeze(trainer).descendant(("fc1", "kernel")).attrs["value"],
                                  net.descendant(("fc1", "kernel")).attrs["value"])
