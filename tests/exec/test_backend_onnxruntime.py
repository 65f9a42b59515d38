"""The onnxruntime device: placed parts run by onnxruntime, the rest on numpy, joined in one run
(amanda/exec/backends). References come from onnxruntime on the original file, the fixtures'
recorded torch outputs, numpy formulas in the test, or amanda's numpy executor."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import amanda
from amanda import Container, op
from amanda.errors import AmandaError, ArgumentError, ExecutionError

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from amanda.io.onnx import load_onnx  # noqa: E402
from tests.fixtures.onnx import hierarchy_models as fx  # noqa: E402
from tests.fixtures.onnx import onnx_models as models  # noqa: E402

FROM_TORCH = fx.HERE.parent / "from_torch"
NS = "amanda/onnx/17"


def _load(proto, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(proto, str(path))
    return load_onnx(path)


def _devices(session):
    return [device for _, device, *_ in session._remote.records]


@pytest.mark.parametrize("name", sorted(models.BUILDERS))
def test_onnx_fixture_models_equal_onnxruntime_and_numpy(name, tmp_path):
    proto = models.BUILDERS[name]()
    feeds = models.feeds(name)
    model = _load(proto, tmp_path)
    outputs = list(model.output_names)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no part of these falls back
        got = amanda.Session(model, backend="onnxruntime").run(outputs, feeds)
    for a, b in zip(got, models.run(proto, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    if name != "custom_domains":  # numpy has no ai.onnx.ml kernels; onnxruntime runs it above
        for a, b in zip(got, amanda.Session(model).run(outputs, feeds)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("name", "kind"), fx.CASES)
def test_hierarchy_fixtures_equal_torch(name, kind):
    model = load_onnx(fx.path(name, kind))
    session = amanda.Session(model, backend="onnxruntime")
    got = session.run(list(model.output_names), fx.feeds(name))
    for a, b in zip(got, fx.expected(name)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
    assert "onnxruntime:cpu" in _devices(session)


@pytest.mark.parametrize("name", sorted(p.stem for p in FROM_TORCH.glob("*.onnx")))
def test_torch_exports_equal_numpy(name):
    model = load_onnx(FROM_TORCH / f"{name}.onnx")
    rng = np.random.default_rng(0)
    proto = onnx.load(str(FROM_TORCH / f"{name}.onnx"))
    feeds = {}
    for i in proto.graph.input:
        dims = [d.dim_value or 2 for d in i.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
        feeds[i.name] = (rng.standard_normal(dims) if dtype.kind == "f" else rng.integers(0, 2, dims)).astype(dtype)
    outputs = list(model.output_names)
    got = amanda.Session(model, backend="onnxruntime").run(outputs, feeds)
    for a, b in zip(got, amanda.Session(model).run(outputs, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_selector_placement_sends_the_blocks_only():
    model = load_onnx(fx.path("gpt2", "dynamo"))
    session = amanda.Session(model, placement={"$..[?type=='GPT2Block']": "onnxruntime:cpu"})
    got = session.run(list(model.output_names), fx.feeds("gpt2"))
    for a, b in zip(got, fx.expected("gpt2")):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
    devices = _devices(session)
    assert "onnxruntime:cpu" in devices and "cpu:0" in devices  # embeddings and head stay on numpy


def _split_model():
    """Relu -> Swish of amanda's fused namespace (onnxruntime lacks it) -> Tanh."""
    return Container("G", "g", inputs=["x"], outputs=["y"], attrs={"namespace": NS}, children=[
        op("Relu", "r", ["X"], ["Y"]), op("Swish", "s", ["X"], ["Y"], attrs={"namespace": "amanda/fused"}),
        op("Tanh", "t", ["input"], ["output"])],
        edges=[("g:x", "r:X"), ("r:Y", "s:X"), ("s:Y", "t:input"), ("t:output", "g:y")])


def test_an_op_onnxruntime_lacks_splits_the_model_around_numpy():
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    session = amanda.Session(_split_model(), backend="onnxruntime")
    (y,) = session.run(["y"], {"x": x})
    r = np.maximum(x, 0)
    np.testing.assert_allclose(y, np.tanh(r / (1 + np.exp(-r))), rtol=1e-6)
    assert _devices(session) == ["onnxruntime:cpu", "cpu:0", "onnxruntime:cpu"]
    moved = [record[4] for record in session._remote.records]
    assert moved == [0, x.nbytes, x.nbytes]  # bytes received from another device, per part


