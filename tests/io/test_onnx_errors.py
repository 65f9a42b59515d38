"""ONNX errors: bad files and bad graphs raise FormatError saying what and where, nothing else."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper

import amanda
from amanda import AmandaError, FormatError
from amanda.io.onnx import dump_onnx, from_onnx, load_onnx
from amanda.io.onnx.values import require_onnx
from tests.fixtures.onnx import onnx_models as models

vi = helper.make_tensor_value_info
MLP_BYTES = models.mlp().SerializeToString()


def _graph_model(nodes, outputs=("y",), inputs=("x",), opsets=None, inits=()):
    graph = helper.make_graph(
        nodes,
        "main",
        [vi(n, TensorProto.FLOAT, [2]) for n in inputs],
        [vi(n, TensorProto.FLOAT, [2]) for n in outputs],
        list(inits),
    )
    return models.model(graph, opsets)


def test_corrupt_file_names_the_file(tmp_path):
    """Bytes that are not a ModelProto raise FormatError naming the file."""
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\x0a\xff\xff\xff\xff\x0f garbage")
    with pytest.raises(FormatError, match="junk.onnx: not a readable ONNX model"):
        amanda.load(path)


def test_truncated_file_raises_format_error(tmp_path):
    """A file cut in the middle of its graph raises FormatError naming the file."""
    path = tmp_path / "cut.onnx"
    path.write_bytes(MLP_BYTES[: len(MLP_BYTES) // 2])
    with pytest.raises(FormatError, match="cut.onnx"):
        load_onnx(path)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, len(MLP_BYTES) - 1))
def test_any_truncation_loads_or_raises_an_amanda_error(cut):
    """Every prefix of a model file gives a container or an AmandaError, never another exception."""
    model = onnx.ModelProto()
    try:
        model.ParseFromString(MLP_BYTES[:cut])
    except Exception:  # noqa: BLE001 - what protobuf refuses, _parse reports (tested above)
        return
    try:
        result = from_onnx(model, source="cut.onnx")
    except AmandaError as exc:
        assert "cut.onnx" in str(exc)
    else:
        assert isinstance(result, amanda.Container)


@pytest.mark.parametrize("version", [0, 2, 99])
def test_unsupported_ir_version(version):
    """An IR version outside 3..onnx.IR_VERSION raises FormatError saying which versions are read."""
    model = models.mlp()
    model.ir_version = version
    with pytest.raises(
        FormatError, match=f"unsupported ONNX IR version {version}: amanda reads IR versions 3 to"
    ):
        from_onnx(model, source="m.onnx")


def test_missing_graph_and_opsets():
    """A model without a graph, or importing no opset, is refused."""
    with pytest.raises(FormatError, match="has no graph"):
        from_onnx(onnx.ModelProto(ir_version=10))
    model = models.mlp()
    del model.opset_import[:]
    with pytest.raises(FormatError, match="imports no opset"):
        from_onnx(model)


def test_undefined_value_names_node_value_and_graph():
    """A node reading a value nobody defines raises FormatError naming the node, the value and the graph."""
    model = _graph_model([helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")])
    with pytest.raises(FormatError) as info:
        from_onnx(model, source="m.onnx")
    message = str(info.value)
    assert message.startswith("m.onnx: graph 'main': node 'adder' (Add) reads 'ghost'")
    assert info.value.path == ("main", "adder")


def test_undefined_graph_output_and_body_value():
    """An output nobody produces, or a body reading an unknown value, is reported with its graph path."""
    with pytest.raises(FormatError, match="graph 'main' has output 'nowhere'"):
        from_onnx(_graph_model([helper.make_node("Relu", ["x"], ["y"])], outputs=("y", "nowhere")))
    then = helper.make_graph(
        [helper.make_node("Neg", ["ghost"], ["t"], name="neg")],
        "then",
        [],
        [vi("t", TensorProto.FLOAT, [2])],
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"], name="neg2")],
        "else",
        [],
        [vi("e", TensorProto.FLOAT, [2])],
    )
    nodes = [
        helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other)
    ]
    graph = helper.make_graph(
        nodes,
        "main",
        [vi("x", TensorProto.FLOAT, [2]), vi("c", TensorProto.BOOL, [])],
        [vi("y", TensorProto.FLOAT, [2])],
    )
    with pytest.raises(
        FormatError, match=r"graph 'main/branch/then_branch': node 'neg' \(Neg\) reads 'ghost'"
    ):
        from_onnx(models.model(graph))


def test_values_defined_twice_and_undeclared_domains():
    """A value assigned twice, or a node of a domain opset_import lacks, raises FormatError."""
    twice = _graph_model(
        [
            helper.make_node("Relu", ["x"], ["y"], name="a"),
            helper.make_node("Neg", ["x"], ["y"], name="b"),
        ]
    )
    with pytest.raises(FormatError, match="value 'y' is defined twice"):
        from_onnx(twice)
    custom = _graph_model([helper.make_node("Fancy", ["x"], ["y"], name="f", domain="com.example")])
    with pytest.raises(FormatError, match="domain 'com.example', which opset_import does not list"):
        from_onnx(custom)
    future = _graph_model([helper.make_node("Relu", ["x"], ["y"])], opsets={"": 999})
    with pytest.raises(FormatError, match="opset 999 of ai.onnx is newer"):
        from_onnx(future)


def test_function_attribute_reference_outside_a_function():
    """An attribute that refers to a function attribute in a main graph is refused."""
    node = helper.make_node("Softmax", ["x"], ["y"], name="soft")
    node.attribute.append(
        onnx.AttributeProto(name="axis", ref_attr_name="ax", type=onnx.AttributeProto.INT)
    )
    with pytest.raises(FormatError, match="refers to function attribute 'ax'"):
        from_onnx(_graph_model([node]))


def test_missing_external_data_names_tensor_and_file(tmp_path):
    """A model whose external data file is gone raises FormatError naming the tensor and the file."""
    model = models.mlp()
    path = tmp_path / "m.onnx"
    onnx.save_model(
        model,
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="w.bin",
        size_threshold=0,
    )
    (tmp_path / "w.bin").unlink()
    with pytest.raises(
        FormatError, match=r"m.onnx: tensor 'W0' keeps its data in external file 'w.bin'"
    ):
        load_onnx(path)


def test_external_data_outside_the_model_directory_is_refused(tmp_path):
    """An external data location escaping the model's directory is refused, not read."""
    (tmp_path / "secret.bin").write_bytes(np.ones(128, np.float32).tobytes())
    inner = tmp_path / "model"
    inner.mkdir()
    tensor = numpy_helper.from_array(np.ones(128, np.float32), "w")
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value="../secret.bin")
    model = _graph_model([helper.make_node("Add", ["x", "w"], ["y"])], inits=[tensor])
    (inner / "m.onnx").write_bytes(model.SerializeToString())
    with pytest.raises(FormatError, match="external file '../secret.bin'"):
        load_onnx(inner / "m.onnx")


