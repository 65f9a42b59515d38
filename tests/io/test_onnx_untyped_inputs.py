"""ONNX export of models whose inputs declare no shape (a bare chain of layers): a clear error
naming the input and the fix, and the fix exporting dynamic axes onnxruntime runs."""

from typing import Any

import numpy as np
import pytest

import amanda
from amanda import Input, layers
from amanda.errors import FormatError
from amanda.io.onnx import dump_onnx, to_onnx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _chain() -> amanda.Container:
    return layers.seeded(layers.Dense(4, 8, activation="relu") >> layers.Dense(8, 2), seed=3)


def _numpy_mlp(chain: amanda.Container, x: np.ndarray) -> np.ndarray:
    w = {(layer, weight): chain.child(layer).child(weight).attrs["value"]
         for layer in ("dense", "dense_1") for weight in ("kernel", "bias")}
    hidden = np.maximum(x @ w["dense", "kernel"] + w["dense", "bias"], 0)
    return hidden @ w["dense_1", "kernel"] + w["dense_1", "bias"]


def _run(model: Any, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_bare_chain_export_names_the_untyped_input_and_the_fix(tmp_path) -> None:
    """to_onnx and dump_onnx of a chain whose input declares only its dtype raise a FormatError
    at that input saying to give it a shape through amanda.Input; no file is written."""
    with pytest.raises(FormatError, match=r"graph input 'x' has no shape.*amanda\.Input\('x', 'float32'") as caught:
        to_onnx(_chain())
    assert caught.value.path == "x"
    target = tmp_path / "mlp.onnx"
    with pytest.raises(FormatError, match="graph input 'x'"):
        dump_onnx(_chain(), target)
    assert not target.exists()


def test_layers_applied_to_a_typed_input_export_dynamic_axes_onnxruntime_runs() -> None:
    """The suggested fix exports an input of shape [batch, 4] that the checker accepts and that
    onnxruntime runs at several batch sizes, agreeing with numpy."""
    chain = _chain()
    x = Input("x", "float32", ("batch", 4))
    model = to_onnx(amanda.model([x], {"y": chain(x)}, name="mlp"))
    onnx.checker.check_model(model, full_check=True)
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", 4]
    rng = np.random.default_rng(0)
    for batch in (1, 5):
        data = rng.standard_normal((batch, 4)).astype(np.float32)
        np.testing.assert_allclose(_run(model, data), _numpy_mlp(chain, data), rtol=1e-5, atol=1e-6)


def test_unchecked_export_keeps_the_unknown_rank_input_onnxruntime_accepts() -> None:
    """check=False still writes the input without a shape (legal for onnxruntime), and the
    model runs and agrees with numpy."""
    chain = _chain()
    model = to_onnx(chain, check=False)
    assert not model.graph.input[0].type.tensor_type.HasField("shape")
    data = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(_run(model, data), _numpy_mlp(chain, data), rtol=1e-5, atol=1e-6)


def test_output_of_unknown_rank_behind_typed_inputs_is_still_refused() -> None:
    """With every input typed, an output whose rank ONNX's inference cannot find (Squeeze by
    axes given at run time) is an error at that output."""
    sq = amanda.op("Squeeze", "sq", inputs=["data", "axes"], outputs=["squeezed"])
    g = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs={"dtype": "float32", "shape": (2, 1, 3)}),
                                            amanda.Port("axes", attrs={"dtype": "int64", "shape": (1,)})],
                         outputs=["y"], children=[sq], attrs={"namespace": "amanda/onnx/17"},
                         edges=[("g:x", "sq:data"), ("g:axes", "sq:axes"), ("sq:squeezed", "g:y")])
    with pytest.raises(FormatError, match="graph output 'y' has no dtype or rank") as caught:
        to_onnx(g)
    assert caught.value.path == "y"
