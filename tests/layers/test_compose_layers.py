"""Layers compose with chain, named_merge, >>, b(a) and the op builder; compositions expose
their children's control ports, so one fetch of `train` runs every update in the model."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import amanda
from amanda import Input, layers, ops
from tests.layers.oracles import arrays, typed

RNG = np.random.default_rng(11)


def mlp_numpy(net: amanda.Container, x: np.ndarray) -> np.ndarray:
    first, second = (arrays(c) for c in net.children)
    return np.maximum(x @ first["kernel"] + first["bias"], 0) @ second["kernel"] + second["bias"]


def test_chain_rshift_and_call_build_the_same_model() -> None:
    """chain(a, b), a >> b and b(a) give equal containers that compute the layers in order."""
    a, b = layers.Dense(4, 6, activation="relu", name="a"), layers.Dense(6, 2, name="b")
    assert amanda.chain(a, b) == (a >> b) == b(a)
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    with amanda.Session(a >> b) as session:
        np.testing.assert_allclose(session.run(["y"], {"x": x})[0], mlp_numpy(a >> b, x), rtol=1e-5, atol=1e-6)


def test_a_layer_applied_to_a_value_returns_a_typed_value() -> None:
    """Dense(...)(x) on a builder Value infers the output type, and model() holds the layer as a child."""
    x = Input("x", "float32", ("batch", 4))
    h = layers.Dense(4, 6, activation="relu")(x)
    y = layers.Dense(6, 2)(h)
    assert str(h.type) == "float32[batch,6]" and str(y.type) == "float32[batch,2]"
    net = amanda.model([x], {"y": y}, name="mlp")
    assert [c.name for c in net.children] == ["dense", "dense_1"]
    assert amanda.validate(net) == []
    data = RNG.standard_normal((3, 4)).astype(np.float32)
    with amanda.Session(net) as session:
        np.testing.assert_allclose(session.run(["y"], {"x": data})[0], mlp_numpy(net, data), rtol=1e-5, atol=1e-6)


def test_a_layer_applied_to_a_value_of_the_wrong_shape_raises() -> None:
    """A shape mistake raises at the line that applied the layer, naming the layer."""
    with pytest.raises(amanda.ArgumentError, match="dense"):
        layers.Dense(5, 2)(Input("x", "float32", ("batch", 4)))
    with pytest.raises(amanda.ArgumentError, match="1 Values"):
        layers.Dense(5, 2)(Input("x", "float32"), Input("z", "float32"))


def test_layers_mix_with_builder_ops_for_a_residual_block() -> None:
    """A residual block written with layers and ops.Add computes x + f(x)."""
    x = Input("x", "float32", ("batch", 4))
    inner = layers.Dense(4, 4, name="inner")
    y = ops.Add(x, inner(x), name="skip")
    net = amanda.model([x], {"y": y}, name="res")
    data = RNG.standard_normal((2, 4)).astype(np.float32)
    w = arrays(inner)
    with amanda.Session(net) as session:
        np.testing.assert_allclose(session.run(["y"], {"x": data})[0], data + data @ w["kernel"], rtol=1e-5)


def test_compositions_expose_one_train_port_that_runs_every_update() -> None:
    """chain, named_merge and model expose the children's `train` ports as one; fetching it in
    the train phase updates every BatchNorm's running statistics."""
    bn1, bn2 = layers.BatchNorm(3, name="bn1"), layers.BatchNorm(3, name="bn2")
    chained = amanda.chain(layers.Dense(3, 3, name="d"), bn1, bn2, name="net")
    merged = amanda.named_merge([bn1, bn2], patches=[("bn1:y", "bn2:x")], name="merged")
    x_value = Input("x", "float32", ("batch", 3))
    built = amanda.model([x_value], {"y": bn2(bn1(x_value))}, name="built")
    x = RNG.standard_normal((5, 3)).astype(np.float32) + 2
    for net, feed in ((chained, "x"), (merged, "bn1.x"), (built, "x")):
        assert net.control_names == ("train",)
        with amanda.Session(net, threads=1) as session:
            session.run(["train"], {feed: x}, phase="train")
            moved = [session.state[bn.child("moving_mean").uid] for bn in (bn1, bn2)]
        assert len(moved) == 2 and all(np.abs(m).max() > 0 for m in moved)


def test_a_train_phase_run_without_the_train_port_warns_and_skips_the_updates() -> None:
    """Fetching only an output in the train phase warns that the updates do not run, and they don't."""
    net = layers.Dense(2, 2) >> layers.BatchNorm(2)
    x = RNG.standard_normal((4, 2)).astype(np.float32)
    with amanda.Session(net) as session:
        with pytest.warns(UserWarning, match="fetch it too"):
            session.run(["y"], {"x": x}, phase="train")
        assert session.state == {} or all(not v.any() for k, v in session.state.items() if "mean" in k)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            session.run(["y", "train"], {"x": x}, phase="train")
            session.run(["y"], {"x": x}, phase="inference")


