"""Attribute values: what freezing stores, and structural equality over NaN, signs, types and
dtypes; the constructor refuses the names and uids a document could not hold."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from amanda import Container, Edge, Port, dumps, loads, op
from amanda.containers.values import ScalarMap, dtype_from_text, dtype_text, freeze, freeze_attrs, holds_arrays, values_equal
from amanda.errors import InvariantError
from tests.strategies import ARRAYS, ATTRIBUTE_VALUES, ML_ARRAYS


def test_nan_attribute_equals_nan_and_hashes_alike():
    """Two containers whose attribute is NaN (distinct float objects) are equal with equal hashes."""
    a = op("A", "a", attrs={"v": float("nan"), "w": [1.0, float("nan")]})
    b = op("A", "a", attrs={"v": float("-nan"), "w": (1.0, math.nan)})
    assert a == b and hash(a) == hash(b)


def test_signed_zero_int_float_and_bool_are_distinct():
    """-0.0 differs from 0.0, 1 from 1.0 and from True: each exports as a different value."""
    assert op("A", "a", attrs={"v": -0.0}) != op("A", "a", attrs={"v": 0.0})
    assert op("A", "a", attrs={"v": 1}) != op("A", "a", attrs={"v": 1.0})
    assert op("A", "a", attrs={"v": 1}) != op("A", "a", attrs={"v": True})


def test_arrays_are_equal_when_dtype_shape_and_bytes_are():
    """Array attributes compare by dtype, shape and bytes: NaN equals NaN, -0.0 is not 0.0."""
    nan = np.array([np.nan, 1.0], np.float32)
    assert values_equal(freeze(nan), freeze(nan.copy()))
    assert not values_equal(freeze(np.array([0.0])), freeze(np.array([-0.0])))
    assert not values_equal(freeze(np.array([1], np.int32)), freeze(np.array([1], np.int64)))
    assert not values_equal(freeze(np.zeros((2, 1))), freeze(np.zeros((1, 2))))
    assert not values_equal(freeze(np.array([1.0], "<f8")), freeze(np.array([1.0], ">f8")))


def test_numpy_scalars_become_zero_d_arrays_of_their_dtype():
    """np.float64 (a float subclass), np.int64 and np.str_ are stored as 0-d arrays keeping the dtype."""
    for scalar, dtype in ((np.float64(1.5), "float64"), (np.int64(-2), "int64"), (np.str_("ab"), "<U2")):
        stored = op("A", "a", attrs={"v": scalar}).attrs["v"]
        assert isinstance(stored, np.ndarray) and stored.shape == () and stored.dtype == np.dtype(dtype)
        assert stored.item() == scalar.item()


def test_plain_subclasses_are_stored_as_plain_values():
    """An IntEnum member or a str subclass is stored as the plain int or str."""
    from enum import IntEnum

    class Size(IntEnum):
        BIG = 3

    class Text(str):
        pass

    attrs = op("A", "a", attrs={"n": Size.BIG, "s": Text("hi")}).attrs
    assert type(attrs["n"]) is int and attrs["n"] == 3 and type(attrs["s"]) is str and attrs["s"] == "hi"


def test_dtypes_are_kept_and_unwritable_ones_refused():
    """A dtype attribute stays a dtype; dtypes that no text gives back are refused at construction."""
    assert op("A", "a", attrs={"d": np.dtype("float32")}).attrs["d"] == np.dtype("float32")
    assert dtype_text(np.dtype(">i2")) == ">i2" and dtype_from_text(">i2") == np.dtype(">i2")
    import ml_dtypes

    assert dtype_from_text(dtype_text(np.dtype(ml_dtypes.bfloat16))) == np.dtype(ml_dtypes.bfloat16)
    structured = np.dtype([("a", "<f4"), ("b", "<i2")])
    for value in (structured, np.zeros(2, structured), np.array([None, 1], dtype=object)):
        with pytest.raises(InvariantError, match="attribute"):
            op("A", "a", attrs={"v": value})


def test_mapping_keys_must_be_strings_even_in_a_pmap():
    """A key that is not a string, or not UTF-8 text, is refused in a dict, a pmap or a nested map."""
    from pyrsistent import pmap

    with pytest.raises(InvariantError, match="keys must be strings"):
        op("A", "a", attrs={"m": pmap({1: 2})})
    with pytest.raises(InvariantError, match="keys must be strings"):
        op("A", "a", attrs=pmap({1: 2}))
    for attrs in ({"\udc80": 1}, {"m": {"k\ud800": 1}}, pmap({"\ud800": 1})):
        with pytest.raises(InvariantError, match="UTF-8"):
            op("A", "a", attrs=attrs)


@pytest.mark.parametrize(
    ("fields", "field"),
    [({"type": ""}, "type"), ({"name": ""}, "name"), ({"uid": ""}, "uid"), ({"uid": 3}, "uid"),
     ({"type": 7}, "type"), ({"name": "a\ud800"}, "name")],
)
def test_constructor_refuses_empty_names_and_non_string_uids(fields, field):
    """An empty type or name, or a uid that is not a non-empty string, raises an error naming the field."""
    with pytest.raises(InvariantError, match=f"non-empty string {field}"):
        Container(**{"type": "T", "name": "n", **fields})


@given(ATTRIBUTE_VALUES)
def test_every_value_equals_itself_and_its_hash_is_stable(value):
    """A frozen value of any kind equals itself, a second freeze of itself, and hashes alike."""
    a = op("A", "a", attrs={"v": value})
    b = op("A", "a", attrs={"v": value})
    assert a.__eq__(a) and a == b and hash(a) == hash(b)


# -- arrays cannot be changed through a container (issue 19) ----------------------------------


_REFUSED = (ValueError, TypeError, AttributeError, IndexError, DeprecationWarning)


def _set(a: np.ndarray, field: str, value: object) -> None:
    setattr(a, field, value)


MUTATIONS = {
    "setflags": lambda a: (a.setflags(write=True), a.fill(0)),
    "flags.writeable": lambda a: _set(a.flags, "writeable", True),
    "item": lambda a: a.__setitem__(..., 0),
    "shape": lambda a: _set(a, "shape", (a.size,)),
    "shape+1": lambda a: _set(a, "shape", (1, *a.shape)),
    "dtype": lambda a: _set(a, "dtype", np.uint8),
    "strides": lambda a: _set(a, "strides", (0,) * a.ndim),
    "resize": lambda a: a.resize((a.size + 3,), refcheck=False),
    "copyto": lambda a: np.copyto(a, 1),
    "ufunc out": lambda a: np.add(a, a, out=a),
    "fill": lambda a: a.fill(1),
    "sort": lambda a: a.sort(),
    "byteswap": lambda a: a.byteswap(inplace=True),
    "put": lambda a: a.put([0], 1),
    "iadd": lambda a: a.__iadd__(1),
    "as_strided": lambda a: np.lib.stride_tricks.as_strided(a, writeable=True).fill(1),
    "as_strided setflags": lambda a: np.lib.stride_tricks.as_strided(a).setflags(write=True),
    "base shape": lambda a: _set(a.base, "shape", (a.base.size,)) if isinstance(a.base, np.ndarray) else None,
    "base dtype": lambda a: _set(a.base, "dtype", np.uint8) if isinstance(a.base, np.ndarray) else None,
    "base setflags": lambda a: a.base.setflags(write=True) if isinstance(a.base, np.ndarray) else None,
    "memoryview": lambda a: memoryview(a).cast("B").__setitem__(0, 1),
}


def _attempt(mutation: str, array: np.ndarray) -> None:
    with warnings.catch_warnings(), np.errstate(all="ignore"):  # overflow in a caller's own array is fine
        warnings.simplefilter("error")  # a deprecated setter refusing counts as refusing
        try:
            MUTATIONS[mutation](array)
        except _REFUSED:
            pass


def _arrays_in(value: object):
    """Every array reachable from a value, read afresh: attributes, nested values, children,
    graph-valued attributes."""
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, Container):
        for item in value.attrs.values():
            yield from _arrays_in(item)
        for port in (*value.inputs, *value.outputs, *value.controls):
            yield from _arrays_in(dict(port.attrs))
        for edge in (*value.edges, *value.tombstones):
            yield from _arrays_in(dict(edge.attrs))
        for child in value.children:
            yield from _arrays_in(child)
    elif isinstance(value, tuple):
        for item in value:
            yield from _arrays_in(item)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _arrays_in(item)


@st.composite
def array_holders(draw: st.DrawFn) -> tuple[Container, list[np.ndarray]]:
    """A container with arrays at the top, in lists and dicts, in a child op, a port, an edge and a body;
    and the arrays the caller passed (some writable, some read-only), which it still holds."""
    arrays = st.one_of(ARRAYS, ML_ARRAYS)
    given = [draw(arrays) for _ in range(7)]
    for array in given[::2]:
        array.setflags(write=False)  # read-only but still the caller's
    body = op("Body", "body", ["x"], ["y"], {"w": given[4], "s": np.float32(2)})
    attrs = {"a": given[0], "l": [given[1], 1], "d": {"k": given[2], "n": {"m": (draw(arrays),)}}, "g": body}
    child = op("C", "child", [Port("x", attrs={"init": given[5]})], ["y"], {"w": given[3]})
    edge = Edge("top:x", "child:x", attrs={"scale": given[6]})
    return Container("T", "top", inputs=["x"], outputs=[], children=[child], edges=[edge], attrs=attrs), given


@given(array_holders(), st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=6))
def test_no_numpy_mutation_changes_a_container(holder, mutations):
    """Every mutation numpy offers, tried on every array reachable from a container (a held view
    and fresh ones) and on the arrays the caller passed, leaves dumps, hash and == unchanged."""
    c, given_arrays = holder
    text, json_text = dumps(c), dumps(c, "json")
    fresh, loaded = loads(text), loads(text)  # `loaded` keeps arrays over the decoded bytes
    held = list(_arrays_in(c)) + list(_arrays_in(loaded))
    for mutation in mutations:
        for array in [*held, *_arrays_in(c), *_arrays_in(loaded), *given_arrays]:
            _attempt(mutation, array)
    assert dumps(c) == text and dumps(c, "json") == json_text and dumps(loaded) == text
    assert c == fresh and fresh == c and loaded == fresh
    assert hash(c) == hash(fresh) == hash(loads(dumps(c))) == hash(loaded)


def test_stored_arrays_cannot_be_made_writable():
    """An array read from a container is read-only and numpy refuses to make it writable."""
    c = op("A", "a", attrs={"w": np.arange(4.0)})
    held = c.attrs["w"]
    with pytest.raises(ValueError):  # numpy's refusal; its wording is numpy's own
        held.setflags(write=True)
    assert not held.flags.writeable
    assert c.attrs["w"] is not c.attrs["w"]  # a fresh view per read


def test_caller_arrays_are_copied_and_immutable_buffers_shared():
    """A caller's array (even a read-only one) is copied; an array over immutable bytes is shared."""
    mine = np.arange(3.0)
    mine.setflags(write=False)
    c = op("A", "a", attrs={"w": mine})
    mine.setflags(write=True)
    mine[0] = 9
    assert c.attrs["w"].tolist() == [0.0, 1.0, 2.0]
    shared = np.frombuffer(np.arange(3.0).tobytes())
    assert np.shares_memory(op("A", "a", attrs={"w": shared}).attrs["w"], shared)


