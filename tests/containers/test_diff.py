"""amanda.diff: structural differences by path, checked against hand-made edits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

import amanda
from amanda.containers.diff import diff
from tests.strategies import containers, snapshot


def body() -> amanda.Container:
    return amanda.chain(
        amanda.op("MatMul", "L1", ["x"], ["y"]), amanda.op("Relu", "L2", ["x"], ["y"]),
        amanda.op("Relu", "L3", ["x"], ["y"]), inputs=["x"], outputs=["y"], name="body")


@given(containers(max_ops=8))
def test_a_model_has_no_differences_with_itself_or_a_rebuilt_copy(model: amanda.Container) -> None:
    """diff(m, m) and diff(m, loads(dumps(m))) are empty, and diffing changes neither model."""
    before = snapshot(model)
    assert diff(model, model) == ()
    assert diff(model, amanda.loads(amanda.dumps(model))) == ()
    assert snapshot(model) == before


def test_an_attribute_change_is_one_change_at_its_path() -> None:
    """with_attrs on one op shows as exactly that attribute at that path."""
    a = body()
    b = amanda.with_attrs(a, "L2", alpha=np.float32(0.5).item())
    (change,) = diff(a, b)
    assert change.kind == "changed" and change.path == ("L2",) and change.what == "attribute"
    assert str(change) == "~ L2: attribute alpha: (absent) -> 0.5"


def test_a_skip_connection_edit_shows_its_tombstone_new_edges_and_op() -> None:
    """Against the plain wrapper of the same chain, the skip-connection edit differs by its
    type, three new edges, one tombstone and the added Add op: exactly the edit that was made."""
    a = body()
    edited = (amanda.edit(a).remove_edge("body/L2:y", "body/L3:x")
              .add(amanda.op("Add", "skip", ["a", "b"], ["y"]))
              .connect("body/L1:y", "skip:a").connect("body/L2:y", "skip:b").connect("skip:y", "body/L3:x")
              .build(name="resnet"))
    plain = amanda.chain(a, inputs=["x"], outputs=["y"], name="resnet")
    assert str(diff(plain, edited)).splitlines() == [
        "~ <root>: type Chain -> Edit",
        "+ <root>: edge body/L1:y -> skip:a",
        "+ <root>: edge body/L2:y -> skip:b",
        "+ <root>: edge skip:y -> body/L3:x",
        "+ <root>: tombstone body/L2:y -> body/L3:x",
        "+ skip: added Add",
    ]


def test_removed_and_added_children_and_edges_are_listed() -> None:
    """Replacing a child by one of another name lists one removal and one addition, and the
    edges that moved with them."""
    a = amanda.Container("G", "g", inputs=["x"], outputs=["y"], children=[amanda.op("Relu", "r", ["x"], ["y"])],
                         edges=[("g:x", "r:x"), ("r:y", "g:y")])
    b = amanda.Container("G", "g", inputs=["x"], outputs=["y"], children=[amanda.op("Tanh", "t", ["x"], ["y"])],
                         edges=[("g:x", "t:x"), ("t:y", "g:y")])
    text = str(diff(a, b)).splitlines()
    assert "- <root>: edge SELF:x -> r:x" in text and "+ <root>: edge SELF:x -> t:x" in text
    assert "- r: removed Relu" in text and "+ t: added Tanh" in text
    assert len(text) == 6


def test_diff_rejects_what_is_not_a_container() -> None:
    """Anything but two containers is an ArgumentError naming the argument."""
    with pytest.raises(amanda.ArgumentError, match="at b"):
        diff(body(), "body")  # type: ignore[arg-type]