def test_composing_never_modifies_the_layers() -> None:
    """Chaining and applying layers leaves them equal to what they were and shares them."""
    dense = layers.Dense(3, 3)
    before = amanda.dumps(dense)
    net = dense >> layers.relu()
    value = Input("x", "float32", (1, 3))
    built = amanda.model([value], {"y": dense(value)})
    assert amanda.dumps(dense) == before and net.child("dense") is dense and built.child("dense") is dense


def test_a_frozen_cnn_with_batchnorm_matches_onnxruntime_after_training_steps() -> None:
    """After train-phase runs, the frozen model computes in onnxruntime what the session infers."""
    net = amanda.chain(layers.Conv(2, 4, 3, padding="same", name="conv"), layers.BatchNorm(4, name="bn"),
                       layers.relu(), layers.MaxPool(2), layers.Dropout(0.5), layers.GlobalAvgPool(),
                       layers.Dense(4, 3, name="fc"), name="cnn")
    x = RNG.standard_normal((3, 2, 6, 6)).astype(np.float32)
    value = Input("x", "float32", x.shape)
    model = amanda.model([value], {"y": net(value)}, name="top")
    with amanda.Session(model, threads=1) as session:
        for _ in range(3):
            session.run(["y", "train"], {"x": x}, phase="train")
        want = session.run(["y"], {"x": x}, phase="inference")[0]
        frozen = layers.freeze(model, session.state)
    import onnxruntime as ort

    from amanda.io.onnx import to_onnx

    runtime = ort.InferenceSession(to_onnx(frozen).SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(runtime.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-5)
    assert typed(net, x).outputs[0].attrs["shape"] == (3, 3)


def test_freeze_rejects_what_is_not_a_model() -> None:
    """freeze raises ArgumentError for a non-container or a state that is not a mapping."""
    with pytest.raises(amanda.ArgumentError, match="model"):
        layers.freeze("net")  # type: ignore[arg-type]
    with pytest.raises(amanda.ArgumentError, match="state"):
        layers.freeze(layers.BatchNorm(2), state=[1])  # type: ignore[arg-type]


def test_freeze_names_state_keys_that_match_no_variable() -> None:
    """A state key that is no variable of the model (a misspelt key, a state of another model)
    is an ArgumentError naming it with a did-you-mean; the model's own keys freeze to their values."""
    bn = layers.BatchNorm(2)
    key = bn.child("moving_mean").uid
    value = np.array([1.0, 2.0], np.float32)
    frozen = layers.freeze(bn, {key: value})
    np.testing.assert_array_equal(frozen.child("moving_mean").attrs["value"], value)
    with pytest.raises(amanda.ArgumentError, match=rf"state.*{key[:-1]}X.*did you mean.*'{key}'"):
        layers.freeze(bn, {key[:-1] + "X": value})
    with amanda.Session(layers.BatchNorm(2)) as other:
        other.run(["train"], {"x": np.ones((3, 2), np.float32)}, phase="train")
        with pytest.raises(amanda.ArgumentError, match="match no variable"):
            layers.freeze(bn, other.state)


def test_chain_exposes_each_control_name_once_and_leaves_clashing_names_alone() -> None:
    """Children's named control ports become one parent port per name, wired by control edges;
    a name the parent already uses for a data port is not exposed."""
    a = amanda.op("A", "a", ["x"], ["y"], controls=["train", "log"])
    b = amanda.op("B", "b", ["x"], ["y"], controls=["train"])
    parent = amanda.chain(a, b, name="p")
    assert parent.control_names == ("train", "log")
    wired = sorted((str(e.src), str(e.dst)) for e in parent.edges if e.dst.port in ("train", "log"))
    assert wired == [("a:log", "SELF:log"), ("a:train", "SELF:train"), ("b:train", "SELF:train")]
    clash = amanda.chain(a, b, outputs=["train"], name="q")
    assert clash.control_names == ("log",)
    plain = amanda.chain(amanda.op("A", "a", ["x"], ["y"]), name="r")
    assert plain.control_names == ()


def test_model_takes_a_type_and_attributes() -> None:
    """model(type=, attrs=) sets the container's type and adds its attributes to the namespace."""
    x = Input("x", "float32", (2,))
    built = amanda.model([x], {"y": ops.Relu(x)}, name="block", type="Block", attrs={"width": 2})
    assert built.type == "Block" and dict(built.attrs) == {"namespace": "amanda/onnx/17", "width": 2}