def test_unloaded_external_data_is_reported():
    """``from_onnx`` of a proto whose external data was not loaded says so."""
    tensor = numpy_helper.from_array(np.ones(4, np.float32), "w")
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value="w.bin")
    with pytest.raises(FormatError, match="tensor 'w' keeps its data in an external file"):
        from_onnx(_graph_model([helper.make_node("Add", ["x", "w"], ["y"])], inits=[tensor]))


def test_unreadable_paths(tmp_path):
    """A missing file, or a directory that does not exist, raises FormatError naming the path."""
    with pytest.raises(FormatError, match="cannot read"):
        load_onnx(tmp_path / "absent.onnx")
    c = from_onnx(models.mlp())
    with pytest.raises(FormatError, match="cannot write"):
        dump_onnx(c, tmp_path / "no" / "such" / "dir.onnx")
    with pytest.raises(FormatError, match="expected an onnx.ModelProto"):
        from_onnx(b"bytes")  # type: ignore[arg-type]


def test_missing_onnx_package_says_how_to_install(monkeypatch):
    """Without the onnx package, ONNX I/O raises FormatError pointing at the ``onnx`` extra."""
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(FormatError, match=r"pip install 'amanda\[onnx\]'"):
        require_onnx()
    with pytest.raises(FormatError, match="amanda"):
        load_onnx("whatever.onnx")