def test_every_way_of_reading_attrs_hands_out_views():
    """Indexing, get, items, values, dict() and the pmap-style set/update/remove/discard of a
    container's attrs all give arrays whose reshaping leaves the container unchanged."""
    c = op("A", "a", attrs={"w": np.arange(6.0), "n": {"m": (np.arange(2),)}, "k": 1})
    text = dumps(c)
    attrs = c.attrs
    reads = [attrs["w"], attrs.get("w"), dict(attrs)["w"], next(v for k, v in attrs.items() if k == "w"),
             attrs.set("x", 1)["w"], attrs.update({"x": 2})["w"], attrs.remove("k")["w"],
             attrs.discard("nope")["w"], attrs["n"]["m"][0], attrs.set("x", 1)["n"]["m"][0]]
    reads += [v for v in attrs.values() if isinstance(v, np.ndarray)]
    for array in reads:
        array.shape = (array.size, 1)
        array.dtype = np.uint8
    assert dumps(c) == text and c.attrs["w"].shape == (6,) and c.attrs["w"].dtype == np.float64
    assert "w" in attrs and len(attrs) == 3 and attrs.get("missing", 5) == 5


def test_attribute_values_nest_a_bounded_depth() -> None:
    """Lists nested past MAX_VALUE_DEPTH are an InvariantError at construction (they raised
    RecursionError); at the limit a value still hashes, compares and round-trips."""
    import pytest

    import amanda
    from amanda.containers.values import MAX_VALUE_DEPTH

    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(amanda.InvariantError, match="nest at most"):
        amanda.op("X", "x", attrs={"a": deep})
    ok: list = []
    for _ in range(MAX_VALUE_DEPTH):
        ok = [ok]
    c = amanda.op("X", "x", attrs={"a": ok})
    for fmt in ("yaml", "json"):
        assert amanda.loads(amanda.dumps(c, fmt), fmt) == c


