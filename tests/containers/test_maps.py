"""map_of: the same map pyrsistent's pmap builds, bucket for bucket."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import PMap, pmap

from amanda.containers.maps import map_of
from amanda.containers.values import ScalarMap, freeze_attrs


@given(st.dictionaries(st.text(max_size=6), st.one_of(st.integers(), st.text(max_size=4), st.none()), max_size=12))
def test_map_of_is_pmap(items: dict) -> None:
    """Equal to pmap's map, with the same iteration order and hash, for any dict."""
    made, expected = map_of(items), pmap(items)
    assert type(made) is PMap
    assert made == expected and dict(made) == items
    assert list(made.items()) == list(expected.items())
    assert hash(made) == hash(expected)
    assert made.set("extra", 1) == expected.set("extra", 1)


def test_map_of_scalar_map_class() -> None:
    """With ``cls=ScalarMap`` it is the map freeze_attrs gives for plain values."""
    made = map_of({"onnx_name": "y", "axis": 1}, ScalarMap)
    assert type(made) is ScalarMap
    assert made == freeze_attrs({"onnx_name": "y", "axis": 1})
    assert type(freeze_attrs({"onnx_name": "y"})) is ScalarMap
    assert type(made.remove("axis")) is PMap and made.remove("axis") == {"onnx_name": "y"}
