"""Identity by uid: one uid in several places is one node shared on purpose when the places
hold the same content; array-holding ops of one uid (or shared_name) with other content are
clashes, named with both paths; other nodes may share a uid freely."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import Container, op
from amanda.containers.identity import same_content
from amanda.containers.uids import key_of, refuse_uid_clashes, uid_clashes, uid_places


def weight(name: str, value: np.ndarray, uid: str = "w", **attrs: object) -> Container:
    return op("Constant", name, outputs=["output"], attrs={"value": value, **attrs}, uid=uid)


def test_same_content_ignores_the_own_name_only() -> None:
    """Two nodes equal but for their own name have the same content; a child renamed, an
    attribute or a value changed does not."""
    a = Container("L", "a", children=[weight("k", np.zeros(2))])
    assert same_content(a, a.with_name("b")) and same_content(a, a)
    assert not same_content(a, Container("L", "b", children=[weight("j", np.zeros(2))]))
    assert not same_content(a, Container("L", "b", children=[weight("k", np.ones(2))]))
    assert not same_content(a, a.with_attrs(units=3))


def test_places_and_clashes_are_named_with_both_paths() -> None:
    """uid_places lists every path of a uid; a clash names the earlier and the later path and
    how they differ; refuse_uid_clashes raises InvariantError with the caller's name."""
    shared = weight("k", np.zeros(2))
    model = Container("M", "m", children=[
        Container("L", "a", children=[shared]), Container("L", "b", children=[shared.with_name("k2")]),
        Container("L", "c", children=[weight("k", np.zeros(3))])])
    assert uid_places(model)["w"] == (("a", "k"), ("b", "k2"), ("c", "k"))
    (clash,) = uid_clashes(model)
    assert clash.path == ("c", "k") and "`a/k` and `c/k`" in clash.found and "(2,) and (3,)" in clash.found
    assert "layers.seeded" in clash.hint
    with pytest.raises(amanda.InvariantError, match=r"^save_weights refuses .*a/k.*c/k"):
        refuse_uid_clashes(model, "save_weights")
    refuse_uid_clashes(model.evolve(children=list(model.children)[:2]), "Session")  # no clash: nothing raised


def test_values_and_shared_names_clash_but_ops_without_arrays_do_not() -> None:
    """Equal shapes with other values clash; two variables of one shared_name and other values
    clash (a session would keep one); two ops without arrays of one uid do not (nothing is
    kept by it: an edited op of a shared function body keeps its uid)."""
    values = Container("M", "m", children=[weight("a", np.zeros(2)), weight("b", np.ones(2))])
    assert "the values of 'value'" in uid_clashes(values)[0].found
    v1 = op("Variable", "v1", outputs=["ref"], attrs={"value": np.zeros(2), "shared_name": "s"}, uid="1")
    v2 = op("Variable", "v2", outputs=["ref"], attrs={"value": np.ones(2), "shared_name": "s"}, uid="2")
    assert key_of(v1) == "s" and key_of(op("Relu", "r", uid="9")) == "9"
    (clash,) = uid_clashes(Container("M", "m", children=[v1, v2]))
    assert clash.found.startswith("shared_name 's' on `v1` and `v2`")
    relu, sigmoid = op("Relu", "f", ["X"], ["Y"], uid="u"), op("Sigmoid", "s", ["X"], ["Y"], uid="u")
    assert uid_clashes(Container("M", "m", children=[relu, sigmoid])) == []
    assert amanda.validate(Container(None, "g", attrs={"namespace": "amanda/onnx/17"}, children=[relu, sigmoid])) == []
