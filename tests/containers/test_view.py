"""The one graph view: sources through container boundaries and tombstones, control sources,
units opened or kept whole, namespaces and order."""

from __future__ import annotations

import pytest

from amanda import Container, op
from amanda.containers import CONTROL, SELF, Endpoint, Port
from amanda.containers.records import Junction
from amanda.containers.view import View, live
from amanda.errors import CycleError


def block(name: str = "b") -> Container:
    return Container("Block", name, inputs=["x"], outputs=["y"], attrs={"namespace": "inner/1"},
                     children=[op("Relu", "r", ["x"], ["y"]), op("Neg", "n", ["x"], ["y"])],
                     edges=[(f"{name}:x", "r:x"), ("r:y", "n:x"), ("n:y", f"{name}:y")])


def model() -> Container:
    return Container(None, "g", inputs=["x"], outputs=["y"], attrs={"namespace": "outer/1"},
                     children=[block(), op("Abs", "a", ["x"], ["y"])],
                     edges=[("g:x", "b:x"), ("b:y", "a:x"), ("a:y", "g:y")])


def test_sources_cross_container_boundaries() -> None:
    """A unit's input, a container's output and input and a root output each name the unit
    output (or root input) the value comes from."""
    view = View(model())
    assert list(view.units) == [("b", "r"), ("b", "n"), ("a",)]
    assert view.sources(Endpoint(("a",), "x")) == [Endpoint(("b", "n"), "y")]
    assert view.sources(Junction(("b",), "y", "out")) == [Endpoint(("b", "n"), "y")]
    assert view.sources(Junction(("b",), "x", "in")) == [Endpoint(SELF, "x")]
    assert view.sources(Endpoint(SELF, "y")) == [Endpoint(("a",), "y")]
    assert view.order() == (("b", "r"), ("b", "n"), ("a",))


def test_units_kept_whole_where_opened_refuses() -> None:
    """A container ``opened`` refuses is one unit, with its own ports and namespace."""
    view = View(model(), opened=lambda path, node: node.type != "Block", namespace="outer/1")
    assert list(view.units) == [("b",), ("a",)]
    assert view.sources(Endpoint(("a",), "x")) == [Endpoint(("b",), "y")]
    assert view.namespaces == {("b",): "inner/1", ("a",): "outer/1"}
    assert View(model()).namespaces == {}  # nothing looked up unless a namespace is given


def test_tombstones_drop_edges_below() -> None:
    """A tombstone of a level above the edge's owner removes it from the view."""
    tomb = ((("g", "b", "r"), "y"), (("g", "b", "n"), "x"))
    wrapped = Container(None, "w", inputs=["x"], outputs=["y"], children=[model()],
                        edges=[("w:x", "g:x"), ("g:y", "w:y"), ("w:x", (("g", "b", "n"), "x"))], tombstones=[tomb])
    assert View(wrapped).sources(Endpoint(("g", "b", "n"), "x")) == [Endpoint(SELF, "x")]
    plain = Container(None, "w", inputs=["x"], outputs=["y"], children=[model()],
                      edges=[("w:x", "g:x"), ("g:y", "w:y")], tombstones=[tomb])
    assert View(plain).sources(Endpoint(("g", "b", "n"), "x")) == []
    assert View(model()).sources(Endpoint(("b", "n"), "x")) == [Endpoint(("b", "r"), "y")]


def test_control_sources_and_phases() -> None:
    """A control edge into a container orders every unit inside; edges tagged with a phase
    exist only in it."""
    g = Container(None, "g", inputs=["x"], outputs=["y"],
                  children=[op("Print", "p", ["x"], []), block(), op("Abs", "a", ["x"], ["y"])],
                  edges=[("g:x", "p:x"), ("g:x", "b:x"), (("p", CONTROL), ("b", CONTROL)),
                         ("b:y", "a:x", {"phase": "train"}), ("g:x", "a:x", {"phase": "eval"}), ("a:y", "g:y")])
    view = View(g)
    assert view.control_sources(("b", "r")) == [("p",)] == view.control_sources(("b", "n"))
    assert view.sources(Endpoint(("a",), "x"), "train") == [Endpoint(("b", "n"), "y")]
    assert view.sources(Endpoint(("a",), "x"), "eval") == [Endpoint(SELF, "x")]
    assert len(view.sources(Endpoint(("a",), "x"))) == 2
    assert live({"phase": "train"}, "train") and not live({"phase": "train"}, "eval") and live(None, "eval")
    assert view.ordered(data_only=True)[1] and not view.ordered()[1]


def test_cycles_through_boundary_ports() -> None:
    """A cycle through boundary ports alone is a CycleError, or (strict=False) feeds nothing
    and is reported as a loop."""
    loop = Container("Loop", "l", inputs=[Port("x")], outputs=[Port("y")], edges=[("l:x", "l:y")])
    g = Container(None, "g", outputs=["y"], children=[loop], edges=[("l:y", "l:x"), ("l:y", "g:y")])
    with pytest.raises(CycleError):
        View(g)
    lenient = View(g, strict=False)
    assert lenient.sources(Endpoint(SELF, "y")) == [] and lenient.looped
    assert lenient.ordered() == ([], True)
