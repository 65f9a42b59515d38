"""A training container as a pure function exports to ONNX: onnxruntime, fed each step's new
state back, follows amanda's own training steps (losses, weights, BatchNorm's statistics) for
SGD with momentum, Adam with L2 decay and a scheduled AdamW."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import amanda
from amanda import Container, Input, layers, model, ops
from amanda.errors import FormatError
from amanda.io.onnx import dump_onnx
from amanda.optim import SGD, Adam, AdamW, clip_gradients, freeze, minimize, training_step
from amanda.optim.schedules import CosineDecay, Scheduled

RNG = np.random.default_rng(0)
FEEDS = [{"x": RNG.standard_normal((6, 5)).astype(np.float32), "labels": RNG.integers(0, 3, 6)} for _ in range(4)]
KERNEL, MEAN = "state/mlp_grad/mlp/fc1/kernel/variable", "state/mlp_grad/mlp/bn/moving_mean"


def mlp() -> Container:
    x, labels = Input("x", "float32", ("batch", 5)), Input("labels", "int64", ("batch",))
    h = layers.BatchNorm(7, name="bn")(layers.Dense(5, 7, activation="tanh", name="fc1")(x))
    logits = layers.Dense(7, 3, name="fc2")(h)
    built = model([x, labels], {"loss": ops.SoftmaxCrossEntropyLoss(logits, labels)[0], "logits": logits}, name="mlp")
    return layers.seeded(built, 0)


@pytest.mark.parametrize(("optimizer", "clip"), [(SGD(lr=0.1, momentum=0.9), None), (Adam(lr=0.01, weight_decay=0.1), None),
                                                 (Scheduled(AdamW(lr=0.01, weight_decay=0.1), CosineDecay(3)), None),
                                                 (AdamW(lr=0.01), (0.5, 1.0))],
                         ids=["sgd_momentum", "adam_l2", "scheduled_adamw", "clipped_adamw"])
def test_an_exported_step_follows_amandas_training_in_onnxruntime(tmp_path, optimizer, clip) -> None:
    trainer = minimize(mlp(), "loss", optimizer)
    if clip is not None:  # the Clipping container (by value, then by norm) is kept as it is
        trainer = clip_gradients(trainer, *clip)
    step = training_step(trainer)
    assert step.container.type == "TrainingStep"
    assert {KERNEL, MEAN} <= set(step.updates.values()) and set(step.state) >= set(step.updates.values())
    dump_onnx(step.container, tmp_path / "step.onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    runtime = ort.InferenceSession(str(tmp_path / "step.onnx"), options)
    names = [o.name for o in runtime.get_outputs()]
    state = dict(step.state)
    with amanda.Session(trainer) as session:
        for feeds in FEEDS:
            (expected,) = session.run(["loss", "train"], feeds, phase="train")[:1]
            got = dict(zip(names, runtime.run(None, {**feeds, **state})))
            state = {**state, **{step.updates[k]: v for k, v in got.items() if k in step.updates}}
            np.testing.assert_allclose(got["loss"], expected, rtol=1e-5)
        frozen = freeze(trainer, session)
        after = training_step(trainer, session).state
    np.testing.assert_allclose(state[KERNEL], frozen.descendant(("fc1", "kernel")).attrs["value"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state[MEAN], frozen.descendant(("bn", "moving_mean")).attrs["value"], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(after[KERNEL], frozen.descendant(("fc1", "kernel")).attrs["value"])
    assert not np.array_equal(step.state[KERNEL], after[KERNEL])  # the initial state is the initial weights


def test_ops_of_amandas_own_vocabulary_without_an_onnx_form_are_refused() -> None:
    tick = Container("Tick", "tick", inputs=(), outputs=["value"], attrs={"namespace": "amanda/core"})
    holder = Container("Model", "m", outputs=["value"], children=[tick],
                       edges=[amanda.Edge(amanda.Endpoint(("tick",), "value"), amanda.Endpoint(amanda.SELF, "value"))])
    with pytest.raises(FormatError) as info:
        training_step(holder)
    assert info.value.path == "tick"
