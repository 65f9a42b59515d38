"""``dump(m, path, functions="modules")`` writes each repeated module as an ONNX model-local
function called once per instance, with its weights passed as inputs: onnxruntime runs the file
and agrees with the unfolded export (and torch), and ``load`` gives back the same tree."""

from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import amanda  # noqa: E402
from amanda.containers.container import Container  # noqa: E402
from amanda.errors import ArgumentError, FormatError  # noqa: E402
from amanda.io.onnx import dump_onnx, load_onnx, to_onnx  # noqa: E402
from tests.fixtures.onnx import hierarchy_models as fx  # noqa: E402

SELF = amanda.SELF
DOMAIN = "amanda.modules"


def _run(path, names, feeds) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(names, feeds)


def _calls(proto) -> dict[str, list[str]]:
    """Function name -> the names of the nodes calling it."""
    found: dict[str, list[str]] = {}
    for node in proto.graph.node:
        if node.domain == DOMAIN:
            found.setdefault(node.op_type, []).append(node.name)
    return found


# which module instances torch's two exporters let share one body, in each fixture (by class or,
# for TorchScript, which records no classes, by computation alone, the function named by the
# first instance's name), worked out by reading the exports. GPT-2's and BERT's dynamo exports
# compute the attention mask once inside the first block and read it in the second, so their
# blocks differ and only the parts inside are folded; ResNet's layer3 and layer4 hold one
# BasicBlock each, so the outermost repeated module is the stage.
FOLDED = {
    ("gpt2", "dynamo"): {"GPT2MLP": ["/transformer/h.0/mlp", "/transformer/h.1/mlp"],
                         "Conv1D": ["/transformer/h.0/attn/c_attn", "/transformer/h.1/attn/c_attn"]},
    ("gpt2", "torchscript"): {"h": ["/transformer/h.0", "/transformer/h.1"]},
    ("vit", "dynamo"): {"Block": ["/blocks/blocks.0", "/blocks/blocks.1"]},
    ("vit", "torchscript"): {"blocks": ["/blocks/blocks.0", "/blocks/blocks.1"]},
    ("resnet", "dynamo"): {"Sequential": ["/layer3", "/layer4"]},
    ("resnet", "torchscript"): {"layer2": ["/layer2/layer2.0", "/layer3", "/layer4"]},
    ("bert", "dynamo"): {"BertOutput": ["/encoder/layer.0/output", "/encoder/layer.1/output"]},
    ("bert", "torchscript"): {"layer": ["/encoder/layer.0", "/encoder/layer.1"]},
    ("mobilenet", "dynamo"): {"InvertedResidual": ["/features/features.5", "/features/features.6"]},
}

