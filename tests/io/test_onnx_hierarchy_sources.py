"""Where the module tree comes from: TensorFlow-style ``a/b/op`` names, TorchScript's
``/a/b/Op`` names (repeated calls merged, genuine ``x_1`` modules kept), torch's metadata;
the option that chooses the source, and graphs without scope information."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import amanda  # noqa: E402
from amanda.io.onnx.export import to_onnx  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402


def _model(nodes: list, inits: dict[str, np.ndarray], inputs=("x",), outputs=("y",), shape=(2, 3)) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(shape)) for n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)])


def _dense_layers() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    w = {"dense/kernel": rng.standard_normal((3, 3)).astype(np.float32),
         "dense/bias": rng.standard_normal(3).astype(np.float32),
         "dense_1/kernel": rng.standard_normal((3, 3)).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "dense/kernel"], ["h"], name="dense/MatMul"),
             helper.make_node("Add", ["h", "dense/bias"], ["h1"], name="dense/BiasAdd"),
             helper.make_node("Relu", ["h1"], ["h2"], name="dense/Relu"),
             helper.make_node("MatMul", ["h2", "dense_1/kernel"], ["h3"], name="dense_1/MatMul"),
             helper.make_node("Neg", ["h3"], ["y"], name="out")]
    return _model(nodes, w), w


def test_tensorflow_style_names_make_the_tree() -> None:
    """``dense/MatMul`` and ``dense/kernel`` sit in container ``dense`` (the kernel named
    ``kernel`` there), an op without ``/`` stays at the top, and the tree computes what numpy
    computes."""
    proto, w = _dense_layers()
    tree = from_onnx(proto)
    assert [c.name for c in tree.children] == ["dense", "dense_1", "out"]
    assert [c.name for c in tree.child("dense").children] == ["kernel", "bias", "MatMul", "BiasAdd", "Relu"]
    assert tree.child("dense").attrs["scope"] == "dense"
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    (y,) = amanda.Session(tree).run(["y"], {"x": x})
    want = -(np.maximum(x @ w["dense/kernel"] + w["dense/bias"], 0) @ w["dense_1/kernel"])
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_nested_tensorflow_scopes_take_relative_names() -> None:
    """``encoder/layer_0/dense/MatMul`` nests three containers, each named by its own part,
    each with its ``/``-joined qualified name as ``scope``."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="encoder/layer_0/dense/Relu")]
    tree = from_onnx(_model(nodes, {}))
    inner = tree.descendant(("encoder", "layer_0", "dense"))
    assert inner.attrs["scope"] == "encoder/layer_0/dense"
    assert [c.name for c in inner.children] == ["Relu"]


def _torchscript(second: str, weight: str | None) -> onnx.ModelProto:
    inits = {weight: np.ones((3, 3), np.float32)} if weight else {}
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="/block/act/Relu"),
             helper.make_node("Relu", ["a"], ["b"], name=f"/block/{second}/Relu"),
             helper.make_node("Add", ["a", "b"], ["y"], name="/block/Add")]
    if weight:
        nodes.append(helper.make_node("MatMul", ["x", weight], ["z"], name=f"/block/{second}/MatMul"))
    return _model(nodes, inits, outputs=("y", "z") if weight else ("y",), shape=(3, 3))


def test_a_second_call_joins_its_module_but_a_genuine_module_does_not() -> None:
    """TorchScript names a module's second call ``act_1``: its ops join ``act``. A module that
    really is called ``act_1`` (a weight says so: ``block.act_1.weight``) keeps its own
    container."""
    merged = from_onnx(_torchscript("act_1", None))
    assert [c.name for c in merged.child("block").children] == ["act", "Add"]
    assert [c.name for c in merged.descendant(("block", "act")).children] == ["Relu", "Relu_"]
    genuine = from_onnx(_torchscript("act_1", "block.act_1.weight"))
    assert [c.name for c in genuine.child("block").children] == ["act", "act_1", "Add"]
    assert [c.name for c in genuine.descendant(("block", "act_1")).children] == ["weight", "Relu", "MatMul"]


