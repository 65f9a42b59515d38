"""An input that became an attribute between opsets (or the reverse) gets a hint saying what it
is at the opset used and where it changed: for every such move in ONNX's default domain, from
validate_op, and from the op builder for a positional input the opset does not have."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda.build import Ops
from amanda.errors import ArgumentError, SchemaError
from amanda.namespaces import namespace
from amanda.namespaces.history import extra_input_names, moved_hint
from amanda.namespaces.onnx_vocab import onnx_vocabulary
from amanda.namespaces.op_fit import validate_op


def _moves() -> list[tuple[str, str, int, str, str]]:
    """(op type, name, opset of the change, kind before, kind after), read from the vocabulary."""
    versions: dict[str, list] = {}
    for schema in onnx_vocabulary().schemas:
        if schema.domain == "":
            versions.setdefault(schema.type, []).append(schema)
    found = []
    for op_type, history in sorted(versions.items()):
        for old, new in zip(history, history[1:]):
            found += [(op_type, n, new.since_version, "input", "attribute") for n in sorted(set(old.input_names) & set(new.attrs))]
            found += [(op_type, n, new.since_version, "attribute", "input") for n in sorted(set(old.attrs) & set(new.input_names))]
    return found


MOVES = _moves()


def test_the_vocabulary_has_the_known_moves():
    """ReduceMean's axes (18), Split's split (13) and Pad's pads (11) are among the moves."""
    assert {("ReduceMean", "axes", 18), ("Split", "split", 13), ("Pad", "pads", 11)} <= {m[:3] for m in MOVES}


@pytest.mark.parametrize("op_type, name, opset, before, after", MOVES, ids=[f"{m[0]}-{m[1]}-{m[2]}" for m in MOVES])
def test_every_move_is_named_on_both_sides(op_type, name, opset, before, after):
    """At the opset of the change, the name given as its old kind gets a hint saying it is now
    the new kind; one opset earlier, given as the new kind, a hint saying it is the old kind."""
    for version, wrong, right in ((opset, before, after), (opset - 1, after, before)):
        try:
            schema = namespace(f"amanda/onnx/{version}").schema(op_type)
        except SchemaError:
            continue  # the op is retired at that opset
        if name in schema.attrs and name in schema.input_names:
            continue  # Split-1 has split both ways: nothing to hint
        inputs = [p.name for p in schema.inputs if not p.optional and not p.variadic]
        attrs = {name: 1} if wrong == "attribute" else {}
        if wrong == "input":
            inputs.append(name)
        hints = [p.hint for p in validate_op(schema, ("op",), op_type, inputs, schema.output_names, attrs)]
        assert any(f"{name} is an {right} of {op_type}" in h for h in hints), hints
        assert moved_hint(schema, name, wrong) in hints


def test_the_builder_names_reduce_mean_axes_as_an_attribute_before_opset_18():
    """``ReduceMean(x, axes)`` at opset 17 says axes is an attribute there; at 18 it runs, and
    ``axes=`` at 18 says it is an input."""
    x = amanda.Input("x", "float32", (2, 3))
    with pytest.raises(ArgumentError, match=r"axes is an attribute of ReduceMean before opset 18") as info:
        Ops("amanda/onnx/17").ReduceMean(x, np.array([1]))
    assert "axes=" in str(info.value)
    assert Ops("amanda/onnx/18").ReduceMean(x, np.array([1])).type.shape == (2, 1)
    with pytest.raises(ArgumentError, match=r"axes is an input of ReduceMean from opset 18"):
        Ops("amanda/onnx/18").ReduceMean(x, axes=[1])


@pytest.mark.parametrize("opset, op_type, name", [(12, "Squeeze", "axes"), (12, "Split", "split"),
                                                  (10, "Pad", "pads"), (12, "Unsqueeze", "axes")])
def test_the_builder_hints_at_an_extra_positional_input(opset, op_type, name):
    """An input given positionally where the opset has an attribute names that attribute."""
    schema = namespace(f"amanda/onnx/{opset}").schema(op_type)
    assert extra_input_names(schema, len(schema.inputs) + 1) == [name]
    args = [amanda.Input(f"x{i}", "float32", (2, 2)) for i in range(len(schema.inputs))]
    with pytest.raises(ArgumentError, match=rf"{name} is an attribute of {op_type}"):
        getattr(Ops(f"amanda/onnx/{opset}"), op_type)(*args, np.array([0]))


def test_a_name_no_version_knows_gets_no_history_hint():
    """A misspelt attribute gets no opset hint (and no error from the history lookup)."""
    schema = namespace("amanda/onnx/17").schema("ReduceMean")
    assert moved_hint(schema, "axis", "attribute") == "" or "axis" in moved_hint(schema, "axis", "attribute")
    assert moved_hint(schema, "keepdims", "attribute") == ""