@pytest.mark.parametrize(("model", "kind"), fx.CASES)
def test_repeated_modules_become_functions_that_onnxruntime_runs(model: str, kind: str, tmp_path) -> None:
    """Every function is called at least twice and replaces a run of nodes; onnxruntime's
    results on the folded file equal those on the unfolded one and torch's; loading the
    folded file gives the same tree (paths, types, attributes, uids) as the model dumped."""
    tree = amanda.load(fx.path(model, kind))
    flat, folded = tmp_path / "flat.onnx", tmp_path / "folded.onnx"
    amanda.dump(tree, flat)
    amanda.dump(tree, folded, functions="modules")
    proto = onnx.load(folded)
    calls = _calls(proto)
    assert calls and all(len(names) >= 2 for names in calls.values())
    assert {f.name for f in proto.functions} == set(calls) and {f.domain for f in proto.functions} == {DOMAIN}
    assert len(proto.graph.node) < len(onnx.load(flat).graph.node)
    for name, names in FOLDED.get((model, kind), {}).items():
        assert calls[name] == names
    feeds, outputs = fx.feeds(model), fx.info(model)["outputs"]
    for ours, unfolded, theirs in zip(_run(folded, outputs, feeds), _run(flat, outputs, feeds), fx.expected(model),
                                      strict=True):
        np.testing.assert_allclose(ours, unfolded, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    again = amanda.load(folded)
    assert again == tree
    assert [c.uid for c in fx.containers(again).values()] == [c.uid for c in fx.containers(tree).values()]


def test_weights_are_passed_to_each_call_as_inputs() -> None:
    """A call reads its own module's weights: the file's initializers, by name (a weight the
    exporter transposed, named ``val_<n>``, among them)."""
    proto = to_onnx(amanda.load(fx.path("vit", "dynamo")), functions="modules")
    calls = [n for n in proto.graph.node if n.domain == DOMAIN]
    initializers = {t.name for t in proto.graph.initializer}
    for call, block in zip(calls, ("blocks.0", "blocks.1"), strict=True):
        weights = [name for name in call.input if name in initializers]
        assert {f"{block}.norm1.weight", f"{block}.attn.qkv.bias", f"{block}.mlp.fc1.bias"} <= set(weights)
        assert all(not w.startswith("blocks.") or w.startswith(block + ".") for w in weights)


def _block(name: str, weight: np.ndarray, activation: str = "Relu") -> Container:
    """x @ weight, then the activation: a module of type Block holding its weight."""
    return Container(
        "Block", name, inputs=["x"], outputs=["y"],
        children=[amanda.op("Constant", "weight", [], ["output"], attrs={"value": weight, "initializer": True}),
                  amanda.op("MatMul", "matmul", ["A", "B"], ["Y"]), amanda.op(activation, "act", ["X"], ["Y"])],
        edges=[((SELF, "x"), (("matmul",), "A")), ((("weight",), "output"), (("matmul",), "B")),
               ((("matmul",), "Y"), (("act",), "X")), ((("act",), "Y"), (SELF, "y"))],
    )


def _four_blocks() -> tuple[Container, list[np.ndarray]]:
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal((4, 4)).astype(np.float32) for _ in range(4)]
    blocks = [_block(f"b{k}", w, "Tanh" if k == 2 else "Relu") for k, w in enumerate(weights)]
    edges = [((SELF, "x"), (("b0",), "x")), ((("b3",), "y"), (SELF, "y"))]
    edges += [(((f"b{k}",), "y"), ((f"b{k + 1}",), "x")) for k in range(3)]
    model = Container(
        None, "four", inputs=[amanda.Port("x", attrs={"dtype": "float32", "shape": (2, 4)})],
        outputs=[amanda.Port("y", attrs={"dtype": "float32", "shape": (2, 4)})], children=blocks, edges=edges,
        attrs={"namespace": "amanda/onnx/17"},
    )
    return model, weights


def test_three_identical_blocks_share_a_function_and_the_different_one_stays_inline(tmp_path) -> None:
    """Blocks 0, 1 and 3 (MatMul, Relu) are three calls of one function ``Block``; block 2
    (MatMul, Tanh) is written as its ops; the file computes numpy's result and loads back as
    the tree the unfolded file gives: the blocks and their ops, with their uids."""
    model, weights = _four_blocks()
    target = tmp_path / "four.onnx"
    dump_onnx(model, target, functions="modules")
    proto = onnx.load(target)
    assert _calls(proto) == {"Block": ["/b0", "/b1", "/b3"]}
    (function,) = proto.functions
    assert [n.op_type for n in function.node] == ["MatMul", "Relu"]
    assert len(function.input) == 2  # the data and the weight
    assert [n.op_type for n in proto.graph.node] == ["Block", "Block", "MatMul", "Tanh", "Block"]
    initializers = {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer}
    calls = [n for n in proto.graph.node if n.domain == DOMAIN]
    for call, k in zip(calls, (0, 1, 3), strict=True):  # each call is passed its own block's weight
        assert np.array_equal(initializers[call.input[1]], weights[k])
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    expected = x
    for k, w in enumerate(weights):
        expected = np.tanh(expected @ w) if k == 2 else np.maximum(expected @ w, 0)
    (got,) = _run(target, ["y"], {"x": x})
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    dump_onnx(model, tmp_path / "flat.onnx")
    again = amanda.load(target)
    assert again == amanda.load(tmp_path / "flat.onnx")  # what the unfolded file gives
    assert [(c.name, c.type, c.uid) for c in again.children] == [(c.name, c.type, c.uid) for c in model.children]
    assert [[(op.name, op.type, op.uid) for op in c.children] for c in again.children] == [
        [(op.name, op.type, op.uid) for op in c.children] for c in model.children]
    (ours,) = amanda.Session(again).run(["y"], {"x": x})
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)