def test_exporter_made_ops_join_their_neighbours() -> None:
    """An op without a scope (TorchScript's ``Constant_12``) sits in the lowest container
    holding the ops it feeds; one feeding two modules sits in their common parent."""
    nodes = [helper.make_node("Constant", [], ["c"], name="Constant_12",
                              value=numpy_helper.from_array(np.float32(2.0))),
             helper.make_node("Mul", ["x", "c"], ["a"], name="/enc/scale/Mul"),
             helper.make_node("Constant", [], ["d"], name="Constant_13",
                              value=numpy_helper.from_array(np.float32(3.0))),
             helper.make_node("Mul", ["a", "d"], ["b"], name="/enc/left/Mul"),
             helper.make_node("Add", ["b", "d"], ["y"], name="/enc/right/Add")]
    tree = from_onnx(_model(nodes, {}))
    assert [c.name for c in tree.descendant(("enc", "scale")).children] == ["Constant_12", "Mul"]
    assert "Constant_13" in [c.name for c in tree.child("enc").children]
    x = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(amanda.Session(tree).run(["y"], {"x": x})[0], x * 2 * 3 + 3)


def test_metadata_wins_over_names_and_each_can_be_forced() -> None:
    """With both torch's metadata and scope-path names, ``auto`` follows the metadata; the
    option forces either source, ``False`` gives the flat graph, and a forced source the file
    lacks is a FormatError that says which."""
    node = helper.make_node("Relu", ["x"], ["y"], name="/named/Relu")
    helper.set_metadata_props(node, {"pkg.torch.onnx.name_scopes": "['', 'meta', 'relu']",
                                     "pkg.torch.onnx.class_hierarchy": "['m.Root', 'm.Block', 'aten.relu']"})
    proto = _model([node], {})
    assert [c.name for c in from_onnx(proto).children] == ["meta"]
    assert from_onnx(proto).child("meta").type == "Block"
    assert [c.name for c in from_onnx(proto, hierarchy="names").children] == ["named"]
    assert [c.name for c in from_onnx(proto, hierarchy=False).children] == ["/named/Relu"]
    plain = _model([helper.make_node("Relu", ["x"], ["y"], name="relu")], {})
    assert [c.name for c in from_onnx(plain).children] == ["relu"]  # no scopes: flat, as before
    for mode in ("metadata", "names"):
        with pytest.raises(amanda.FormatError, match=mode):
            from_onnx(plain, hierarchy=mode)


def test_a_misspelt_option_is_refused_with_the_choices() -> None:
    """An unknown ``hierarchy`` value raises an ArgumentError listing the modes, with a
    suggestion; YAML documents take no such option."""
    proto, _ = _dense_layers()
    with pytest.raises(amanda.ArgumentError, match="did you mean 'names'"):
        from_onnx(proto, hierarchy="nmaes")
    with pytest.raises(amanda.ArgumentError, match="hierarchy"):
        amanda.load("whatever.yaml", hierarchy=True)
    with pytest.raises(amanda.ArgumentError, match="hierarchy"):  # checked first: no truth value asked of it
        amanda.load("whatever.yaml", hierarchy=np.zeros((2, 2)))


def test_a_name_like_the_parents_is_renamed_and_the_exporter_name_kept() -> None:
    """``seq.0.0`` (a child ``0`` inside ``0``) becomes ``0_``; its ``scope`` keeps ``seq.0.0``,
    and export writes that name back."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="/seq/seq.0/seq.0.0/Relu")]
    tree = from_onnx(_model(nodes, {}))
    inner = tree.descendant(("seq", "0", "0_"))
    assert inner.attrs["scope"] == "seq.0.0"
    exported = to_onnx(tree)
    assert [n.name for n in exported.graph.node] == ["/seq/seq.0/seq.0.0/Relu"]
    assert from_onnx(exported).child("seq") == tree.child("seq")
