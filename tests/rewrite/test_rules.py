"""Rules written as builder code: wiring mistakes fail when the rule is made, and matching
handles commutative operands, optional and any inputs, attribute predicates and guards."""

from __future__ import annotations

import numpy as np
import pytest

from amanda import Container, op
from amanda.errors import ArgumentError, SchemaError
from amanda.rewrite import ANY, Optional, Rule, matches, rewrite


def _silu_pattern(op, x):  # noqa: ANN001, ANN202 - pattern functions take the builder and variables
    return op.Mul(x, op.Sigmoid(x))


def _graph(children: list, edges: list, inputs: tuple = ("x",)) -> Container:
    return Container(None, "g", inputs=list(inputs), outputs=["y"], children=children, edges=edges,
                     attrs={"namespace": "amanda/onnx/17"})


def _silu(swapped: bool) -> Container:
    mul = ("s:Y", "m:A") if swapped else ("s:Y", "m:B")
    other = ("g:x", "m:B") if swapped else ("g:x", "m:A")
    return _graph([op("Sigmoid", "s", ["X"], ["Y"]), op("Mul", "m", ["A", "B"], ["C"])],
                  [("g:x", "s:X"), mul, other, ("m:C", "g:y")])


def test_a_misspelt_op_type_fails_when_the_rule_is_made() -> None:
    """``op.Mull`` raises a SchemaError at definition, naming the close match."""
    with pytest.raises(SchemaError, match="did you mean 'Mul'"):
        Rule("bad", lambda op, x: op.Mull(x, x))


@pytest.mark.parametrize(("pattern", "replacement", "message"), [
    (lambda op, x: op.Relu(x, x), None, "at most 1 inputs"),
    (lambda op, x: op.Conv(x, x, kernel_shap=[3]), None, "did you mean 'kernel_shape'"),
    (lambda op, x, y: op.Relu(x), None, r"\['y'\] unused"),
    (lambda op, x: x, None, "returning an op"),
    (lambda op, x: op.Relu(op.Relu(x, _as="r"), _as="r"), None, "capture names distinct"),
    (lambda op, x: op.Relu("x"), None, "inputs that are variables"),
    (_silu_pattern, lambda op, X: op.Swish(X), "did you mean 'x'"),
])
def test_wiring_mistakes_fail_when_the_rule_is_made(pattern, replacement, message: str) -> None:  # noqa: ANN001
    """Too many inputs, an unknown attribute, an unused variable, a pattern that returns no op, a
    capture named twice, a string input and a replacement parameter the pattern lacks: each an
    ArgumentError at definition, naming the rule."""
    with pytest.raises(ArgumentError, match=message) as caught:
        Rule("bad", pattern, replacement)
    assert "bad" in str(caught.value.path)


def test_a_deferred_check_still_catches_the_misspelling() -> None:
    """``check=False`` (rules made at import) defers the schema check to ``checked()``."""
    rule = Rule("bad", lambda op, x: op.Mull(x, x), check=False)
    with pytest.raises(SchemaError, match="did you mean 'Mul'"):
        rule.checked()


def test_rules_need_identifier_names_and_callable_guards() -> None:
    """A rule name that is no identifier, or a guard that is not a function, is an ArgumentError."""
    with pytest.raises(ArgumentError, match="identifier"):
        Rule("not a name", _silu_pattern)
    with pytest.raises(ArgumentError, match="function of the match"):
        Rule("silu", _silu_pattern, guard=3)  # type: ignore[arg-type]


def test_commutative_operands_match_either_way_unless_turned_off() -> None:
    """Mul(Sigmoid(x), x) matches Mul(x, Sigmoid(x)); with commute=False only the written order does."""
    rule = Rule("silu", _silu_pattern)
    strict = Rule("silu", _silu_pattern, commute=False)
    assert [len(matches(_silu(s), rule)) for s in (False, True)] == [1, 1]
    assert [len(matches(_silu(s), strict)) for s in (False, True)] == [1, 0]


