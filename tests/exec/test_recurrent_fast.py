"""The recurrent cells' fast path (default activations, no clip, full sequences) against
onnxruntime: every direction and layout, optional inputs given or left out, both GRU
variants, weights fed or held as the plan's constants, in float32 and float64."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

import amanda  # noqa: E402
from amanda.exec.kernels.recurrent import _settings  # noqa: E402
from amanda.exec.kernels.recurrent_fast import fits_fast_path  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
OPTIONAL = ["B", "sequence_lens", "initial_h", "initial_c"]


def build(kind: str, direction: str, layout: int, given: set[str], lbr: int, constants: bool,
          dtype: type = np.float32, seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A one-node model and its feeds; ``given`` names the optional inputs present, ``constants``
    puts W, R and B in initializers (the plan's read-only constants) instead of feeds."""
    rng = np.random.default_rng(seed)
    steps, batch, size, hidden = 4, 3, 5, 6
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[kind]
    state = (dirs, batch, hidden)
    values = {
        "X": rng.standard_normal((steps, batch, size)),
        "W": rng.standard_normal((dirs, g * hidden, size)) * 0.5,
        "R": rng.standard_normal((dirs, g * hidden, hidden)) * 0.5,
        "B": rng.standard_normal((dirs, 2 * g * hidden)) * 0.3,
        "sequence_lens": np.full(batch, steps, np.int32),
        "initial_h": rng.standard_normal(state),
        "initial_c": rng.standard_normal(state),
    }
    values = {k: v if v.dtype == np.int32 else v.astype(dtype) for k, v in values.items()}
    if layout:  # batch-major: the same values, X and the states transposed
        values.update({k: np.ascontiguousarray(np.swapaxes(values[k], 0, 1)) for k in ("X", "initial_h", "initial_c")})
    names = ["X", "W", "R"] + [n for n in OPTIONAL if n != "initial_c" or kind == "LSTM"]
    inputs = [n if n in ("X", "W", "R") or n in given else "" for n in names]
    while inputs[-1] == "":
        inputs.pop()
    outputs = ["Y", "Y_h"] + (["Y_c"] if kind == "LSTM" else [])
    attrs: dict = {"hidden_size": hidden, "direction": direction, "layout": layout}
    if kind == "GRU":
        attrs["linear_before_reset"] = lbr
    node = helper.make_node(kind, inputs, outputs, **attrs)
    stored = {"W", "R", "B"} if constants else set()
    feeds = {n: values[n] for n in inputs if n and n not in stored}
    init = [numpy_helper.from_array(values[n], n) for n in inputs if n in stored]
    graph = helper.make_graph(
        [node], "rec",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in feeds.items()],
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), None) for n in outputs],
        init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), feeds


def _batch_major(name: str, value: np.ndarray) -> np.ndarray:
    """A layout-0 output as layout 1 gives it."""
    return np.transpose(value, (2, 0, 1, 3)) if name == "Y" else np.swapaxes(value, 0, 1)


def _check(kind: str, direction: str, layout: int, given: set[str], lbr: int, constants: bool) -> None:
    """amanda equals onnxruntime, which runs layout 0 only (layout 1 is compared transposed)."""
    reference, ref_feeds = build(kind, direction, 0, given, lbr, constants)
    want = ort.InferenceSession(reference.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, ref_feeds)
    model, feeds = build(kind, direction, layout, given, lbr, constants)
    names = [o.name for o in model.graph.output]
    if layout:
        want = [_batch_major(n, v) for n, v in zip(names, want)]
    with amanda.Session(from_onnx(model), threads=1) as session:
        for _ in range(2):  # the second run reads the weights' kept layouts
            for name, got, expected in zip(names, session.run(names, feeds), want):
                np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, err_msg=f"{kind} {name}")


CASES = list(itertools.product(["forward", "reverse", "bidirectional"], [0, 1]))


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize(("direction", "layout"), CASES)
def test_the_fast_path_matches_onnxruntime(kind: str, direction: str, layout: int) -> None:
    """Every direction and layout, with every optional input and with none, weights fed and
    held as constants (a GRU both with and without ``linear_before_reset``)."""
    for given, constants in ((set(OPTIONAL), True), (set(), False), ({"sequence_lens", "initial_h"}, True)):
        for lbr in ((0, 1) if kind == "GRU" else (0,)):
            _check(kind, direction, layout, given, lbr, constants)


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])
def test_float64_layers_take_the_fast_path_too(kind: str) -> None:
    """A float64 layer gives onnxruntime's float32 result to float32 precision."""
    model, feeds = build(kind, "bidirectional", 0, set(OPTIONAL), 1, False, np.float64)
    model32, feeds32 = build(kind, "bidirectional", 0, set(OPTIONAL), 1, False, np.float32)
    want = ort.InferenceSession(model32.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds32)
    with amanda.Session(from_onnx(model), threads=1) as session:
        got = session.run([o.name for o in model.graph.output], feeds)
    for have, expected in zip(got, want):
        assert have.dtype == np.float64
        np.testing.assert_allclose(have, expected, rtol=1e-4, atol=1e-5)


def _fits(kind: str, attrs: dict, x: np.ndarray, arrays: tuple, lens: object, p: object) -> bool:
    """fits_fast_path of a layer with these attributes (read as the kernel reads them)."""
    return fits_fast_path(kind, _settings(kind, attrs, arrays[0].shape[0])[2], x, arrays, lens, p)


def test_which_layers_fit_the_fast_path() -> None:
    """Default cells over full sequences fit; custom activations, clip, a shorter sequence,
    peepholes, ``input_forget``, mixed dtypes, integer data and zero steps do not."""
    x = np.zeros((3, 2, 4), np.float32)
    w = np.zeros((1, 8, 4), np.float32)
    arrays = (w, w, None, None, None)
    assert _fits("LSTM", {}, x, arrays, None, None)
    assert _fits("GRU", {"linear_before_reset": 1}, x, arrays, np.array([3, 3]), None)
    assert not _fits("RNN", {"activations": ["Relu"]}, x, arrays, None, None)
    assert not _fits("RNN", {"clip": 2.0}, x, arrays, None, None)
    assert not _fits("GRU", {}, x, arrays, np.array([3, 2]), None)
    assert not _fits("LSTM", {}, x, arrays, None, np.zeros((1, 6), np.float32))
    assert not _fits("LSTM", {"input_forget": 1}, x, arrays, None, None)
    assert not _fits("GRU", {}, x, (w.astype(np.float64), w, None, None, None), None, None)
    assert not _fits("RNN", {}, x.astype(np.int32), (w.astype(np.int32),) * 2, None, None)
    assert not _fits("RNN", {}, x[:0], arrays, None, None)
    big = np.zeros((2, 4 * 64, 4), np.float32), np.zeros((2, 4 * 64, 64), np.float32)
    assert not _fits("LSTM", {"direction": "bidirectional"}, x, (*big, None, None, None), None, None)  # 2 of 64