def test_a_model_without_modules_is_written_as_before() -> None:
    relu = amanda.op("Relu", "relu", ["X"], ["Y"])
    flat = Container(None, "g", inputs=[amanda.Port("x", attrs={"dtype": "float32", "shape": (2,)})],
                     outputs=[amanda.Port("y", attrs={"dtype": "float32", "shape": (2,)})], children=[relu],
                     edges=[("g:x", "relu:X"), ("relu:Y", "g:y")], attrs={"namespace": "amanda/onnx/17"})
    assert to_onnx(flat, functions="modules") == to_onnx(flat)


@pytest.mark.parametrize("call", [
    lambda m, p: amanda.dump(m, p, functions="module"),
    lambda m, p: dump_onnx(m, p, functions="Modules"),
    lambda m, p: to_onnx(m, functions="modul"),
])
def test_a_misspelt_functions_option_is_refused_with_the_choices(call, tmp_path) -> None:
    model, _ = _four_blocks()
    with pytest.raises(ArgumentError) as info:
        call(model, tmp_path / "m.onnx")
    assert info.value.path == "functions" and "'modules'" in str(info.value) and "did you mean" in str(info.value)
    assert not (tmp_path / "m.onnx").exists()


def test_functions_is_refused_for_text_documents(tmp_path) -> None:
    model, _ = _four_blocks()
    with pytest.raises(ArgumentError) as info:
        amanda.dump(model, tmp_path / "m.yaml", functions="modules")
    assert info.value.path == "functions"
    with pytest.raises(ArgumentError):
        amanda.dump(model, tmp_path / "m.onnx", functions=True)


def _cut(record: list) -> list:
    return record[:1]


def _bad_index(record: list) -> list:
    record[0][3] = [99]  # a metadata entry of the body node it does not have
    return record


def _bad_outputs(record: list) -> list:
    record[1][1] = []
    return record


@pytest.mark.parametrize("spoil", [_cut, _bad_index, _bad_outputs, None])
def test_a_call_whose_record_does_not_fit_is_a_format_error(spoil, tmp_path) -> None:
    """The record of an instance's names is checked before any node is put back: a short one,
    one naming a metadata entry the body lacks, one with the wrong outputs, or no JSON at all."""
    model, _ = _four_blocks()
    proto = to_onnx(model, functions="modules")
    call = next(n for n in proto.graph.node if n.domain == DOMAIN)
    entry = next(e for e in call.metadata_props if e.key == "amanda.module_instance")
    entry.value = json.dumps(spoil(json.loads(entry.value))) if spoil else "not json"
    target = tmp_path / "bad.onnx"
    onnx.save(proto, target)
    with pytest.raises(FormatError) as info:
        amanda.load(target)
    assert info.value.path == "/b0" and "bad.onnx" in str(info.value)


def test_functions_with_external_data(tmp_path) -> None:
    """The folded model's weights can go to a data file like any model's: onnxruntime reads it,
    and, its weights read in (lazy ones are equal only to the same file's), it loads back as the
    same tree."""
    tree = amanda.load(fx.path("vit", "dynamo"))
    target = tmp_path / "vit.onnx"
    report = dump_onnx(tree, target, functions="modules", external_data=True, size_threshold=64)
    assert report.data is not None
    assert _calls(onnx.load(target, load_external_data=False)) == {"Block": ["/blocks/blocks.0", "/blocks/blocks.1"]}
    (ours,) = _run(target, fx.info("vit")["outputs"], fx.feeds("vit"))
    np.testing.assert_allclose(ours, fx.expected("vit")[0], rtol=1e-4, atol=1e-5)
    assert load_onnx(target, lazy=False) == tree
