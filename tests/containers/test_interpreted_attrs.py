"""Attributes amanda interprets itself are checked where they enter a container."""

import numpy as np
import pytest

import amanda
from amanda import Container, Edge, FormatError, InvariantError, Port, op
from amanda.errors import ArgumentError


@pytest.mark.parametrize("value", [3, 1.5, True, np.zeros(2), ["amanda/onnx/17"], ""])
def test_a_namespace_that_is_not_a_name_is_rejected_with_its_path(value):
    """A namespace attribute that is not a non-empty string fails at construction, naming the path."""
    with pytest.raises(InvariantError, match=r"at inner: expected attribute 'namespace' to be a namespace name"):
        Container("B", "inner", children=[op("Relu", "r")], attrs={"namespace": value})
    with pytest.raises(InvariantError, match="attribute 'namespace'"):
        op("Relu", "r").with_attrs(namespace=value)


def test_interpreted_port_and_edge_attributes_are_checked():
    """A captured/unbound flag that is not a bool and a phase that is not a name are rejected."""
    with pytest.raises(InvariantError, match=r"at r/x: expected port attribute 'captured' to be true or false"):
        op("Relu", "r", inputs=[Port("x", attrs={"captured": "yes"})])
    a, b = op("A", "a", outputs=["y"]), op("B", "b", inputs=["x"])
    with pytest.raises(InvariantError, match=r"at g/edges\[0\]: .*edge attribute 'phase' to be a phase name"):
        Container("G", "g", children=[a, b], edges=[("a:y", "b:x", {"phase": 1})])
    with pytest.raises(ArgumentError, match=r"edge attribute 'phase' to be a phase name"):
        Edge("a:y", "b:x", attrs={"phase": ["train"]})
    with pytest.raises(InvariantError, match="'shared_name'"):
        op("Variable", "v", attrs={"shared_name": np.ones(3)})


def test_well_typed_interpreted_attributes_pass():
    """Names, flags and None (unset) are accepted."""
    ok = op("Relu", "r", inputs=[Port("x", attrs={"captured": False})], attrs={"namespace": "amanda/onnx/17",
                                                                        "initializer": None})
    assert ok.namespace == "amanda/onnx/17"


def test_a_document_with_a_numeric_namespace_fails_at_load_with_the_path():
    """A YAML document whose namespace is a number raises FormatError at load, naming the op."""
    text = "subgraph:\n  name: g\n  ops:\n  - {type: Relu, name: r, attrs: {namespace: 17}}\n"
    with pytest.raises(FormatError, match="namespace") as info:
        amanda.loads(text)
    assert "r" in str(info.value)


def test_onnx_metadata_with_a_numeric_namespace_fails_at_import_naming_the_node():
    """An amanda.attr.namespace metadata entry holding a number fails at import, naming the node."""
    pytest.importorskip("onnx")
    from amanda.io.onnx import from_onnx
    from tests.fixtures.onnx.onnx_models import mlp

    proto = mlp()
    proto.graph.node[1].metadata_props.add(key="amanda.attr.namespace", value="3")
    with pytest.raises(FormatError, match=r"relu0.*attribute 'namespace' to be a namespace name"):
        from_onnx(proto)


def test_ports_pickle_and_compare_equal_whatever_their_flags():
    """A Port with or without an interpreted flag pickles to an equal Port, and flags do not change equality."""
    import pickle

    for port in (Port("x"), Port("x", attrs={"captured": True, "dtype": "float32"}), Port("y", attrs={"shape": (2, 3)})):
        again = pickle.loads(pickle.dumps(port))
        assert again == port and again.attrs == port.attrs and hash(again) == hash(port)
    assert Port("x", attrs={"captured": True}) == Port("x", attrs={"captured": True})
    assert Port("x", attrs={"captured": True}) != Port("x")