def test_a_part_onnxruntime_refuses_falls_back_with_a_warning_naming_the_op():
    # onnxruntime has Relu kernels for float, double, int8 and int32 only; numpy's keeps int16
    g = Container("G", "g", inputs=["x"], outputs=["y"], attrs={"namespace": NS}, children=[
        op("Relu", "relu", ["X"], ["Y"])], edges=[("g:x", "relu:X"), ("relu:Y", "g:y")])
    x = np.array([-3, 0, 5], np.int16)
    session = amanda.Session(g, backend="onnxruntime", profile=True)
    with pytest.warns(UserWarning, match="Relu"):
        (y,) = session.run(["y"], {"x": x})
    assert [e.op_type for e in session.profile.events] == ["numpy fallback"]
    np.testing.assert_array_equal(y, np.array([0, 0, 5], np.int16))
    assert y.dtype == np.int16
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the refusal is remembered for this signature
        session.run(["y"], {"x": x})


def test_training_keeps_variables_on_numpy():
    w0 = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
    g = Container("G", "g", inputs=["x"], outputs=["y"], controls=["train"], attrs={"namespace": NS}, children=[
        op("Variable", "w", [], ["ref"], attrs={"namespace": "amanda/core", "value": w0}),
        op("Read", "read", ["ref"], ["value"], attrs={"namespace": "amanda/core"}),
        op("MatMul", "mm", ["A", "B"], ["Y"]),
        op("Relu", "relu", ["X"], ["Y"]),
        op("Constant", "lr", [], ["output"], attrs={"value": np.float32(0.1)}),
        op("Mul", "step", ["A", "B"], ["C"]),
        op("AssignAdd", "update", ["ref", "value"], [], attrs={"namespace": "amanda/core"})],
        edges=[("w:ref", "read:ref"), ("g:x", "mm:A"), ("read:value", "mm:B"), ("mm:Y", "relu:X"),
               ("relu:Y", "g:y"), ("read:value", "step:A"), ("lr:output", "step:B"), ("w:ref", "update:ref"),
               ("step:C", "update:value"), ("update:-1", "g:train")])
    x = np.eye(2, dtype=np.float32)
    session = amanda.Session(g, backend="onnxruntime")
    for _ in range(3):
        (y, _t) = session.run(["y", "train"], {"x": x})
    np.testing.assert_allclose(y, np.maximum(w0 * 1.1 ** 2, 0), rtol=1e-6)
    np.testing.assert_allclose(next(iter(session.state.values())), w0 * 1.1 ** 3, rtol=1e-6)
    assert set(_devices(session)) == {"onnxruntime:cpu", "cpu:0"}


def test_bad_backend_and_placement_are_named():
    g = _split_model()
    with pytest.raises(ArgumentError, match="onnxruntime"):
        amanda.Session(g, backend="onnxruntim")
    with pytest.raises(ArgumentError, match="cpu"):
        amanda.Session(g, placement={"$..[?type=='Relu']": "onnxruntime:cpux"})
    with pytest.raises(ArgumentError, match="Conv"):
        amanda.Session(g, placement={"$..[?type=='Conv']": "onnxruntime:cpu"})


def test_a_provider_that_does_not_start_is_an_error_not_a_silent_cpu_run(monkeypatch):
    """onnxruntime runs a session on its CPU provider when the asked one fails to load (CUDA
    libraries missing): amanda says so instead of reporting a CPU run as the device's."""
    class Elsewhere(ort.InferenceSession):
        def get_providers(self):
            return ["SomeOtherExecutionProvider"]

    monkeypatch.setattr(ort, "InferenceSession", Elsewhere)
    session = amanda.Session(_split_model(), backend="onnxruntime")
    with pytest.raises(ExecutionError, match="CPUExecutionProvider") as info:
        session.run(["y"], {"x": np.ones((2, 3), np.float32)})
    assert info.value.path.startswith("onnxruntime:cpu") and "SomeOtherExecutionProvider" in str(info.value)


@pytest.mark.skipif("CUDAExecutionProvider" in ort.get_available_providers(), reason="this onnxruntime has CUDA")
def test_cuda_without_its_provider_is_a_clear_error():
    with pytest.raises(ExecutionError, match="gpu") as info:
        amanda.Session(_split_model(), backend="onnxruntime:cuda")
    assert isinstance(info.value, AmandaError)


