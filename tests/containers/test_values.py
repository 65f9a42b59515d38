"""Attribute values: what freezing stores, and structural equality over NaN, signs, types and
dtypes; the constructor refuses the names and uids a document could not hold."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given

from amanda import Container, op
from amanda.containers.values import dtype_from_text, dtype_text, freeze, values_equal
from amanda.errors import InvariantError
from tests.strategies import ATTRIBUTE_VALUES


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
    """A pyrsistent map with a non-string key is refused like a dict with one."""
    from pyrsistent import pmap

    with pytest.raises(InvariantError, match="keys must be strings"):
        op("A", "a", attrs={"m": pmap({1: 2})})
    with pytest.raises(InvariantError, match="keys must be strings"):
        op("A", "a", attrs=pmap({1: 2}))


@pytest.mark.parametrize(
    ("fields", "field"),
    [({"type": ""}, "type"), ({"name": ""}, "name"), ({"uid": ""}, "uid"), ({"uid": 3}, "uid"),
     ({"type": 7}, "type")],
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