def _conv(bias: bool) -> Container:
    c = lambda n, v: op("Constant", n, [], ["output"], {"value": np.asarray(v, np.float32)})  # noqa: E731
    children = [c("w", np.ones((1, 1, 1, 1))), op("Conv", "conv", ["X", "W", "B"] if bias else ["X", "W"], ["Y"],
                                                       {"kernel_shape": [1, 1]}), op("Relu", "r", ["X"], ["Y"])]
    edges = [("g:x", "conv:X"), ("w:output", "conv:W"), ("conv:Y", "r:X"), ("r:Y", "g:y")]
    if bias:
        children.append(c("b", [0.5]))
        edges.append(("b:output", "conv:B"))
    return _graph(children, edges)


def test_optional_and_any_inputs() -> None:
    """``Optional(b)`` matches a Conv with or without bias (binding None without); ``ANY`` matches
    whatever feeds the port; a plain variable needs the port connected."""
    optional = Rule("conv_relu", lambda op, x, w, b: op.Relu(op.Conv(x, w, Optional(b))))
    anything = Rule("conv_relu", lambda op, x: op.Relu(op.Conv(x, ANY, ANY)))
    required = Rule("conv_relu", lambda op, x, w, b: op.Relu(op.Conv(x, w, b)))
    found = [matches(_conv(bias), optional) for bias in (True, False)]
    assert [len(f) for f in found] == [1, 1]
    assert found[0][0].constant("b").tolist() == [0.5] and found[1][0].values["b"] is None
    assert [len(matches(_conv(bias), anything)) for bias in (True, False)] == [1, 1]
    assert [len(matches(_conv(bias), required)) for bias in (True, False)] == [1, 0]


def test_attribute_predicates_and_guards() -> None:
    """An attribute given as a value must equal it, as a function must satisfy it; a guard sees
    the match (captured ops, constants) and can refuse it."""
    def rule(**attrs: object) -> Rule:
        return Rule("conv_relu", lambda op, x, w: op.Relu(op.Conv(x, w, ANY, **attrs)))

    model = _conv(True)
    assert len(matches(model, rule(kernel_shape=[1, 1]))) == 1
    assert len(matches(model, rule(kernel_shape=[3, 3]))) == 0
    assert len(matches(model, rule(kernel_shape=lambda k: k is not None and len(k) == 2))) == 1
    assert len(matches(model, rule(group=lambda g: g is None))) == 1  # absent: the predicate sees None
    wide = Rule("conv_relu", lambda op, x, w: op.Relu(op.Conv(x, w, ANY)), guard=lambda m: m.constant("w").size > 1)
    assert matches(model, wide) == []


def test_a_value_read_outside_the_match_stops_it() -> None:
    """When the Sigmoid's output is also a model output, fusing would lose it: no match."""
    model = _silu(False)
    read_twice = Container(None, "g", inputs=["x"], outputs=["y", "z"], children=model.children,
                           edges=[*model.edges, ("s:Y", "g:z")], attrs=model.attrs)
    assert len(matches(model, Rule("silu", _silu_pattern))) == 1
    assert matches(read_twice, Rule("silu", _silu_pattern)) == []


def test_numbers_in_patterns_match_scalar_constants_within_rounding() -> None:
    """``op.Mul(x, 0.5)`` matches a float16 constant 0.5 and not 0.25."""
    def model(value: float) -> Container:
        return _graph([op("Constant", "c", [], ["output"], {"value": np.asarray(value, np.float16)}),
                       op("Mul", "m", ["A", "B"], ["C"])], [("g:x", "m:A"), ("c:output", "m:B"), ("m:C", "g:y")])

    half = Rule("half", lambda op, x: op.Mul(x, 0.5))
    assert [len(matches(model(v), half)) for v in (0.5, 0.25)] == [1, 0]


def test_rules_and_models_are_checked() -> None:
    """rewrite refuses a model that is not a Container and rules that are not Rules."""
    with pytest.raises(ArgumentError, match="model"):
        rewrite("model", Rule("silu", _silu_pattern))  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="a Rule or a list of Rules"):
        rewrite(_silu(False), ["silu"])
