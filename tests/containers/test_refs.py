"""Attribute references (``AttrRef``) and their resolution against the calls around them."""

from __future__ import annotations

import pytest

import amanda
from amanda.containers.container import Container, op
from amanda.containers.refs import AttrRef, has_references, resolve_references
from amanda.errors import ArgumentError, InvariantError


def call(name: str, attrs: dict, body: list, defaults: dict | None = None) -> Container:
    info = {"domain": "local", **({"defaults": defaults} if defaults else {})}
    kid = body[0].name
    return Container("F", name, inputs=["X"], outputs=["Y"], children=body,
                     edges=[(f"{name}:X", f"{kid}:X"), (f"{kid}:Y", f"{name}:Y")],
                     attrs={"onnx_function": info, **attrs})


def test_a_reference_takes_the_call_value_else_the_default_else_nothing() -> None:
    """A body op's reference takes the call's attribute, else the function default, else the
    op has no such attribute; the input model keeps its references."""
    body = [op("Elu", "act", ["X"], ["Y"], {"alpha": AttrRef("a", "float"), "keep": 1})]
    given = call("f", {"a": 0.5}, body, {"a": 2.0})
    defaulted = call("f", {}, body, {"a": 2.0})
    missing = call("f", {}, body)
    assert resolve_references(given).child("act").attrs == {"alpha": 0.5, "keep": 1}
    assert resolve_references(defaulted).child("act").attrs == {"alpha": 2.0, "keep": 1}
    assert resolve_references(missing).child("act").attrs == {"keep": 1}
    assert given.child("act").attrs["alpha"] == AttrRef("a", "float")


def test_a_model_without_references_resolves_to_itself() -> None:
    """A container holding no reference is its own resolved view (no copy is made)."""
    model = call("f", {"a": 1.0}, [op("Relu", "act", ["X"], ["Y"])])
    assert not has_references(model)
    assert resolve_references(model) is model


def test_references_pass_through_nested_calls_and_bodies() -> None:
    """An inner call's attribute may itself be a reference, resolved against the outer call,
    and a reference inside an attribute body resolves against the call around its op."""
    inner = call("inner", {"b": AttrRef("k", "float")}, [op("Elu", "leaf", ["X"], ["Y"], {"alpha": AttrRef("b")})])
    outer = call("outer", {"k": 3.0}, [inner])
    resolved = resolve_references(outer)
    assert resolved.child("inner").attrs["b"] == 3.0
    assert resolved.child("inner").child("leaf").attrs["alpha"] == 3.0
    assert outer.child("inner").attrs["b"] == AttrRef("k", "float")
    branch = Container(None, "then", inputs=["x"], outputs=["y"],
                       children=[op("Elu", "e", ["X"], ["Y"], {"alpha": AttrRef("k")})],
                       edges=[("then:x", "e:X"), ("e:Y", "then:y")])
    holder = call("h", {"k": 7.0}, [op("If", "act", ["X"], ["Y"], {"then_branch": branch})])
    assert has_references(holder)
    found = resolve_references(holder).child("act").attrs["then_branch"].child("e").attrs["alpha"]
    assert found == 7.0


def test_a_reference_outside_any_call_is_an_invariant_error() -> None:
    """A reference no call encloses cannot be resolved: InvariantError naming the op's path."""
    model = Container(None, "g", children=[op("Elu", "e", attrs={"alpha": AttrRef("a")})])
    with pytest.raises(InvariantError, match="outside any call") as caught:
        resolve_references(model)
    assert caught.value.problems[0].path == ("e",)


@pytest.mark.parametrize("args", [(3,), ("",), ("a", None)])
def test_a_malformed_reference_is_an_argument_error(args: tuple) -> None:
    """An AttrRef needs a non-empty string name and a string type name."""
    with pytest.raises(ArgumentError, match="AttrRef"):
        AttrRef(*args)


def test_references_round_trip_through_documents() -> None:
    """An op holding a reference dumps to YAML and JSON and loads back equal."""
    elu = op("Elu", "e", attrs={"alpha": AttrRef("a", "float")})
    assert amanda.loads(amanda.dumps(elu)) == elu
    assert amanda.loads(amanda.dumps(elu, format="json"), format="json") == elu
    assert amanda.loads(amanda.dumps(elu)) != op("Elu", "e", attrs={"alpha": AttrRef("b", "float")})


def test_a_reference_fits_an_attribute_of_its_declared_type() -> None:
    """Schema checks accept a reference declared with the attribute's type (or none) and
    name the expected type for a reference of another type."""
    from amanda.namespaces.attr_types import attr_value_problem

    assert attr_value_problem("float", AttrRef("a", "float")) is None
    assert attr_value_problem("float", AttrRef("a")) is None
    assert attr_value_problem("float", AttrRef("a", "ints")) == "a reference of type float"


def test_deep_nesting_without_references_resolves_to_itself() -> None:
    """A container nested 3,000 levels deep holding no reference resolves to itself without
    hitting the recursion limit."""
    model = op("Relu", "r", ["X"], ["Y"])
    for level in range(3000):
        model = Container(None, f"n{level}", inputs=["X"], outputs=["Y"], children=[model],
                          edges=[(f"n{level}:X", f"{model.name}:X"), (f"{model.name}:Y", f"n{level}:Y")])
    assert resolve_references(model) is model


def test_after_an_edit_the_scan_for_references_visits_only_the_changed_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Containers remember whether they hold a reference, so scanning an edited model reads the
    new root, the new block and that block's ops, not the 49 unchanged blocks; a reference
    added by the edit is still found."""
    from amanda.containers import refs

    blocks = [Container("Block", f"b{i}", children=[op("Relu", f"r{j}", ["X"], ["Y"]) for j in range(10)])
              for i in range(50)]
    model = Container("Net", "net", children=blocks)
    assert not has_references(model) and resolve_references(model) is model
    seen: set[int] = set()
    real = refs._parts
    monkeypatch.setattr(refs, "_parts", lambda node: seen.add(id(node)) or real(node))
    edited = amanda.replace(model, "b7/r3", op("Elu", "r3", ["X"], ["Y"], {"alpha": 1.0}))
    assert resolve_references(edited) is edited
    assert len(seen) == 1 + 1 + 10  # the root, block b7 and its ten ops
    body = [op("Elu", "act", ["X"], ["Y"], {"alpha": AttrRef("a", "float")})]
    with_ref = amanda.replace(edited, "b9", call("b9", {"a": 0.5}, body))
    assert has_references(with_ref)
    assert resolve_references(with_ref).child("b9").child("act").attrs["alpha"] == 0.5
