"""RNN, GRU and LSTM: gradients of every input (X, W, R, B, initial states, peepholes) agree
with central finite differences in float64, every direction and attribute."""

from __future__ import annotations

import numpy as np
import pytest

from amanda import ops
from tests.autodiff.fd import check

T, B, IN, H = 3, 2, 2, 2
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def feeds_for(kind: str, dirs: int, seed: int, layout: int = 0, state: bool = True, bias: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    g = GATES[kind]
    feeds = {"x": rng.standard_normal((B, T, IN) if layout else (T, B, IN)),
             "w": rng.standard_normal((dirs, g * H, IN)) * 0.5, "r": rng.standard_normal((dirs, g * H, H)) * 0.5}
    if bias:
        feeds["b"] = rng.standard_normal((dirs, 2 * g * H)) * 0.5
    if state:
        shape = (B, dirs, H) if layout else (dirs, B, H)
        feeds["h0"] = rng.standard_normal(shape)
        if kind == "LSTM":
            feeds["c0"] = rng.standard_normal(shape)
    return feeds


def run(kind: str, feeds: dict, lens: np.ndarray | None, outputs: tuple = (0, 1, 2), **attrs) -> float:
    def build(x, w, r, b=None, h0=None, c0=None, p=None):
        args = [x, w, r, b, lens, h0] + ([c0, p] if kind == "LSTM" else [])
        outs = getattr(ops, kind)(*args, hidden_size=H, **attrs)
        picked = [o for j, o in enumerate(outs) if j in outputs]
        flat = [ops.Reshape(o, np.array([-1], np.int64)) for o in picked]
        return flat[0] if len(flat) == 1 else ops.Concat(*flat, axis=0)

    return check(build, feeds)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions_with_sequence_lengths_and_initial_states(kind, direction):
    """Every direction; sequences of different lengths (a finished one keeps its state and
    writes zeros); Y, Y_h (and Y_c) all read by the loss."""
    dirs = 2 if direction == "bidirectional" else 1
    run(kind, feeds_for(kind, dirs, 0), np.array([3, 2], np.int32), direction=direction)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_batch_first_layout_without_states_or_bias(kind):
    """layout 1 (batch first), no initial state, no bias, only Y_h read."""
    run(kind, feeds_for(kind, 2, 1, layout=1, state=False, bias=False), None, outputs=(1,), layout=1,
        direction="bidirectional")


@pytest.mark.parametrize(("kind", "activations", "alpha", "beta"), [
    ("RNN", ["Affine"], [0.7], [0.2]),
    ("RNN", ["ScaledTanh", "LeakyRelu"], [1.1, 0.1], [0.9]),
    ("GRU", ["HardSigmoid", "Softsign"], [0.3], [0.4]),
    ("LSTM", ["Sigmoid", "Elu", "Softplus"], [0.8], []),
])
def test_activation_attributes(kind, activations, alpha, beta):
    """The activations attribute with alpha and beta consumed in order, as the kernel reads them."""
    dirs = len(activations) // {"RNN": 1, "GRU": 2, "LSTM": 3}[kind]
    direction = "bidirectional" if dirs == 2 else "forward"
    run(kind, feeds_for(kind, dirs, 2), None, activations=activations, activation_alpha=alpha, activation_beta=beta,
        direction=direction)


def test_lstm_peepholes_input_forget_and_clip():
    """LSTM with peepholes (P gets a gradient), input_forget and a clip wide enough to bind only
    some gates."""
    feeds = {**feeds_for("LSTM", 1, 3), "p": np.random.default_rng(4).standard_normal((1, 3 * H))}
    run("LSTM", feeds, np.array([2, 3], np.int32), input_forget=1, clip=1.5)


@pytest.mark.parametrize("linear_before_reset", [0, 1])
def test_gru_linear_before_reset(linear_before_reset):
    """GRU's two placements of the reset gate."""
    run("GRU", feeds_for("GRU", 2, 5), None, direction="bidirectional", linear_before_reset=linear_before_reset)
