"""The frozen schema value types."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from namespace_strategies import op_schemas

from amanda.errors import SchemaError
from amanda.namespaces import AttrSchema, OpSchema, PortSchema
from amanda.namespaces.schema import FrozenMap


def test_helpers():
    """input_names, output_names, attr() and port() read the schema."""
    s = OpSchema("Conv", inputs=["X", "W", PortSchema("B", optional=True)], outputs=["Y"],
                 attrs={"group": AttrSchema("group", "int", default=1)})
    assert s.input_names == ("X", "W", "B") and s.output_names == ("Y",)
    assert s.attr("group").default == 1 and s.port("B").optional
    with pytest.raises(SchemaError, match="did you mean 'group'"):
        s.attr("groups")
    with pytest.raises(SchemaError, match="did you mean 'W'"):
        s.port("w")


def test_attrs_mapping_is_read_only_and_ordered():
    """attrs and type_constraints are read-only mappings keeping their order."""
    s = OpSchema("Op", attrs=[AttrSchema("b", "int"), AttrSchema("a", "int")],
                 type_constraints={"T": ["tensor(float)"]})
    assert list(s.attrs) == ["b", "a"] and s.type_constraints["T"] == ("tensor(float)",)
    with pytest.raises(TypeError):
        s.attrs["c"] = AttrSchema("c", "int")  # type: ignore[index]
    with pytest.raises(AttributeError):
        s.type = "Other"  # type: ignore[misc]


@pytest.mark.parametrize("make, expected", [
    (lambda: OpSchema("Op", inputs=[PortSchema("a", variadic=True), "b"]), "last port"),
    (lambda: OpSchema("Op", inputs=["a", "a"]), "unique port names"),
    (lambda: OpSchema("Op", inputs=[PortSchema("a", type_constraint="T")]), "'T'"),
    (lambda: OpSchema("Op", attrs={"x": AttrSchema("y", "int")}), "attribute's name"),
    (lambda: OpSchema(""), "non-empty string"),
    (lambda: AttrSchema("a", "integer"), "did you mean 'int'"),
    (lambda: AttrSchema("a", "int", required=True, default=1), "no default"),
    (lambda: AttrSchema("a", "ints", default="x"), "a list of ints"),
    (lambda: PortSchema("a", min_arity=-1), "min_arity"),
])
def test_invalid_schemas_raise(make, expected):
    """Malformed schemas raise SchemaError saying what is wrong."""
    with pytest.raises(SchemaError, match=expected):
        make()


def test_defaults_are_canonical_and_immutable():
    """Defaults become tuples / read-only arrays; equal content means equal schemas."""
    a = AttrSchema("t", "tensor", default=np.array([1.0, np.nan]))
    b = AttrSchema("t", "tensor", default=[1.0, np.nan])
    assert a == b and hash(a) == hash(b) and not a.default.flags.writeable
    assert AttrSchema("f", "float", default=1).default == 1.0
    assert isinstance(AttrSchema("f", "float", default=1).default, float)
    assert AttrSchema("x", "float", default=float("nan")) == AttrSchema("x", "float",
                                                                         default=float("nan"))
    assert AttrSchema("x", "int", default=1) != AttrSchema("x", "bool", default=True)


def test_port_with_constraint_gets_its_types():
    """A port bound to a type constraint allows that constraint's types."""
    s = OpSchema("Op", inputs=[PortSchema("x", type_constraint="T")],
                 type_constraints={"T": ("tensor(float)", "tensor(double)")})
    assert s.inputs[0].allowed_types == ("tensor(float)", "tensor(double)")


@settings(max_examples=40, deadline=None)
@given(op_schemas())
def test_schemas_are_hashable_and_picklable(schema):
    """An op schema equals its pickled copy, with the same hash."""
    copy = pickle.loads(pickle.dumps(schema))
    assert copy == schema and hash(copy) == hash(schema)
    assert isinstance(schema.attrs, FrozenMap)
