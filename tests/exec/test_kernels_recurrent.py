"""RNN, GRU and LSTM kernels against onnxruntime, over directions, sequence lengths, initial
states, layouts, activations with alpha/beta, clip, peepholes, input_forget and
linear_before_reset."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import amanda  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402
from tests.exec.onnx_oracle import amanda_outputs, onnxruntime_outputs  # noqa: E402

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def build(kind: str, cfg: dict) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A one-node model of ``kind`` and its random feeds (everything fed, nothing folded)."""
    rng = np.random.default_rng(cfg["seed"])
    steps, batch, size, hidden = cfg["steps"], cfg["batch"], 3, cfg["hidden"]
    dirs = 2 if cfg["direction"] == "bidirectional" else 1
    g = GATES[kind]
    layout = cfg["layout"]
    x_shape = (batch, steps, size) if layout else (steps, batch, size)
    h_shape = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    feeds = {
        "X": rng.standard_normal(x_shape).astype(np.float32),
        "W": (rng.standard_normal((dirs, g * hidden, size)) * 0.5).astype(np.float32),
        "R": (rng.standard_normal((dirs, g * hidden, hidden)) * 0.5).astype(np.float32),
        "B": (rng.standard_normal((dirs, 2 * g * hidden)) * 0.3).astype(np.float32),
        "sequence_lens": rng.integers(1, steps + 1, size=batch).astype(np.int32),
        "initial_h": rng.standard_normal(h_shape).astype(np.float32),
    }
    if not cfg["lens"]:
        feeds["sequence_lens"] = np.full(batch, steps, np.int32)
    names = ["X", "W", "R", "B", "sequence_lens", "initial_h"]
    outputs = ["Y", "Y_h"]
    if kind == "LSTM":
        feeds["initial_c"] = rng.standard_normal(h_shape).astype(np.float32)
        feeds["P"] = (rng.standard_normal((dirs, 3 * hidden)) * 0.3).astype(np.float32)
        names += ["initial_c", "P"]
        outputs.append("Y_c")
    attrs: dict = {"hidden_size": hidden, "direction": cfg["direction"], "layout": layout}
    if cfg["activations"]:
        attrs["activations"] = cfg["activations"][: len(DEFAULTS[kind])] * dirs
        attrs["activation_alpha"] = [0.7] * len(attrs["activations"])
        attrs["activation_beta"] = [0.2] * len(attrs["activations"])
    if cfg["clip"]:
        attrs["clip"] = 1.5
    if kind == "LSTM" and cfg["flag"]:
        attrs["input_forget"] = 1
    if kind == "GRU" and cfg["flag"]:
        attrs["linear_before_reset"] = 1
    node = helper.make_node(kind, names, outputs, **attrs)
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
              for n, v in ((n, feeds[n]) for n in names)]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs]
    graph = helper.make_graph([node], "rec", inputs, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), feeds


CONFIGS = st.fixed_dictionaries({
    "seed": st.integers(0, 10_000),
    "steps": st.integers(1, 5),
    "batch": st.integers(1, 3),
    "hidden": st.integers(1, 4),
    "direction": st.sampled_from(["forward", "reverse", "bidirectional"]),
    "layout": st.sampled_from([0, 1]),
    "lens": st.booleans(),
    "activations": st.sampled_from([None, ["LeakyRelu", "HardSigmoid", "Tanh"],
                                    ["Sigmoid", "ScaledTanh", "Affine"], ["HardSigmoid", "Relu", "Softsign"]]),
    "clip": st.booleans(),
    "flag": st.booleans(),
})