@pytest.mark.skipif("CUDAExecutionProvider" not in ort.get_available_providers(), reason="no CUDA provider")
def test_cuda_runs_the_fixture_models(tmp_path):
    for name in ("mlp", "cnn", "attention"):
        proto, feeds = models.BUILDERS[name](), models.feeds(name)
        model = _load(proto, tmp_path)
        got = amanda.Session(model, backend="onnxruntime:cuda").run(list(model.output_names), feeds)
        for a, b in zip(got, models.run(proto, feeds)):
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


@pytest.mark.skipif("CUDAExecutionProvider" not in ort.get_available_providers(), reason="no CUDA provider")
@pytest.mark.parametrize(("name", "kind"), fx.CASES)
def test_cuda_runs_the_torch_fixtures_as_torch_did(name, kind):
    """The torch exports (both exporters) on onnxruntime's CUDA provider equal torch's outputs
    (within TF32's precision: onnxruntime's CUDA provider multiplies in TF32 by default)."""
    model = load_onnx(fx.path(name, kind))
    session = amanda.Session(model, backend="onnxruntime:cuda")
    got = session.run(list(model.output_names), fx.feeds(name))
    for a, b in zip(got, fx.expected(name)):
        np.testing.assert_allclose(a, b, rtol=1e-2, atol=1e-3)
    assert "onnxruntime:cuda" in _devices(session)


@pytest.mark.parametrize("threads", [1, 3])
def test_intra_op_threads_follow_the_session_setting(threads):
    g = Container("G", "g", inputs=["x"], outputs=["y"], attrs={"namespace": NS}, children=[
        op("Relu", "relu", ["X"], ["Y"])], edges=[("g:x", "relu:X"), ("relu:Y", "g:y")])
    session = amanda.Session(g, backend="onnxruntime", threads=threads)
    session.run(["y"], {"x": np.ones(3, np.float32)})
    (runners,) = [r for _, r in session._remote._runs.values()]
    (built,) = runners[0]._sessions.values()
    assert built[0].get_session_options().intra_op_num_threads == threads


def test_device_attribute_without_backend_places_the_op():
    g = _split_model()
    placed = amanda.containers.with_attrs(g, g.select("$..[?type=='Tanh']"), device="onnxruntime:cpu")
    session = amanda.Session(placed)
    x = np.linspace(-1, 1, 6, dtype=np.float32)
    np.testing.assert_allclose(session.run(["y"], {"x": x})[0], amanda.Session(g).run(["y"], {"x": x})[0],
                               rtol=1e-6)
    assert _devices(session) == ["cpu:0", "onnxruntime:cpu"]
    numpy_only = amanda.Session(placed, backend="numpy")
    assert numpy_only._remote is None
    (y,) = numpy_only.run(["y"], {"x": x})
    np.testing.assert_allclose(y, amanda.Session(g).run(["y"], {"x": x})[0], rtol=1e-6)