def test_maps_of_plain_scalars_are_marked_by_their_type():
    """freeze_attrs marks a map of plain scalars (a ScalarMap) and nothing else; it equals and
    hashes like any pmap of the same items, and maps derived from it are unmarked again."""
    from pyrsistent import pmap

    marked = freeze_attrs({"axis": 1, "mode": "edge", "scale": 0.5, "flag": True, "none": None, "raw": b"x"})
    assert type(marked) is ScalarMap
    assert type(freeze_attrs(pmap({"axis": 1}))) is ScalarMap and type(freeze_attrs({})) is ScalarMap
    for unmarked in ({"w": np.arange(2)}, {"shape": (1, 2)}, {"meta": {"a": "b"}}, {"g": op("Relu", "r")}):
        assert type(freeze_attrs(unmarked)) is not ScalarMap
    same = pmap({"axis": 1, "mode": "edge", "scale": 0.5, "flag": True, "none": None, "raw": b"x"})
    assert marked == same and same == marked and hash(marked) == hash(same)
    assert dict(marked) == dict(same) and marked != same.set("axis", 2)
    assert type(marked.set("w", 1)) is not ScalarMap and marked.set("w", 1)["w"] == 1
    assert not holds_arrays(marked) and holds_arrays(freeze_attrs({"w": np.arange(2)}))
    a, b = op("Relu", "r", attrs={"axis": 1}), op("Relu", "r", attrs=pmap({"axis": 1}).set("axis", 1))
    assert a == b and hash(a) == hash(b)


def test_types_share_one_string_object():
    """Equal types of separately made containers are one string object (documents included)."""
    first = op("".join(["Mat", "Mul"]), "a")
    second = op("".join(["MatM", "ul"]), "b")
    assert first.type == "MatMul" and first.type is second.type
    loaded = loads(dumps(Container("G", "g", children=[first, second])))
    assert all(child.type is first.type for child in loaded.children)