def check_against_onnxruntime(kind: str, cfg: dict) -> bool:
    """Whether amanda's outputs equal onnxruntime's (False when onnxruntime refuses the node)."""
    model, feeds = build(kind, cfg)
    try:
        expected = onnxruntime_outputs(model, feeds)
    except Exception:  # onnxruntime does not implement every attribute combination
        return False
    names = [o.name for o in model.graph.output]
    got = amanda_outputs(model, feeds)
    for name, want, have in zip(names, expected, got):
        np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-5, err_msg=f"{kind} {name} {cfg}")
    return True


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@settings(max_examples=40, deadline=None)
@given(cfg=CONFIGS)
def test_recurrent_kernels_match_onnxruntime(kind: str, cfg: dict) -> None:
    """Every configuration onnxruntime runs gives the same Y, Y_h (and Y_c) in amanda."""
    check_against_onnxruntime(kind, cfg)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_the_features_onnxruntime_covers_are_compared(kind: str) -> None:
    """Sequence lengths, reverse and bidirectional runs, clip and custom activations are each
    compared against onnxruntime at least once (so the property above is not vacuous)."""
    base = {"seed": 1, "steps": 4, "batch": 3, "hidden": 2, "direction": "forward", "layout": 0,
            "lens": False, "activations": None, "clip": False, "flag": False}
    variants = [{}, {"lens": True}, {"direction": "reverse", "lens": True},
                {"direction": "bidirectional", "lens": True}, {"clip": True},
                {"activations": ["LeakyRelu", "HardSigmoid", "Tanh"]}]
    ran = [check_against_onnxruntime(kind, {**base, **v}) for v in variants]
    assert all(ran), ran


def test_lstm_layout_one_is_the_transpose_of_layout_zero() -> None:
    """With layout=1 every input and output is batch-major; values equal the layout-0 run."""
    cfg = {"seed": 3, "steps": 4, "batch": 2, "hidden": 3, "direction": "bidirectional", "layout": 0,
           "lens": True, "activations": None, "clip": False, "flag": False}
    m0, f0 = build("LSTM", cfg)
    m1, f1 = build("LSTM", {**cfg, "layout": 1})
    f1 = dict(f0, X=f0["X"].swapaxes(0, 1), initial_h=f0["initial_h"].swapaxes(0, 1),
              initial_c=f0["initial_c"].swapaxes(0, 1))
    with amanda.Session(from_onnx(m0), threads=1) as s:
        y0, h0, c0 = s.run(["Y", "Y_h", "Y_c"], f0)
    with amanda.Session(from_onnx(m1), threads=1) as s:
        y1, h1, c1 = s.run(["Y", "Y_h", "Y_c"], f1)
    np.testing.assert_array_equal(y1, np.transpose(y0, (2, 0, 1, 3)))
    np.testing.assert_array_equal(h1, h0.swapaxes(0, 1))
    np.testing.assert_array_equal(c1, c0.swapaxes(0, 1))


def test_lstm_step_matches_the_textbook_equations() -> None:
    """One LSTM step with peepholes equals the ONNX equations written out in numpy."""
    cfg = {"seed": 5, "steps": 1, "batch": 2, "hidden": 3, "direction": "forward", "layout": 0,
           "lens": False, "activations": None, "clip": False, "flag": False}
    model, f = build("LSTM", cfg)
    with amanda.Session(from_onnx(model), threads=1) as s:
        _, h, c = s.run(["Y", "Y_h", "Y_c"], f)
    n = 3
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    x, w, r, b = f["X"][0].astype(np.float64), f["W"][0], f["R"][0], f["B"][0]
    h0, c0, p = f["initial_h"][0], f["initial_c"][0], f["P"][0]
    gates = x @ w.T + h0 @ r.T + b[:4 * n] + b[4 * n:]
    i = sig(gates[:, :n] + p[:n] * c0)
    fg = sig(gates[:, 2 * n:3 * n] + p[2 * n:] * c0)
    cell = fg * c0 + i * np.tanh(gates[:, 3 * n:])
    o = sig(gates[:, n:2 * n] + p[n:2 * n] * cell)
    np.testing.assert_allclose(c[0], cell, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h[0], o * np.tanh(cell), rtol=1e-5, atol=1e-6)


def test_an_unknown_activation_is_an_execution_error() -> None:
    """An activation name ONNX does not define fails with the op's path, not a KeyError."""
    cfg = {"seed": 0, "steps": 2, "batch": 1, "hidden": 2, "direction": "forward", "layout": 0,
           "lens": False, "activations": ["Frobnicate"], "clip": False, "flag": False}
    model, feeds = build("RNN", cfg)
    with amanda.Session(from_onnx(model), threads=1) as s, pytest.raises(amanda.ExecutionError, match="Frobnicate"):
        s.run(["Y"], feeds)
