"""The namespace schema YAML format: loading, errors, and lossless round trips."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from namespace_strategies import namespaces, op_schemas

from amanda.errors import AmandaError, SchemaError
from amanda.namespaces import (
    AttrSchema,
    Namespace,
    OpSchema,
    PortSchema,
    dump_namespace_schema,
    load_namespace_schema,
)
from amanda.namespaces.schema_io import op_schema_from_data, op_schema_to_data

DESIGN_EXAMPLE = """\
namespace_schema:
  namespace: amanda/tensorflow/1.13.1
  op_schemas:
    - type: MatMul
      attrs: { T: dtype, transpose_a: bool = false, transpose_b: bool = false }
      input_ports: [a, b]
      output_ports: [product]
"""


def _wrap(op_yaml: str, top: str = "") -> str:
    body = "\n".join("    " + line for line in op_yaml.strip().splitlines())
    return f"namespace_schema:\n  namespace: test/1\n{top}  op_schemas:\n{body}\n"


def test_design_example_loads():
    """The example of docs/design.md loads to the schema it describes."""
    ns = load_namespace_schema(DESIGN_EXAMPLE)
    matmul = ns.schema("MatMul")
    assert ns.name == "amanda/tensorflow/1.13.1" and ns.version == "1.13.1"
    assert matmul.input_names == ("a", "b") and matmul.output_names == ("product",)
    assert matmul.attr("T") == AttrSchema("T", "dtype", required=True)
    assert matmul.attr("transpose_a") == AttrSchema("transpose_a", "bool", default=False)
    assert matmul.since_version == 1 and matmul.domain == ""


def test_load_from_path(tmp_path):
    """A path (str or Path) is read as a file."""
    path = tmp_path / "tf.yaml"
    path.write_text(DESIGN_EXAMPLE)
    assert load_namespace_schema(path) == load_namespace_schema(str(path))
    assert load_namespace_schema(path) == load_namespace_schema(DESIGN_EXAMPLE)


def test_all_fields_load():
    """Every optional field of the format is read."""
    text = _wrap("""
- type: Concat
  domain: ai.onnx
  since_version: 13
  doc: joins tensors
  deprecated: true
  attrs:
    axis: int
    mode: string = "edge"
    pads: {type: ints, required: false}
    value: {type: tensor, default: {dtype: float32, shape: [1], values: [0.5]}}
    n: int = null
  input_ports:
    - {name: inputs, variadic: true, type_attr: T, homogeneous: false, min_arity: 2}
  output_ports: [{name: concat_result, optional: true, allowed_types: ["tensor(float)"]}]
  type_constraints: {T: ["tensor(float)", "tensor(int64)"]}
  subgraph: {ops: [{name: h, type: MatMul}], edges: ["x -> h.a"]}
""", top="  parent: amanda/base\n  fallback: true\n  source: hand-written\n  version: 7\n"
         "  retired: {Old: gone since 7}\n")
    ns = load_namespace_schema(text)
    assert (ns.parent, ns.fallback, ns.source, ns.version) == ("amanda/base", True,
                                                               "hand-written", 7)
    assert dict(ns.retired) == {"Old": "gone since 7"}
    s = ns.schema("Concat")
    assert (s.domain, s.since_version, s.doc, s.deprecated) == ("ai.onnx", 13, "joins tensors",
                                                                True)
    assert s.inputs[0] == PortSchema("inputs", variadic=True, type_constraint="T",
                                     allowed_types=("tensor(float)", "tensor(int64)"),
                                     homogeneous=False, min_arity=2)
    assert s.outputs[0].optional and s.outputs[0].allowed_types == ("tensor(float)",)
    assert s.attr("axis").required and s.attr("mode").default == "edge"
    assert not s.attr("pads").required and s.attr("pads").default is None
    assert not s.attr("n").required and s.attr("n").default is None
    assert s.attr("value").default.dtype == np.float32 and s.attr("value").default[0] == 0.5
    assert s.subgraph["ops"][0]["type"] == "MatMul"


@pytest.mark.parametrize("spec, expected", [
    ('"int ="', "a default value after '='"),
    ('"in t"', "an attribute spec"),
    ('"= 3"', "an attribute spec"),
    ("integer", "did you mean 'int'"),
    ('"int = hello"', "a default that is an int"),
    ('"ints = [1, x]"', "a list of ints"),
    ('"int = [1"', "well-formed YAML"),
    ("{type: int, dflt: 3}", "unknown field 'dflt'"),
    ("7", "a mapping"),
])
def test_bad_attr_spec(spec, expected):
    """A malformed attribute spec is a SchemaError naming the attribute's path and line."""
    text = _wrap(f"- type: Foo\n  attrs:\n    a: int\n    bad: {spec}\n")
    with pytest.raises(SchemaError) as info:
        load_namespace_schema(text)
    message = str(info.value)
    assert expected in message
    assert "namespace_schema/op_schemas/0/attrs/bad" in message
    assert info.value.line == 7 and "line 7" in message


