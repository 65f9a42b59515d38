"""Nesting by scope chains, one level at a time (``nest_levels``), builds the tree the eager
nesting (``tests/io/eager_nest.py``, every group made as a Group, every level at once) builds: on
random scope trees, with scopes named like ops, like their parents and like each other, with
weights, wanted leaf names, classes and saved fields, the lazy tree once every level is
opened equals the eager one field for field, and it validates."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import amanda
from amanda.containers.deferred import is_deferred
from amanda.containers.traverse import walk
from amanda.containers.values import attrs_equal
from amanda.io.nest_levels import common_chain, nest_levels
from amanda.io.scope_names import relative_name
from tests.io.eager_nest import Group, nest
from tests.io.random_dags import draw_dag


def eager_nest(children, edges, where, classes, saved, *, root="", weights=(), leaf_names=None,  # noqa: ANN001, ANN201
               fresh=False, lazy=True, class_of=None):  # noqa: ANN001
    """What ``nest_levels`` is given, nested the way before it: every group made as a
    ``Group``, every level built at once by the eager ``nest``."""
    top = Group(None, root)
    groups = {(): top}
    for chain, entry in classes.items():
        cls = class_of(entry) if class_of else entry
        parent = groups[chain[:-1]]
        attrs = {"scope": chain[-1]}
        if cls and "." in cls:
            attrs["scope_class"] = cls
        group = groups[chain] = parent.child(chain[-1], type=(cls.rsplit(".", 1)[-1] or None) if cls else None,
                                             attrs=attrs)
        group.name = relative_name(parent.attrs.get("scope", ""), chain[-1])
    for chain, (uid, kind, attrs) in saved.items():  # once every group is named, as amanda.load did
        groups[chain].uid, groups[chain].type, groups[chain].attrs = uid, kind, dict(attrs)
    place = {name: groups[chain] for name, chain in where.items()}
    return nest(children, edges, place, top, graph=root, weights=weights, leaf_names=leaf_names,
                            fresh=fresh, lazy=False)


_WORDS = ["a", "b", "op0", "op1", "x"]


@st.composite
def _cases(draw: st.DrawFn) -> dict[str, Any]:
    """A random DAG of Neg/Add ops over input ``x`` (each reads earlier values, the last feeds
    ``y``), a random chain for each op (keys joined by ``/``, words that also name ops), some
    ops as weights, wanted leaf names, classes and saved fields for some groups."""
    count = draw(st.integers(1, 10))
    ops, edges, values = draw_dag(draw, count)
    for value in draw(st.lists(st.sampled_from(values[1:]), min_size=1, max_size=3, unique=True)):
        edges.append(amanda.Edge(((value[0],), value[1]), (amanda.SELF, f"y{len(edges)}")))
    where: dict[str, tuple[str, ...]] = {}
    for op in ops:
        words = draw(st.lists(st.sampled_from(_WORDS), max_size=3))
        where[op.name] = tuple("/".join(words[: i + 1]) for i in range(len(words)))
    chains = sorted({chain[:i] for chain in where.values() for i in range(1, len(chain) + 1)}, key=len)
    classes = {chain: draw(st.sampled_from([None, "m.Block", "Plain"])) for chain in chains}
    saved = {chain: (f"u{i}", "Saved", {"k": i}) for i, chain in enumerate(chains) if draw(st.booleans())}
    weights = [op.name for op in ops if draw(st.integers(0, 3)) == 0]
    leaf_names = {op.name: draw(st.sampled_from(_WORDS)) for op in ops if draw(st.booleans())}
    return {"ops": ops, "edges": edges, "where": where, "classes": classes, "saved": saved, "weights": weights,
            "leaf_names": leaf_names}


def _nested(case: dict[str, Any], how: Any, **options: Any) -> amanda.Container:
    children, edges = how(case["ops"], case["edges"], case["where"], case["classes"], case["saved"], root="g",
                          weights=case["weights"], leaf_names=case["leaf_names"], **options)
    outputs = sorted({e[1][1] for e in case["edges"] if e[1][0] is amanda.SELF})
    return amanda.Container(None, "g", inputs=["x"], outputs=outputs, children=children, edges=edges, uid="root")


def _fields(node: amanda.Container) -> tuple:
    """Every field but the uid, which only ops and groups with saved fields keep (the others'
    are new on each build)."""
    return (node.type, node.name, node.inputs, node.outputs, tuple(node.edges), tuple(c.name for c in node.children),
            node.uid if node.type == "Saved" or not node.children else None)


@settings(max_examples=150, deadline=None)
@given(_cases())
def test_lazy_levels_equal_the_eager_nesting(case: dict[str, Any]) -> None:
    """Level by level, the lazy tree equals the eager one: names (renamed apart where a scope
    is named like its parent, an op or another scope), types, uids, attributes, ports and edges
    in the same order; only the root's level is made at once, and the tree validates."""
    lazy, eager = _nested(case, nest_levels), _nested(case, eager_nest)
    assert not any(is_deferred(c) for c in eager.children)
    pairs = list(zip(walk(lazy), walk(eager), strict=True))
    assert all(a[0] == b[0] and _fields(a[1]) == _fields(b[1]) for a, b in pairs)
    assert all(attrs_equal(a[1]._attrs, b[1]._attrs) for a, b in pairs)
    assert lazy == eager and hash(lazy) == hash(eager)
    amanda.validate(lazy)
    opened = _nested(case, nest_levels, lazy=False)
    assert not any(is_deferred(node) for _, node, _ in walk(opened)) and opened == eager


@pytest.mark.parametrize(("chains", "default", "expected"), [
    ([("a", "a.b"), ("a", "a.c")], (), ("a",)),
    ([("a", "a.b"), ("a", "a.b", "x")], (), ("a", "a.b")),
    ([("a",), ("b",)], ("z",), ()),
    ([], ("z",), ("z",)),
])
def test_common_chain(chains: list, default: tuple, expected: tuple) -> None:
    """The lowest group holding every chain: their longest common start (``default`` if none)."""
    assert common_chain(chains, default) == expected
