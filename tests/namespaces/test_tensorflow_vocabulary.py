"""The TensorFlow vocabularies: generated from TensorFlow's OpDefs, resolvable by name, accurate."""

import importlib.util
from pathlib import Path

import pytest

import amanda
from amanda.errors import SchemaError
from amanda.namespaces import known_namespaces, namespace
from amanda.namespaces.model_fit import validate
from amanda.namespaces.tensorflow_vocab import tensorflow_files, tensorflow_namespace

ROOT = Path(__file__).resolve().parents[2]
TF_GRAPH = ROOT / "tests" / "fixtures" / "documents" / "tensorflow_dense_graph.yaml"
REQUIRED = ["Placeholder", "Const", "VariableV2", "Assign", "AssignAdd", "Identity", "NoOp", "MatMul", "BiasAdd", "Add", "AddV2", "Sub", "Mul", "RealDiv", "Relu", "Relu6", "Sigmoid", "Tanh", "Softmax", "Conv2D", "MaxPool", "AvgPool", "FusedBatchNorm", "Reshape", "Transpose", "ConcatV2", "Mean", "Sum", "Squeeze", "ExpandDims", "Cast", "Pad", "Shape"]


def tool():
    spec = importlib.util.spec_from_file_location("gen_tf", ROOT / "tools" / "gen_tensorflow_vocabulary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("version", ["1.13.1", "2.21.0"])
def test_vocabularies_hold_the_required_ops_and_say_where_they_come_from(version):
    """Both shipped vocabularies have every op the brief names, and a source naming the generator."""
    ns = namespace(f"amanda/tensorflow/{version}")
    missing = [t for t in REQUIRED if t not in ns]
    assert missing == []
    assert "tools/gen_tensorflow_vocabulary.py" in ns.source
    assert ("op registry" in ns.source) == (version == "2.21.0")


def test_the_dense_graph_fits_its_namespace():
    """The example TensorFlow graph validates against amanda/tensorflow/1.13.1."""
    assert list(validate(amanda.load(TF_GRAPH))) == []


def test_definitions_match_tensorflow_opdefs():
    """Ports, attribute types and defaults are TensorFlow's (checked against known OpDefs)."""
    ns = namespace("amanda/tensorflow/1.13.1")
    matmul = ns.schema("MatMul")
    assert (matmul.input_names, matmul.output_names) == (("a", "b"), ("product",))
    assert {k: (a.type, a.default, a.required) for k, a in matmul.attrs.items()} == {
        "transpose_a": ("bool", False, False), "transpose_b": ("bool", False, False), "T": ("dtype", None, True)}
    assert matmul.type_constraints["T"][:3] == ("bfloat16", "float16", "float32")
    conv = ns.schema("Conv2D")
    assert conv.attr("data_format").default == "NHWC" and conv.attr("dilations").default == (1, 1, 1, 1)
    assert conv.attr("padding").required and "explicit_paddings" not in conv.attrs
    concat = ns.schema("ConcatV2")
    assert concat.inputs[-1].name == "values" and concat.inputs[-1].variadic and concat.inputs[-1].min_arity == 2
    assert "values, axis" in concat.doc
    placeholder = ns.schema("Placeholder")
    assert not placeholder.attr("shape").required and placeholder.attr("shape").default is None
    assert ns.schema("FusedBatchNorm").attr("epsilon").default == pytest.approx(0.0001)
    assert ns.schema("VariableV2").doc.startswith("ref outputs: ref")
    assert ns.schema("Split").outputs[0].variadic


def test_versions_differ_where_tensorflow_changed():
    """1.13.1 lacks what TensorFlow added later; 2.21.0 notes each addition."""
    old, new = namespace("amanda/tensorflow/1.13.1"), namespace("amanda/tensorflow/2.21.0")
    assert "FusedBatchNormV3" not in old and "FusedBatchNormV3" in new
    assert "grad_a" not in old.schema("MatMul").attrs and "grad_a" in new.schema("MatMul").attrs
    assert "grad_a, grad_b" in new.schema("MatMul").doc and "not in TensorFlow 1.13.1" in new.schema("FusedBatchNormV3").doc
    assert "exponential_avg_factor" in new.schema("FusedBatchNorm").doc


def test_registry_names_and_newest():
    """amanda/tensorflow resolves to the newest shipped version; both versions are known."""
    assert namespace("amanda/tensorflow").name == "amanda/tensorflow/2.21.0"
    assert {"amanda/tensorflow/1.13.1", "amanda/tensorflow/2.21.0"} <= set(known_namespaces())
    assert list(tensorflow_files()) == ["amanda/tensorflow/1.13.1", "amanda/tensorflow/2.21.0"]
    with pytest.raises(SchemaError):
        tensorflow_namespace("amanda/tensorflow/0.1")


def test_schema_data_maps_an_opdef_like_object():
    """The generator maps OpDef args and attrs (list args, ref args, minimums, string choices)."""
    pytest.importorskip("tensorflow")
    from tensorflow.core.framework import op_def_pb2, types_pb2

    opdef = op_def_pb2.OpDef(name="Demo")
    opdef.input_arg.add(name="values", type_attr="T", number_attr="N")
    opdef.input_arg.add(name="axis", type=types_pb2.DT_INT32)
    opdef.output_arg.add(name="out", type_attr="T", is_ref=True)
    opdef.attr.add(name="N", type="int", has_minimum=True, minimum=2)
    t = opdef.attr.add(name="T", type="type")
    t.allowed_values.list.type.extend([types_pb2.DT_FLOAT, types_pb2.DT_HALF])
    mode = opdef.attr.add(name="mode", type="string")
    mode.default_value.s = b"A"
    mode.allowed_values.list.s.extend([b"A", b"B"])
    data = tool().schema_data(opdef)
    assert [p["name"] for p in data["input_ports"]] == ["axis", "values"]
    assert data["input_ports"][1] == {"name": "values", "variadic": True, "min_arity": 2, "type_attr": "T"}
    assert data["input_ports"][0]["allowed_types"] == ["int32"]
    assert data["type_constraints"] == {"T": ["float32", "float16"]}
    assert data["attrs"]["mode"] == {"type": "string", "default": "A"}
    assert "mode is one of A, B" in data["doc"] and "ref outputs: out" in data["doc"]


def test_registry_file_is_what_the_installed_tensorflow_gives():
    """Where tensorflow-cpu 2.21.0 is installed, regenerating its vocabulary changes nothing."""
    tf = pytest.importorskip("tensorflow")
    if tf.__version__ != "2.21.0":
        pytest.skip(f"the shipped registry vocabulary is 2.21.0's, this TensorFlow is {tf.__version__}")
    assert tool().main(["--check"]) == 0


def test_wheel_opdefs_are_read_without_running_the_wheel(tmp_path):
    """The OpLists serialized in a wheel's gen_*_ops.py are parsed (ast), never executed."""
    pytest.importorskip("tensorflow")
    import zipfile

    from tensorflow.core.framework import op_def_pb2

    ops = op_def_pb2.OpList()
    matmul = ops.op.add(name="MatMul")
    matmul.input_arg.add(name="a", type_attr="T")
    matmul.output_arg.add(name="product", type_attr="T")
    matmul.attr.add(name="T", type="type")
    code = ("raise SystemExit('the wheel ran')\n"
            f"_op_def_lib = _InitOpDefLibrary({ops.SerializeToString()!r})\n")
    wheel = tmp_path / "tensorflow-1.0.0-cp37-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("tensorflow-1.0.0.dist-info/METADATA", "Name: tensorflow\n")
        archive.writestr("tensorflow/python/ops/gen_math_ops.py", code)
        archive.writestr("tensorflow/contrib/gen_other_ops.py", code.replace("MatMul", "Skipped"))
    version, opdefs = tool().opdefs_from_wheel(wheel)
    assert version == "1.0.0" and list(opdefs) == ["MatMul"]
    assert [a.name for a in opdefs["MatMul"].input_arg] == ["a"]


def test_vocabularies_hold_the_whole_registry():
    """Every op of each version's registry ships: 2.21.0's 1908 (its C registry), 1.13.1's 995 (the
    OpDefs its wheel serializes), internal and dataset ops included; each loads to a valid schema."""
    old, new = namespace("amanda/tensorflow/1.13.1"), namespace("amanda/tensorflow/2.21.0")
    assert len(new.schemas) == 1908 and len(old.schemas) == 995
    for ns, op in ((new, "MapDataset"), (new, "XlaSharding"), (old, "BoostedTreesBucketize"),
                   (new, "TensorScatterUpdate"), (old, "DecodeJpeg")):
        assert op in ns
    assert "not in TensorFlow 1.13.1" in new.schema("XlaSharding").doc


def test_several_list_args_are_one_variadic_port():
    """SparseConcat's three list inputs (indices, values, shapes) are one trailing variadic port,
    with 3 * N(>= 2) values at least and its doc naming the args in TensorFlow's order."""
    schema = namespace("amanda/tensorflow/2.21.0").schema("SparseConcat")
    assert schema.input_names == ("indices",) and schema.inputs[0].variadic
    assert schema.inputs[0].min_arity == 6 and not schema.inputs[0].homogeneous
    assert "indices, values, shapes are one variadic port indices" in schema.doc


def test_shipped_file_form_and_corrupt_files(tmp_path):
    """Files are gzip'ed JSON, a few tens of KB; a file that is not one is a SchemaError naming it."""
    from amanda.namespaces.tensorflow_vocab import DATA_DIR, vocabulary_bytes, vocabulary_data

    sizes = {p.name: p.stat().st_size for p in DATA_DIR.glob("tensorflow-*.json.gz")}
    assert set(sizes) == {"tensorflow-1.13.1.json.gz", "tensorflow-2.21.0.json.gz"}
    assert max(sizes.values()) < 200_000
    doc = {"namespace_schema": {"namespace": "amanda/tensorflow/9.0.0"}}
    assert vocabulary_data(vocabulary_bytes(doc), "x") == doc
    (tmp_path / "tensorflow-9.0.0.json.gz").write_bytes(b"not gzip")
    with pytest.raises(SchemaError, match="tensorflow-9.0.0.json.gz"):
        tensorflow_namespace("amanda/tensorflow/9.0.0", tmp_path)
    (tmp_path / "tensorflow-9.0.0.json.gz").write_bytes(vocabulary_bytes(
        {"namespace_schema": {"namespace": "amanda/tensorflow/8"}}))
    with pytest.raises(SchemaError, match="amanda/tensorflow/9.0.0"):
        tensorflow_namespace("amanda/tensorflow/9.0.0", tmp_path)


def test_importing_amanda_loads_no_tensorflow_vocabulary():
    """The vocabularies are read on first request only (importing amanda stays as fast)."""
    import subprocess
    import sys

    code = ("import gzip; calls = []; real = gzip.decompress\n"
            "gzip.decompress = lambda b: calls.append(1) or real(b)\n"
            "import amanda\n"
            "from amanda.namespaces import known_namespaces; known_namespaces()\n"
            "assert not calls, calls; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


def test_validation_names_the_op_port_and_attribute_that_do_not_fit():
    """Against the whole vocabulary: an unknown attribute (did-you-mean), an unknown port, and a
    dtype attribute outside its OpDef's allowed types are each reported at the op's path."""
    from amanda import Container, op

    graph = Container("Graph", "g", children=[
        op("Relu", "r", ["features"], ["activations"], {"T": "float32", "alpah": 0.1}),
        op("MatMul", "m", ["a", "c"], ["product"], {"T": "bool"}),
        op("SparseConcat", "s", ["indices_0"], ["output_indices", "output_values", "output_shape"],
           {"T": "float32", "N": 2, "concat_dim": 0}),
    ], attrs={"namespace": "amanda/tensorflow/2.21.0"})
    found = {(p.path[-1], p.found) for p in validate(graph)}
    assert ("r", "'alpah'") in found and ("m", "input port 'c'") in found and ("m", "'bool'") in found
    bad_t = next(p for p in validate(graph) if p.found == "'bool'")
    assert "'T' of MatMul" in bad_t.expected and "float32" in bad_t.expected
    assert any(p.path[-1] == "s" and "indices" in p.expected for p in validate(graph))
