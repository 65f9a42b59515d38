"""Nesting a flat graph into groups (``amanda.io.nest_levels``) keeps its effective view: the
same leaf ops, wired the same way through the ports the nesting adds, computing the same
values; the containers it assembles (``amanda.io.nest.built``) are what ``Container(...)``
builds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import amanda
from amanda.io.nest_levels import nest_levels
from tests.io.random_dags import draw_dag

F32 = {"dtype": "float32", "shape": (3,)}


@st.composite
def _graphs(draw: st.DrawFn) -> tuple[list, list, list[tuple[str, ...]]]:
    """A random DAG of Neg/Add ops over input ``x`` (each op reads earlier values), and a
    random group path for each op."""
    count = draw(st.integers(1, 9))
    ops, edges, values = draw_dag(draw, count)
    last = values[-1]
    edges.append(amanda.Edge(((last[0],), "Y"), (amanda.SELF, "y")))
    groups = [tuple(draw(st.lists(st.sampled_from("ab"), max_size=3))) for _ in range(count)]
    return ops, edges, groups


@given(_graphs())
def test_nesting_keeps_the_computation(graph: tuple) -> None:
    """The nested container computes what the flat one computes, holds the same leaf ops (by
    uid) each in the group it was given, and every value leaves and enters groups through
    ports named after it."""
    ops, edges, groups = graph
    flat = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs=F32)], outputs=["y"], children=ops, edges=edges,
                            attrs={"namespace": "amanda/onnx/17"})
    # each group's key is its path joined by "/" (unique), named relative to its parent ("a/b": "b")
    where = {op.name: tuple("/".join(path[: i + 1]) for i in range(len(path))) for op, path in zip(ops, groups)}
    classes = {chain[:i]: None for chain in where.values() for i in range(1, len(chain) + 1)}
    children, nested_edges = nest_levels(ops, edges, where, classes, {}, root="g")
    nested = flat.evolve(children=children, edges=nested_edges)
    x = np.array([1.0, -2.0, 3.0], np.float32)
    np.testing.assert_array_equal(amanda.Session(nested).run(["y"], {"x": x})[0],
                                  amanda.Session(flat).run(["y"], {"x": x})[0])
    assert sorted(op.uid for op in nested) == sorted(op.uid for op in flat)
    placed = {op.uid: path for path, op in amanda.flatten(nested).ops.items()}
    for op, path in zip(ops, groups):
        found = placed[op.uid]  # each op sits in the group it was given (``a`` in ``a``: ``a_``)
        assert found[-1] == op.name
        assert [name.rstrip("_") for name in found[:-1]] == list(path)
    for group in _groups(nested):
        assert _checked(group) == group
        for port in (*group.inputs, *group.outputs):
            assert port.name == "x" or port.name.startswith("v")


def _checked(group: amanda.Container) -> amanda.Container:
    """The container the checked constructor builds from the same fields."""
    return amanda.Container(group.type, group.name, inputs=group.inputs, outputs=group.outputs,
                            children=list(group.children), edges=list(group.edges), attrs=dict(group.attrs),
                            uid=group.uid)


@pytest.mark.parametrize("hierarchy", ["auto", False])
@pytest.mark.parametrize(("model", "kind"), [("mobilenet", "torchscript"), ("gpt2", "dynamo"), ("bert", "torchscript")])
def test_groups_are_what_the_checked_constructor_builds(model: str, kind: str, hierarchy: object) -> None:
    """The nesting and the ONNX reader assemble containers (the graph's own and its ops) without re-running
    every check; each one equals what ``Container(...)`` builds (and accepts) from the same
    fields, on real models, nested and flat: same edges in the same order, same child index."""
    pytest.importorskip("onnx")
    from tests.fixtures.onnx import hierarchy_models as fx

    tree = amanda.load(fx.path(model, kind), hierarchy=hierarchy)
    groups = [tree, *_groups(tree)]
    leaves = [child for group in groups for child in group.children if not child.children]
    for group in [*groups, *leaves]:
        rebuilt = _checked(group)
        assert rebuilt == group and hash(rebuilt) == hash(group) and rebuilt._index == group._index
        assert tuple(rebuilt.edges) == tuple(group.edges) and rebuilt.is_op == group.is_op


def test_built_checks_what_came_from_outside() -> None:
    """built() refuses, as the checked constructor does, a port attribute amanda interprets
    holding a wrong value, an interpreted attribute of the wrong type, an empty name, a port
    name twice on an op and an attribute value it cannot store."""
    from amanda.errors import InvariantError
    from amanda.io.nest import built

    bad_port = (amanda.Port("x", attrs={"captured": "yes"}),)
    twice = (amanda.Port("x"), amanda.Port("x"))
    cases = [dict(inputs=bad_port), dict(attrs={"namespace": 3}), dict(name=""), dict(inputs=twice),
             dict(attrs={"f": object()})]
    for case in cases:
        fields = {"inputs": (), "outputs": (), "attrs": {}, "name": "g", **case}
        with pytest.raises(InvariantError):
            amanda.Container(None, fields["name"], inputs=fields["inputs"], attrs=fields["attrs"])
        with pytest.raises(InvariantError):
            built(None, fields["name"], fields["inputs"], fields["outputs"], [], [], fields["attrs"], None, ("g",))


def _groups(root: amanda.Container) -> list[amanda.Container]:
    found, stack = [], [root]
    while stack:
        node = stack.pop()
        for child in node.children:
            if child.children:
                found.append(child)
                stack.append(child)
    return found

