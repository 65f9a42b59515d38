"""Loading mapping tables from YAML: the grammar, every load-time error, and the safety of
expressions (a mapping file is data; nothing in it ever runs as Python)."""

import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import amanda
from amanda import Container, op
from amanda.errors import MappingError
from amanda.rewrite.mapping import MappingTable, load_mapping
from amanda.rewrite.mapping.expressions import compile_template, onnx_dtype

HEAD = """
mapping:
  source: user/a
  target: user/b
  rules:
"""


def table(rules: str, head: str = HEAD) -> MappingTable:
    return load_mapping(head + textwrap.indent(textwrap.dedent(rules), "    "))


def graph():
    return Container(None, "g", attrs={"namespace": "user/a"}, children=[
        op("MatMul", "mm", ["a", "b"], ["product"], {"transpose_a": False, "transpose_b": True}),
        op("BiasAdd", "add", ["value", "bias"], ["output"]),
        op("Relu", "relu", ["features"], ["activations"], {"alpha": 0.5})],
        inputs=["x", "w", "bias"], outputs=["y"],
        edges=[("g:x", "mm:a"), ("g:w", "mm:b"), ("mm:product", "add:value"), ("g:bias", "add:bias"),
               ("add:output", "relu:features"), ("relu:activations", "g:y")])


def test_a_table_loads_and_applies():
    """A YAML table between user-defined namespaces (no registered schema) maps a graph as
    written, and the result is in the table's target namespace."""
    t = table("""
    - name: dense
      tags: [fusion]
      match:
        ops: { $mm: MatMul, $b: BiasAdd }
        edges: ["$mm.product -> $b.value"]
        where: "${$mm.consumers.product == `1`}"
      map:
        ops:
          $g:
            type: Gemm
            name: "${$b.name}_gemm"
            inputs: [A, B, C]
            outputs: [Y]
            attrs: { transB: "${if($mm.attrs.transpose_b, `1`, `0`)}", note: "from ${$mm.name}" }
        ports: { $mm.a: $g.A, $mm.b: $g.B, $b.bias: $g.C, $b.output: $g.Y }
    - name: relu
      apply_after: [dense]
      match: { ops: { $r: { type: Relu, attrs: { alpha: 0.5 } } } }
      map: { ops: { $r: { type: Rectifier, keep_attrs: [alpha] } } }
    """)
    out = t.apply(graph())
    # neither namespace has a registered schema; the result carries the table's target
    assert out.namespace == "user/b"
    gemm = out.child("add_gemm")
    assert dict(gemm.attrs) == {"transB": 1, "note": "from mm"}
    assert out.child("relu").type == "Rectifier" and out.child("relu").attrs["alpha"] == 0.5
    assert sorted(f"{e.src}->{e.dst}" for e in out.edges) == [
        "SELF:bias->add_gemm:C", "SELF:w->add_gemm:B", "SELF:x->add_gemm:A",
        "add_gemm:Y->relu:features", "relu:activations->SELF:y"]


def test_relabel_and_removal_shorthands():
    """``map: relabel`` keeps the op as it is; ``map: {ops: {}}`` removes it (its outputs forwarded by ports)."""
    t = table("""
    - { name: keep, match: { ops: { $o: [MatMul, BiasAdd] } }, map: relabel }
    - name: drop
      match: { ops: { $r: Relu } }
      map: { ops: {}, ports: { $r.activations: $r.features } }
    """)
    out = t.apply(graph())
    assert [c.name for c in out.children] == ["mm", "add"]
    assert out.child("mm") is graph().child("mm") or out.child("mm") == graph().child("mm")
    assert "add:output->SELF:y" in [f"{e.src}->{e.dst}" for e in out.edges]


def test_inputs_and_self_endpoints():
    """A mapper can add input ports to the container and wire them with SELF endpoints."""
    g = Container(None, "g", attrs={"namespace": "user/a"}, outputs=["y"],
                  children=[op("Placeholder", "p", [], ["output"], {"dtype": "float32", "shape": [2, -1]}),
                            op("Neg", "n", ["x"], ["y"])],
                  edges=[("p:output", "n:x"), ("n:y", "g:y")])
    t = table("""
    - name: placeholder
      match: { ops: { $p: Placeholder } }
      map:
        inputs: [ { name: "${$p.name}", attrs: { dtype: "${$p.attrs.dtype}", shape: "${dims($p.attrs.shape)}" } } ]
        ports: { $p.output: "SELF.${$p.name}" }
    - { name: neg, match: { ops: { $o: Neg } }, map: relabel }
    """)
    out = t.apply(g)
    assert out.inputs[0].name == "p" and out.inputs[0].attrs["shape"] == (2, None)
    assert sorted(f"{e.src}->{e.dst}" for e in out.edges) == ["SELF:p->n:x", "n:y->SELF:y"]


