"""The one reader of plain data: the same checks and the same located errors for container
documents (FormatError), namespace schemas (SchemaError) and mapping tables (MappingError)."""

from __future__ import annotations

import pytest

import amanda
from amanda.errors import FormatError, MappingError, SchemaError
from amanda.namespaces.schema_io import load_namespace_schema
from amanda.plain_reader import PlainReader, read_yaml, source_text
from amanda.rewrite.mapping import load_mapping


def test_a_misspelt_field_is_named_with_its_path_line_and_a_did_you_mean_in_all_three() -> None:
    """The three formats share one check of fields: each names the path, the line and the
    field it meant."""
    with pytest.raises(FormatError, match=r"graph\.ops\[0\]\.nmae.*did you mean 'name'") as document:
        amanda.loads("graph:\n  name: g\n  ops:\n    - {nmae: r}\n")
    assert document.value.path == ("graph", "ops", 0, "nmae") and document.value.line == 4
    with pytest.raises(SchemaError, match="namespace_schema/nmespace.*did you mean 'namespace'") as schema:
        load_namespace_schema("namespace_schema:\n  nmespace: x/1\n  op_schemas: []\n")
    assert schema.value.line == 2
    with pytest.raises(MappingError, match=r"mapping\.sourse.*did you mean 'source'") as mapping:
        load_mapping("mapping:\n  sourse: a/1\n  target: b/1\n  rules: []\n")
    assert mapping.value.line == 2 and mapping.value.path == ("mapping", "sourse")


def test_the_reader_checks_each_kind_of_field() -> None:
    """Mappings, required fields, typed fields, string lists, lists and non-empty strings;
    each refusal names the path and what was found."""
    r = PlainReader(MappingError, {("a",): 3})
    assert r.fields({"x": 1}, ("a",), ("x", "y")) == {"x": 1}
    with pytest.raises(MappingError, match=r"at a: expected the field 'y', found it missing \(line 3\)"):
        r.fields({"x": 1}, ("a",), ("x", "y"), required=("y",))
    with pytest.raises(MappingError, match="expected a mapping, found int 7"):
        r.fields(7, ("a",), ("x",))
    assert r.get({"n": 2}, "n", ("a",), (int,), "an int") == 2
    assert r.get({}, "n", ("a",), (int,), "an int", default=5) == 5
    with pytest.raises(MappingError, match=r"at a\.n: expected an int, found bool True"):
        r.get({"n": True}, "n", ("a",), (int,), "an int")
    assert r.strings(["p", "q"], ("s",)) == ("p", "q")
    assert r.strings("p", ("s",), one_or_none=True) == ("p",) and r.strings(None, ("s",), one_or_none=True) == ()
    with pytest.raises(MappingError, match="a list of strings"):
        r.strings("p", ("s",))
    assert r.listed(None, ("l",)) == [] and r.listed([1], ("l",)) == [1]
    with pytest.raises(MappingError, match=r"at l\[0\]: expected a list"):
        r.listed("x", ("l", "0"))
    assert r.text(None, ("t",)) is None and r.text("x", ("t",)) == "x"
    with pytest.raises(MappingError, match="a non-empty string"):
        r.text("", ("t",), optional=False)


def test_yaml_that_is_not_plain_data_is_the_callers_error_at_the_field(tmp_path) -> None:
    """read_yaml gives plain data with lines, and raises the caller's error class for a refused
    tag, at the field; source_text reads a path or takes the text."""
    assert read_yaml("a: {b: 1}")[0] == {"a": {"b": 1}}
    with pytest.raises(SchemaError, match=r"at a\.b: .*refused tag") as info:
        read_yaml("a: {b: !!python/name:os.system ''}", SchemaError)
    assert info.value.line == 1
    path = tmp_path / "t.yaml"
    path.write_text("a: 1\n")
    assert source_text(path, SchemaError, "schema") == "a: 1\n" == source_text(str(path), SchemaError, "schema")
    assert source_text("a: 1\n", SchemaError, "schema") == "a: 1\n"
    with pytest.raises(MappingError, match="a readable UTF-8 mapping file"):
        source_text(tmp_path / "absent.yaml", MappingError, "mapping")
