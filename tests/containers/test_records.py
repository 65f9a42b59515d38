"""Named records that travel between modules: junctions of the effective view and problems."""

from __future__ import annotations

import dataclasses

import pytest

from amanda import Container, op
from amanda.containers import SELF, Endpoint
from amanda.containers.flatten import _build
from amanda.containers.records import Junction
from amanda.containers.view import View
from amanda.errors import InvariantError, Problem


def test_junction_is_a_named_tuple() -> None:
    """A Junction reads by name and still unpacks and compares as a (path, port, side) tuple."""
    j = Junction(("b",), "x", "in")
    assert (j.path, j.port, j.side) == (("b",), "x", "in")
    path, port, side = j
    assert (path, port, side) == j == (("b",), "x", "in")
    assert {j: 1}[(("b",), "x", "in")] == 1


def test_flatten_routes_through_named_junctions() -> None:
    """The effective view forwards values through Junction records for nested boundary ports."""
    inner = Container("Block", "b", inputs=["x"], outputs=["y"],
                      children=[op("Relu", "r", ["x"], ["y"])], edges=[("b:x", "r:x"), ("r:y", "b:y")])
    top = Container(None, "g", inputs=["x"], outputs=["y"], children=[inner],
                    edges=[("g:x", "b:x"), ("b:y", "g:y")])
    seen = View(top).junctions
    assert sorted(seen) == [(("b",), "x", "in"), (("b",), "y", "out")]
    assert all(type(j) is Junction for j in seen)
    assert {(e.src, e.dst) for e in _build(top).view.edges} == {
        (Endpoint(SELF, "x"), Endpoint(("b", "r"), "x")), (Endpoint(("b", "r"), "y"), Endpoint(SELF, "y"))}


def test_problems_are_frozen_values() -> None:
    """A Problem compares by value, cannot be changed, and prints where, expected and found."""
    p = Problem(("g", "r"), "a port named x", "none", hint="add it")
    assert p == Problem(("g", "r"), "a port named x", "none", "add it")
    assert p != Problem(("g", "r"), "a port named x", "y")
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.path = ()  # type: ignore[misc]
    assert str(p) == "at g/r: expected a port named x, found none (add it)"
    with pytest.raises(InvariantError) as info:
        Container(None, "g", children=[op("A", "a"), op("B", "a")])
    assert all(isinstance(q, Problem) for q in info.value.problems)
