"""What a training step's plan runs: a layer's ``train`` control port runs its updates, not its
ops of another phase."""

import numpy as np

import amanda
from amanda import Input, layers, ops
from amanda.optim import Adam, minimize


def _bn_net():
    x = Input("x", "float32", ("batch", 3))
    h = layers.BatchNorm(3, name="bn")(layers.Dense(3, 3, name="fc")(x))
    return layers.seeded(amanda.model([x], {"loss": ops.ReduceSum(ops.Mul(h, h), keepdims=0)}, name="net"), 0)


def test_a_training_step_runs_no_inference_op():
    trainer = minimize(_bn_net(), "loss", Adam(lr=0.1))
    session = amanda.Session(trainer, threads=1, profile=True)
    feeds = {"x": np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)}
    session.run(["loss", "train"], feeds, phase="train")
    norms = [e.path[-1] for e in session.profile.events if e.op_type == "BatchNormalization"]
    assert norms == ["normalize_batch"]  # the training-mode op; the inference one has no reader
    before = dict(session.state)
    session.run(["loss", "train"], feeds, phase="train")
    moved = [k for k, v in session.state.items() if k in before and not np.array_equal(v, before[k])]
    assert len(moved) >= 4  # weights, moments and the running statistics: the updates still ran
    session.run(["loss"], feeds, phase="inference")
    assert [e.path[-1] for e in session.profile.events if e.op_type == "BatchNormalization"] == ["normalize"]
