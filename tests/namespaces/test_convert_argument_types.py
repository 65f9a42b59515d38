"""Wrong argument types to convert, validate and namespace lookups raise AmandaError subclasses
(MappingError, SchemaError) naming what was found, never a bare TypeError or AttributeError."""

import pytest

import amanda
from amanda import Container, op
from amanda.errors import MappingError, SchemaError

TF_GRAPH = Container(None, "g", attrs={"namespace": "amanda/tensorflow/1.13.1"}, children=[
    op("Placeholder", "x", [], ["output"], {"dtype": "float32", "shape": [1, 4]}),
    op("Relu", "relu", ["features"], ["activations"], {"T": "float32"})],
    edges=[("x:output", "relu:features")])


@pytest.mark.parametrize("args, kwargs, message", [
    (("g", "amanda/onnx/17"), {}, "a Container to convert, found str"),
    ((None, "amanda/onnx/17"), {}, "a Container to convert, found NoneType"),
    ((TF_GRAPH, 17), {}, "at target: expected a namespace name"),
    ((TF_GRAPH, ["amanda/onnx/17"]), {}, "at target: expected a namespace name"),
    ((TF_GRAPH, "amanda/onnx/17"), {"source": 3}, "at source: expected a namespace name"),
    ((TF_GRAPH, "amanda/onnx/17"), {"on_unmatched": ["error"]}, "on_unmatched"),
    ((TF_GRAPH, "amanda/onnx/17"), {"outputs": 3}, "at outputs: expected a list of endpoints"),
    ((TF_GRAPH, "amanda/onnx/17"), {"outputs": "relu:activations"}, "at outputs: expected a list"),
    ((TF_GRAPH, "amanda/onnx/17"), {"outputs": [3]}, "expected an endpoint"),
    ((TF_GRAPH, "amanda/onnx/17"), {"outputs": ["relu"]}, "expected an endpoint"),
    ((TF_GRAPH, "amanda/onnx/17"), {"outputs": ["ghost:y"]}, "at ghost:y: expected an op output"),
    ((TF_GRAPH, "amanda/onnx/17"), {"outputs": {3: "relu:activations"}}, "output names that are non-empty strings"),
])
def test_convert_arguments_of_the_wrong_type(args, kwargs, message):
    """Each malformed convert argument raises MappingError saying what was expected and found."""
    with pytest.raises(MappingError, match=message):
        amanda.convert(*args, **kwargs)


def test_convert_outputs_by_list_and_by_name():
    """outputs= as a list names ports like their endpoints; as a dict by its keys."""
    listed = amanda.convert(TF_GRAPH, "amanda/onnx/17", outputs=["relu:activations"])
    named = amanda.convert(TF_GRAPH, "amanda/onnx/17", outputs={"y": "relu:activations"})
    assert listed.output_names == ("relu:activations",) and named.output_names == ("y",)


@pytest.mark.parametrize("container", ["model.yaml", None, 3, {"graph": {}}])
def test_validate_refuses_what_is_not_a_container(container):
    """validate of a non-Container raises ArgumentError naming its type."""
    with pytest.raises(amanda.ArgumentError, match=f"a Container, found {type(container).__name__}"):
        amanda.validate(container)


@pytest.mark.parametrize("mode", ["ignore", ["raise"], None])
def test_validate_refuses_an_unknown_mode(mode):
    """validate's unknown_namespace must be one of its three modes, else ArgumentError."""
    with pytest.raises(amanda.ArgumentError, match="unknown_namespace"):
        amanda.validate(TF_GRAPH, unknown_namespace=mode)


@pytest.mark.parametrize("name", [["amanda/onnx/17"], {"amanda/onnx/17": 1}, 17, None, b"amanda/onnx/17"])
def test_namespace_lookup_of_a_non_string(name):
    """namespace() of an unhashable or non-string name raises SchemaError, not TypeError."""
    with pytest.raises(SchemaError, match="a namespace name"):
        amanda.namespace(name)


@pytest.mark.parametrize("op_type", [["MatMul"], 3, None, {"MatMul": 1}])
def test_schema_lookup_of_a_non_string(op_type):
    """Namespace.schema() of a non-string op type raises SchemaError naming it."""
    with pytest.raises(SchemaError, match="an op type name"):
        amanda.namespace("amanda/onnx/17").schema(op_type)