@pytest.mark.parametrize("rules,message", [
    ("- { name: r, match: { ops: { $o: Relu } }, map: relabel, colour: red }", "unknown field 'colour'"),
    ("- { name: r, match: { ops: { o: Relu } }, map: relabel }", "a variable like $m"),
    ("- { name: r, match: { ops: { $o: 'Re lu' } }, map: relabel }", "an op type name"),
    ("- { name: r, match: { ops: { $o: Relu }, edges: ['$o.y -> $p.x'] }, map: relabel }", "edges between matched variables"),
    ("- { name: r, match: { ops: { $o: Relu }, edges: ['$o.y'] }, map: relabel }", "an edge"),
    ("- { name: r, match: { ops: { $o: Relu }, where: '${$o.attrs.(x}' }, map: relabel }", "JMESPath"),
    ("- { name: r, match: { ops: { $o: Relu }, where: '${$p.name}' }, map: relabel }", "$p"),
    ("- { name: r, match: { ops: { $o: Relu } }, map: { ops: { $n: { name: x } } } }", "a type for the created op"),
    ("- { name: r, match: { ops: { $o: Relu } }, map: { ops: { $o: { typ: X } } } }", "did you mean 'type'"),
    ("- { name: r, match: { ops: { $o: Relu } }, map: { ports: { $x.y: $o.y } } }", "a port of a matched variable"),
    ("- { name: r, match: { ops: { $o: Relu } }, map: { edges: ['$n.y -> $o.x'] } }", "edges between the mapper's ops"),
    ("- { name: r, match: { ops: { $o: { type: Relu, attrs: { a: '${1}' } } } }, map: relabel }", "a literal value"),
    ("- { name: r, match: { ops: { $o: { type: Relu, namespace: other } } }, map: relabel }", "source, target, any"),
    ("- { name: r, match: { ops: { $o: Relu } } }", "the field 'map'"),
    ("- { name: r, apply_after: [s], match: { ops: { $o: Relu } }, map: relabel }", "names of rules"),
    (("- { name: r, apply_after: [s], match: { ops: { $o: Relu } }, map: relabel }\n"
      "- { name: s, apply_after: [r], match: { ops: { $o: Relu } }, map: relabel }"), "cycle"),
    (("- { name: r, match: { ops: { $o: Relu } }, map: relabel }\n"
      "- { name: r, match: { ops: { $o: Relu } }, map: relabel }"), "unique rule names"),
])
def test_load_errors_name_the_field_and_line(rules, message):
    """A malformed table is a MappingError at load time that names the problem (and a line)."""
    with pytest.raises(MappingError, match=message.replace("$", r"\$").replace("(", r"\(")) as info:
        table(rules)
    assert "mapping" in str(info.value)


@pytest.mark.parametrize("head,message", [
    ("mapping:\n  source: user/a\n  rules: []\n", "the field 'target'"),
    ("mapping:\n  source: user/a\n  target: user/b\n  on_unmatched: ignore\n  rules: []\n", "error or pass"),
    ("mapping:\n  source: user/a\n  target: user/b\n  max_iterations: 0\n  rules: []\n", "max_iterations"),
    ("mapping:\n  source: user/a\n  target: user/b\n  fixed_point: maybe\n  rules: []\n", "a bool"),
    ("mapping:\n  source: user/a\n  target: user/b\n  rules: {}\n", "a list of rules"),
    ("rules: []\n", "unknown field 'rules'"),
    ("mapping: [unclosed\n", "well-formed YAML"),
])
def test_top_level_errors(head, message):
    """Errors in the table's own fields are MappingErrors naming the field."""
    with pytest.raises(MappingError, match=message):
        load_mapping(head)


def test_line_numbers_are_reported():
    """A load error carries the line of the offending field."""
    with pytest.raises(MappingError) as info:
        table("- name: r\n  match: { ops: { $o: Relu } }\n  map: { ops: { $o: { typ: X } } }\n")
    assert info.value.line == 8