def test_gradient_model_places_forward_and_backward_ops():
    from amanda import Input, layers, model, ops

    x, labels = Input("x", "float32", ("batch", 4)), Input("labels", "int64", ("batch",))
    logits = layers.Dense(8, 3, name="fc")(layers.Dense(4, 8, activation="tanh", name="hidden")(x))
    net = model([x, labels], {"loss": ops.SoftmaxCrossEntropyLoss(logits, labels)[0], "logits": logits}, name="net")
    g = amanda.grad(net, "loss", ["hidden/kernel", "fc/kernel", "x"])
    feeds = {"x": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4), "labels": np.array([0, 2])}
    session = amanda.Session(g, backend="onnxruntime")
    got = session.run(list(g.output_names), feeds)
    for a, b in zip(got, amanda.Session(g).run(list(g.output_names), feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert "onnxruntime:cpu" in _devices(session)


def test_a_run_past_its_timeout_starts_no_further_part():
    session = amanda.Session(_split_model(), backend="onnxruntime")
    x = np.ones(4, np.float32)
    session.run(["y"], {"x": x})
    with pytest.raises(ExecutionError, match="timeout"):
        session.run(["y"], {"x": x}, timeout=1e-9)


def _optimised_ops(data: bytes, tmp_path) -> dict:
    """onnxruntime's optimised graph of a model, as op type -> count."""
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimised.onnx")
    options.log_severity_level = 3
    ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    ops: dict = {}
    for node in onnx.load(options.optimized_model_filepath).graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    return ops


def _residual_norm_model():
    """x[n, t, 16] @ w + c, reshaped by x's shape, + x, LayerNormalization: with fixed
    dimensions or typed intermediate values onnxruntime fuses it otherwise than this file."""
    h = onnx.helper
    width = 16
    rng = np.random.default_rng(0)
    inits = [onnx.numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("w", (width, width)), ("c", (width,)), ("g", (width,)), ("b", (width,)))]
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "c"], ["mc"]),
             h.make_node("Shape", ["x"], ["shape"]), h.make_node("Reshape", ["mc", "shape"], ["r"]),
             h.make_node("Add", ["r", "x"], ["s"]), h.make_node("LayerNormalization", ["s", "g", "b"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", "t", width])],
                         [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", "t", width])], inits)
    proto = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    proto.ir_version = 8
    return proto


def test_a_whole_model_part_optimises_to_the_original_files_graph(tmp_path):
    from amanda.exec.backends.onnxruntime import onnx_form, part_proto

    proto = _residual_norm_model()
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 4, 16)).astype(np.float32)}
    session = amanda.Session(_load(proto, tmp_path), backend="onnxruntime")
    theirs = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(["y"], feeds)[0], theirs.run(["y"], feeds)[0], rtol=1e-5, atol=1e-5)
    (partitioning, runners), = session._remote._runs.values()
    (part,) = partitioning.parts
    form, _ = onnx_form(part, {port: feeds[name] for port, name in part.feeds.items()}, runners[0].declared)
    assert [tuple(p.attrs["shape"]) for p in form.inputs] == [("n", "t", 16)]  # the file's named dimensions
    written = part_proto(form)
    assert not written.graph.value_info
    assert _optimised_ops(written.SerializeToString(), tmp_path) == _optimised_ops(proto.SerializeToString(), tmp_path)


def test_a_feed_that_does_not_fit_the_declared_shape_keeps_its_own():
    from amanda.exec.backends.onnxruntime import _type_attrs

    value = np.zeros((2, 3), np.float32)
    assert _type_attrs(value, "x", ("n", 3)) == {"dtype": "float32", "shape": ["n", 3]}
    assert _type_attrs(value, "x", ("n", 4)) == {"dtype": "float32", "shape": [2, 3]}
    assert _type_attrs(value, "x", ("n",)) == {"dtype": "float32", "shape": [2, 3]}
    assert _type_attrs(value, "x", None) == {"dtype": "float32", "shape": [2, 3]}


@pytest.fixture
def fresh_kernel_table():
    from amanda.exec.backends import onnxruntime as backend

    backend._kernel_table.cache_clear()
    backend._kernels.cache_clear()
    yield backend
    backend._kernel_table.cache_clear()
    backend._kernels.cache_clear()


@pytest.mark.skipif(not set(ort.get_available_providers()) <= {"CPUExecutionProvider", "AzureExecutionProvider"},
                    reason="a GPU build: its listing crashes in the child too (seen with 1.31 without TensorRT)")
def test_a_gpu_build_lists_its_kernels_in_a_child_process(fresh_kernel_table, monkeypatch):
    """onnxruntime-gpu's kernel listing can crash its process (a provider library that does not
    load): with a GPU provider available the listing runs in a child, with the same result."""
    backend = fresh_kernel_table
    here = backend._kernel_table()
    backend._kernel_table.cache_clear()
    backend._kernels.cache_clear()
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert backend._kernel_table() == here
    cpu = {(d, o) for p, d, o in here if p == "CPUExecutionProvider"}
    assert backend._kernels("CUDAExecutionProvider") == cpu  # what CUDA lacks, onnxruntime runs on its CPU
    assert ("", "Relu") in cpu


def test_a_listing_that_crashes_offers_every_onnx_op(fresh_kernel_table, monkeypatch):
    backend = fresh_kernel_table
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(backend, "_LISTING", "import os; os.abort()")
    assert backend._kernels("CUDAExecutionProvider") is None
    mish, made_up = op("Mish", "m", ["X"], ["Y"]), op("NoSuchOp", "n", ["X"], ["Y"])
    assert backend.supported_op(mish, "amanda/onnx/18", "CUDAExecutionProvider")
    assert not backend.supported_op(made_up, "amanda/onnx/18", "CUDAExecutionProvider")
