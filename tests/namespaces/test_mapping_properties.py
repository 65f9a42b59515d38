"""Properties of applying tables to random nested containers (tests/strategies.py)."""

import sys
from pathlib import Path

from hypothesis import given, settings

from amanda.rewrite.mapping import RELABEL, MappingTable, NewOp, Pattern, Replacement

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from strategies import check_invariants, containers, dataflow, snapshot

SOURCE, TARGET = "test/a", "test/b"


def rectify(m):
    """Relu becomes Rectifier (same op, same ports)."""
    return Replacement({"r": NewOp("Rectifier")})


def fuse_add_relu(m):
    """Add feeding Relu through o0 -> i0: the Add becomes AddRelu and the Relu goes; the Relu's
    other inputs are dropped and its outputs are read from the AddRelu."""
    relu = m["r"]
    ports = {f"r.{p}": None for p in relu.input_names if p != "i0"}
    ports.update({f"r.{p}": "a.o0" for p in relu.output_names})
    return Replacement({"a": NewOp("AddRelu")}, ports=ports)


def drop_const(m):
    """Const ops are removed (their inputs dropped) when nothing reads them, kept otherwise."""
    return Replacement({}, ports={f"c.{p}": None for p in m["c"].input_names})


def relabel(m):
    return RELABEL


TABLE = MappingTable(SOURCE, TARGET, [
    (Pattern({"a": "Add", "r": "Relu"}, ["a.o0 -> r.i0"]), fuse_add_relu),
    (Pattern({"r": "Relu"}), rectify),
    (Pattern({"c": "Const"}), drop_const),
    (Pattern({"o": "MatMul"}), relabel),
])


def in_source(container):
    return container.evolve(attrs={**container.attrs, "namespace": SOURCE})


@settings(max_examples=60, deadline=None)
@given(containers(max_ops=8))
def test_mapping_never_modifies_its_input(container):
    """Applying a table leaves its input exactly as it was (uids included) and gives a valid container."""
    source = in_source(container)
    before = snapshot(source)
    result = TABLE.apply(source, on_unmatched="pass")
    assert snapshot(source) == before
    check_invariants(result)
    assert result.namespace == TARGET


@settings(max_examples=60, deadline=None)
@given(containers(max_ops=8))
def test_relabelling_keeps_the_dataflow_and_shares_every_op(container):
    """A table that only relabels changes no edge and reuses every op object of its input."""
    source = in_source(container)
    result = MappingTable(SOURCE, TARGET, [(Pattern({"o": "*"}), relabel)]).apply(source)
    assert dataflow(result) == dataflow(source)
    assert [id(op) for op in result] == [id(op) for op in source]


@settings(max_examples=40, deadline=None)
@given(containers(max_ops=8))
def test_renaming_types_keeps_the_dataflow(container):
    """Updating ops in place (new type, same ports) keeps the effective dataflow."""
    source = in_source(container)
    result = MappingTable(SOURCE, TARGET, [(Pattern({"r": "Relu"}), rectify), (Pattern({"o": "*"}), relabel)]).apply(source)
    assert dataflow(result) == dataflow(source)
    assert sorted(op.type for op in result) == sorted("Rectifier" if op.type == "Relu" else op.type for op in source)