@pytest.mark.parametrize("text, path, line, expected", [
    (_wrap("- type: Foo\n  inputs: [x]\n"), "op_schemas/0/inputs", 5,
     "did you mean 'input_ports'"),
    ("namespace_schema:\n  namespace: x/1\n  op_schema: []\n", "namespace_schema/op_schema",
     3, "did you mean 'op_schemas'"),
    (_wrap("- type: Foo\n  input_ports: [{name: x, optinal: true}]\n"),
     "input_ports/0/optinal", 5, "did you mean 'optional'"),
    ("namespace:\n  namespace: x/1\n", "namespace", 1, "unknown field"),
    ("namespace_schema:\n  op_schemas: []\n", "namespace_schema", 1, "'namespace'"),
    (_wrap("- type: Foo\n  since_version: one\n"), "op_schemas/0/since_version", 5, "an int"),
    (_wrap("- type: Foo\n  input_ports: [x, x]\n"), "op_schemas/0", 4, "unique port names"),
    (_wrap("- type: Foo\n- type: Foo\n"), "op_schemas/1/type", 5, "one schema per op type"),
    (_wrap("- type: Foo\n  input_ports: [{name: x, variadic: true}, y]\n"), "op_schemas/0",
     4, "only the last port to be variadic"),
    (_wrap("- type: Foo\n  input_ports: [{name: x, type_constraint: T}]\n"), "op_schemas/0",
     4, "a type constraint or dtype attribute name"),
    ("namespace_schema:\n  namespace: x/1\n  namespace: y/1\n", "namespace_schema/namespace",
     3, "unique keys"),
    ("namespace_schema: [\n", "<root>", 2, "well-formed YAML"),
])
def test_format_errors_name_field_and_line(text, path, line, expected):
    """Every malformed document raises a SchemaError with the field path and line."""
    with pytest.raises(SchemaError) as info:
        load_namespace_schema(text)
    assert isinstance(info.value, AmandaError)
    message = str(info.value)
    assert path in message and expected in message and f"line {line}" in message


@pytest.mark.parametrize("payload", [
    "!!python/object:os.system {}",
    "!!python/object/apply:os.system [echo hacked]",
    "!!python/name:os.system ''",
    "!!binary aGVsbG8=",
    "!custom 3",
])
def test_python_and_custom_tags_refused(payload):
    """Python (and any non-plain) YAML tags are refused before anything is constructed."""
    for text in (f"namespace_schema: {payload}\n",
                 _wrap(f"- type: Foo\n  doc: {payload}\n"),
                 _wrap(f'- type: Foo\n  attrs: {{a: "int = {payload}"}}\n')):
        with pytest.raises(SchemaError, match="refused"):
            load_namespace_schema(text)


def test_alias_bomb_and_recursion_refused():
    """Recursive aliases are refused instead of looping."""
    with pytest.raises(SchemaError, match="recursive alias"):
        load_namespace_schema("namespace_schema: &a {namespace: x/1, op_schemas: [*a]}\n")


def test_dump_design_example_round_trip():
    """Dumping the design example gives text that loads to the same namespace."""
    ns = load_namespace_schema(DESIGN_EXAMPLE)
    text = dump_namespace_schema(ns)
    assert "transpose_a: bool = false" in text and "input_ports: [a, b]" in text
    assert load_namespace_schema(text) == ns


def test_special_defaults_round_trip():
    """NaN, infinities, awkward strings and tensors survive dump and load."""
    attrs = [
        AttrSchema("nan", "float", default=math.nan),
        AttrSchema("inf", "floats", default=[math.inf, -math.inf, -0.0]),
        AttrSchema("s", "string", default="a = b: 'c'\n\"d\" #e"),
        AttrSchema("yes", "string", default="true"),
        AttrSchema("t", "tensor", default=np.arange(6, dtype=np.int32).reshape(2, 3)),
        AttrSchema("ts", "tensors", default=[np.array(["a", "b"], dtype=object)]),
    ]
    ns = Namespace("x/1", schemas=[OpSchema("Op", attrs=attrs)])
    assert load_namespace_schema(dump_namespace_schema(ns)) == ns


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(namespaces())
def test_yaml_round_trip(ns):
    """load(dump(ns)) == ns, and dumping again gives the same text."""
    text = dump_namespace_schema(ns)
    back = load_namespace_schema(text)
    assert back == ns
    assert dump_namespace_schema(back) == text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(op_schemas())
def test_json_mapping_round_trip(schema):
    """The mapping-style plain data (used by the shipped ONNX file) survives JSON."""
    data = json.loads(json.dumps(op_schema_to_data(schema, attr_style="mapping")))
    assert op_schema_from_data(data) == schema
