"""Mapping expressions are bounded: nesting is refused at load time, runaway work at evaluation,
each as a MappingError naming the field (never RecursionError, a hang or memory exhaustion)."""

import textwrap
import time

import numpy as np
import pytest

from amanda import Container, op
from amanda.errors import MappingError
from amanda.jmespath_nesting import MAX_NESTING, MAX_TREE_DEPTH
from amanda.rewrite.mapping import load_mapping
from amanda.rewrite.mapping.budget import MAX_WORK
from amanda.rewrite.mapping.expressions import compile_template

CAPTURES = {"$m": {"name": "relu", "attrs": {"k": [1, 2, 3]}}}


def rule_table(expression: str):
    """A one-rule YAML table whose created op's attribute ``v`` is ``expression``."""
    return load_mapping(textwrap.dedent(f"""
        mapping:
          source: user/a
          target: user/b
          rules:
            - name: r
              match: {{ ops: {{ $m: Relu }} }}
              map: {{ ops: {{ $m: {{ type: Relu, attrs: {{ v: "{expression}" }} }} }} }}
        """))


GRAPH = Container(None, "g", attrs={"namespace": "user/a"}, children=[op("Relu", "relu", ["x"], ["y"])])


@pytest.mark.parametrize("text", [
    "!" * 1990 + "$m",
    "(" * 990 + "$m" + ")" * 990,
    "not_null(" * 190 + "$m" + ")" * 190,
    "$m.attrs.k" + "[*]" * 600,
    "sort_by(@, &" * 150 + "@" + ")" * 150,
    "`" + "[" * 900 + "]" * 900 + "`",  # a JSON literal: Python's json decoder recurses
])
def test_deep_expressions_are_refused_when_compiled(text):
    """An expression nested hundreds deep (within the 2000-character limit) is a MappingError at compile time naming a column."""
    with pytest.raises(MappingError, match=rf"nested at most {MAX_NESTING} levels deep.*at column \d+"):
        compile_template("${" + text + "}", "rules/r/map/ops/$m/attrs/v")


def test_long_chains_are_refused_by_tree_depth():
    """A chain of `||` longer than MAX_TREE_DEPTH is refused; one within it evaluates."""
    assert compile_template("${" + "||".join(["$m"] * (MAX_TREE_DEPTH - 1)) + "}", "v").evaluate(CAPTURES) == CAPTURES["$m"]
    with pytest.raises(MappingError, match=f"parsing at most {MAX_TREE_DEPTH} levels deep"):
        compile_template("${" + "||".join(["$m"] * 400) + "}", "v")


def test_the_deepest_allowed_expression_evaluates():
    """MAX_NESTING levels of `!` compile and evaluate to the boolean jmespath gives."""
    template = compile_template("${" + "!" * MAX_NESTING + "$m}", "v")
    assert template.evaluate(CAPTURES) is (MAX_NESTING % 2 == 0)  # an even number of `!` of a non-empty object


def test_a_deep_expression_in_a_yaml_table_is_a_load_error():
    """A table holding a 500-deep expression fails to load with a MappingError naming the field."""
    with pytest.raises(MappingError, match=r"ops\.\$m\.attrs.*nested at most .* at column"):
        rule_table("${" + "(" * 500 + "$m.name" + ")" * 500 + "}")


@pytest.mark.parametrize("text", [
    "range(`0`, `1000000`)[*].range(`0`, `1000`)",  # 10^9 numbers
    "range(`0`, `100000`)" + " | [@, @][]" * 40,  # doubling 40 times
    "range(`0`, `1000000`)[*].to_string(@)[*].join('', [@, @, @, @])",
])
def test_runaway_work_is_a_mapping_error_within_seconds(text):
    """An expression that would build 10^9 values stops with a MappingError, in a few seconds."""
    template = compile_template("${" + text + "}", "rules/r/map/ops/$m/attrs/v")
    started = time.perf_counter()
    with pytest.raises(MappingError, match=f"at most {MAX_WORK} units of work"):
        template.evaluate(CAPTURES)
    assert time.perf_counter() - started < 30


def test_runaway_work_in_a_table_names_the_field():
    """Applying a rule whose attribute expression runs away raises MappingError with the field's path."""
    t = rule_table("${range(`0`, `1000000`)[*].range(`0`, `1000`)}")
    with pytest.raises(MappingError, match=r"attrs.*units of work"):
        t.apply(GRAPH)


def test_large_but_bounded_work_still_runs():
    """A million-element tensor (the per-function bound) is still within the budget."""
    value = compile_template("${tensor(range(`0`, `1000000`), 'int64')}", "v").evaluate(CAPTURES)
    np.testing.assert_array_equal(value[:3], np.array([0, 1, 2]))
    assert value.shape == (1_000_000,)


def test_passing_weights_through_costs_nothing():
    """A capture's big weight array passes through tensor() of its own dtype without being charged."""
    weights = np.zeros(20_000_000, np.float32)
    weights.setflags(write=False)
    out = compile_template("${tensor($m.attrs.w, 'float32')}", "v").evaluate({"$m": {"attrs": {"w": weights}}})
    assert out is weights