def test_a_file_path_loads_and_a_missing_file_is_a_mapping_error(tmp_path):
    """load_mapping reads a path as well as text; an unreadable path is a MappingError."""
    path = tmp_path / "t.yaml"
    path.write_text(HEAD + "    - { name: r, match: { ops: { $o: Relu } }, map: relabel }\n")
    assert load_mapping(path).rule_names == ["r"]
    assert load_mapping(str(path)).rule_names == ["r"]
    with pytest.raises(MappingError, match="readable"):
        load_mapping(str(tmp_path / "missing.yaml"))


# --- safety --------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "!!python/object/apply:os.system ['echo hacked']",
    "mapping: !!python/name:os.system",
    "mapping: { source: !!python/object:object {}, target: x, rules: [] }",
    "mapping: !custom { source: a }",
    "mapping: &a { source: *a }",
])
def test_python_and_custom_yaml_tags_are_refused(text):
    """Only plain YAML data loads: Python tags, custom tags and recursive aliases are MappingErrors."""
    with pytest.raises(MappingError):
        load_mapping(text)


@pytest.mark.parametrize("expression", [
    "${__import__('os').system('echo hacked')}",
    "${eval('1+1')}",
    "${open('/etc/passwd')}",
    "${$o.__class__}",
    "${lambda: 1}",
    "${[x for x in range(3)]}",
    "${exec(`\"import os\"`)}",
])
def test_python_in_expressions_is_rejected_or_inert(expression, tmp_path):
    """Python in ${...} either fails to load (not JMESPath, or an unknown function) or is a plain field read."""
    rules = f"- {{ name: r, match: {{ ops: {{ $o: Relu }} }}, map: {{ ops: {{ $o: {{ attrs: {{ v: \"{expression}\" }} }} }} }} }}"
    try:
        t = table(rules)
    except MappingError:
        return
    out = t.apply(Container(None, "g", attrs={"namespace": "user/a"}, children=[op("Relu", "r", ["x"], ["y"])]))
    assert out.child("r").attrs.get("v") is None  # a field read of something that is not there


def test_expressions_are_bounded():
    """Functions that build values refuse sizes past the limit instead of exhausting memory."""
    big = compile_template("${range(`0`, `100000000`)}", "x")
    with pytest.raises(MappingError, match="at most"):
        big.evaluate({})
    with pytest.raises(MappingError):
        compile_template("${" + "a." * 1500 + "b}", "x")


def test_expression_functions():
    """The helper functions compute what their names say."""
    data = {"$c": {"attrs": {"value": np.array([[1, 2]], np.int32), "shape": [1, -1, None]}}}
    def ev(text):
        compiled = compile_template(text, "x")
        return compiled if isinstance(compiled, str) else compiled.evaluate(data)

    assert ev("${to_list($c.attrs.value)}") == [[1, 2]]
    assert ev("${shape_of($c.attrs.value)}") == [1, 2] and ev("${dtype_of($c.attrs.value)}") == "int32"
    assert ev("${dims($c.attrs.shape)}") == [1, None, None]
    assert ev("${scalar(`[3]`)}") == 3 and ev("${add(`1`, `2`)}") == 3 and ev("${sub(`1`, `2`)}") == -1
    assert ev("${mul(`2`, `3`)}") == 6 and ev("${neg(`2`)}") == -2
    assert ev("${concat(`[1]`, `[2]`)}") == [1, 2] and ev("${pick(`[5, 6, 7]`, `[2, 0]`)}") == [7, 5]
    assert ev("${replace('values_3', 'values_', 'inputs_')}") == "inputs_3"
    assert ev("${range(`1`, `4`)}") == [1, 2, 3] and ev("${if(`false`, 'a', 'b')}") == "b"
    assert ev("${tensor(`[1, 2]`, 'int64')}").dtype == np.int64
    assert ev("${onnx_dtype('bool')}") == 9 and onnx_dtype("float64") == 11
    assert ev("$${literal}") == "${literal}"
    with pytest.raises(ValueError):
        onnx_dtype("resource")


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="${}()[]`'\".$a-z _|&!<>=,*@0123456789", max_size=40))
def test_any_expression_text_loads_safely_or_fails_cleanly(text):
    """Whatever the text inside an attribute, loading gives a table or a MappingError, nothing else."""
    rules = "- { name: r, match: { ops: { $o: Relu } }, map: { ops: { $o: { attrs: { v: %s } } } } }" % (
        '"' + text.replace("\\", "").replace('"', "'") + '"')
    try:
        t = table(rules)
    except MappingError:
        return
    try:
        t.apply(Container(None, "g", attrs={"namespace": "user/a"}, children=[op("Relu", "r", ["x"], ["y"])]))
    except amanda.AmandaError:
        pass
