"""``convert``: path finding through registered tables, name maps, exposed outputs, errors."""

import pytest

import amanda
from amanda import SELF, Container, op
from amanda.containers import Endpoint
from amanda.errors import MappingError
from amanda.rewrite.mapping import RELABEL, MappingTable, NewOp, Pattern, Replacement
from amanda.rewrite.mapping.convert import (
    conversion_path,
    convert,
    expose,
    register_table,
    registered_tables,
)
from amanda.rewrite.mapping.names import NameMap

TF_GRAPH = "tests/fixtures/documents/tensorflow_dense_graph.yaml"


def relabel(m):
    return RELABEL


def rename(new_type):
    def rule(m):
        return Replacement({"o": NewOp(new_type)})
    rule.__name__ = f"to_{new_type}"
    return rule


@pytest.fixture(scope="module")
def user_tables():
    """Tables user/x -> user/y -> user/z and a longer detour user/x -> user/w -> user/v -> user/z."""
    register_table(MappingTable("convtest/x", "convtest/w", [(Pattern({"o": "*"}), relabel)]))
    register_table(MappingTable("convtest/w", "convtest/v", [(Pattern({"o": "*"}), relabel)]))
    register_table(MappingTable("convtest/v", "convtest/z", [(Pattern({"o": "*"}), relabel)]))
    register_table(MappingTable("convtest/x", "convtest/y", [(Pattern({"o": "A"}), rename("B")),
                                                            (Pattern({"o": "*"}), relabel)]))
    register_table(factory=lambda: MappingTable("convtest/y", "convtest/z", [(Pattern({"o": "B"}), rename("C")),
                                                                             (Pattern({"o": "*"}), relabel)]),
                   source="convtest/y", target="convtest/z")


def small(namespace="convtest/x"):
    return Container(None, "g", inputs=["x"], outputs=["y"], children=[op("A", "a", ["i"], ["o"])], edges=[("g:x", "a:i"), ("a:o", "g:y")],
                     attrs={"namespace": namespace})


def test_shortest_path_is_taken(user_tables):
    """convert applies the tables of a shortest path, in order."""
    assert [e.name for e in conversion_path("convtest/x", "convtest/z")] == \
        ["convtest/x -> convtest/y", "convtest/y -> convtest/z"]
    out = convert(small(), "convtest/z")
    assert out.namespace == "convtest/z" and out.child("a").type == "C"


def test_converting_to_the_own_namespace_is_the_identity(user_tables):
    """A container already in the target namespace comes back as the same object."""
    g = small()
    assert convert(g, "convtest/x") is g


def test_no_path_names_what_is_reachable(user_tables):
    """With no chain of tables, the error names the namespaces that are reachable."""
    with pytest.raises(MappingError, match="reachable: convtest/"):
        convert(small(), "convtest/nowhere")
    with pytest.raises(MappingError, match="namespace attribute"):
        convert(Container(None, "g", children=[op("A", "a")]), "convtest/z")


def test_source_overrides_the_container_namespace(user_tables):
    """source= names the namespace to start from when the container declares another (or none)."""
    g = Container(None, "g", children=[op("A", "a")])
    assert convert(g, "convtest/y", source="convtest/x").child("a").type == "B"


def test_registered_tables_include_the_shipped_ones():
    """The shipped TensorFlow and ONNX opset tables are registered."""
    names = [e.name for e in registered_tables()]
    assert "tensorflow_to_onnx" in names and "onnx 11 -> 12" in names and "onnx 12 -> 11" in names


def test_with_names_and_outputs_on_the_dense_graph():
    """with_names maps TensorFlow endpoints to the converted graph's; outputs= exposes values."""
    graph = amanda.load(TF_GRAPH)
    out, names = convert(graph, "amanda/onnx/13", with_names=True, outputs=["dense/Relu:activations"])
    assert isinstance(names, NameMap)
    assert names.resolve("Placeholder:output") == Endpoint(SELF, "Placeholder")
    assert names.resolve("dense/MatMul:product") == Endpoint(("dense/MatMul",), "Y")
    assert [p.name for p in out.outputs] == ["dense/Relu:activations"]
    assert out.namespace == "amanda/onnx/13"


def test_expose_refuses_a_taken_name_and_removed_values():
    """expose needs new output names and values the mapping kept."""
    g = small()
    names = NameMap({Endpoint(("a",), "o"): None}, g)
    with pytest.raises(MappingError, match="new output port name"):
        expose(g, NameMap({}, g), {"y": "a:o"})
    with pytest.raises(MappingError, match="removed"):
        expose(g, names, {"z": "a:o"})
    assert [p.name for p in expose(g, NameMap({}, g), {"z": "a:o"}).outputs] == ["y", "z"]


def test_name_maps_compose():
    """A name map followed by another gives the composed endpoints (None stays None)."""
    e = lambda op_, port: Endpoint((op_,), port)
    first = NameMap({e("a", "o"): e("a", "p"), e("b", "o"): None})
    second = NameMap({e("a", "p"): e("c", "q"), e("d", "o"): e("d", "r")})
    both = first.then(second)
    assert both[e("a", "o")] == e("c", "q") and both[e("b", "o")] is None and both[e("d", "o")] == e("d", "r")


def test_register_table_checks_its_arguments():
    """register_table needs a table or a factory with namespaces; a factory must build what it says."""
    with pytest.raises(MappingError):
        register_table()
    entry = register_table(factory=lambda: MappingTable("convtest/q", "convtest/r"), source="convtest/q",
                           target="convtest/s")
    with pytest.raises(MappingError, match="convtest/q -> convtest/s"):
        entry.table()
