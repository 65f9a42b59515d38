"""The rule language's declarative parts: ``const`` inputs (of a rank), the ``real`` attribute
predicate, and the match context rules ask where an op can live and what rank a value has."""

from __future__ import annotations

import numpy as np
import pytest

from amanda import Container, op
from amanda.errors import ArgumentError
from amanda.rewrite import Optional, Rule, matches
from amanda.rewrite.context import MatchContext, context_of, onnx_opset, rank, target
from amanda.rewrite.match import LevelView, TreeView, find_matches
from amanda.rewrite.pattern import Var, const, real
from amanda.types import infer_types


def _constant(name: str, value: object) -> Container:
    return op("Constant", name, [], ["output"], {"value": np.asarray(value, np.float32)})


def _scaled(scale: object | None, namespace: str = "amanda/onnx/17") -> Container:
    """y = Mul(x, s): s a Constant holding ``scale``, or the graph's second input when None."""
    children = [op("Mul", "m", ["A", "B"], ["C"])]
    edges = [("g:x", "m:A"), ("m:C", "g:y")]
    if scale is None:
        edges.append(("g:s", "m:B"))
    else:
        children.append(_constant("s", scale))
        edges.append(("s:output", "m:B"))
    return Container(None, "g", inputs=["x", "s"] if scale is None else ["x"], outputs=["y"], children=children,
                     edges=edges, attrs={"namespace": namespace})


SCALED = Rule("scaled", lambda op, x, s: op.Mul(x, const(s, ndim=0)), commute=False)


@pytest.mark.parametrize(("scale", "found"), [(2.0, 1), ([2.0, 3.0], 0), (None, 0)])
def test_a_const_input_matches_only_a_constant_of_its_rank(scale: object, found: int) -> None:
    """``const(s, ndim=0)``: a scalar Constant matches; a vector Constant or a graph input does not."""
    assert len(matches(_scaled(scale), SCALED)) == found


def test_const_requirements_run_before_the_guard_given() -> None:
    """The guard given sees only matches whose constants hold, and can read their arrays."""
    seen = []
    rule = Rule("scaled", lambda op, x, s: op.Mul(x, const(s, ndim=(0, 1))), commute=False,
                guard=lambda m: seen.append(m.constant("s").tolist()) or m.constant("s").size == 2)
    assert rule.given is not None and rule.guard is not rule.given
    assert [len(matches(_scaled(v), rule)) for v in (1.0, [1.0, 2.0], [[1.0, 2.0]], None)] == [0, 1, 0, 0]
    assert seen == [1.0, [1.0, 2.0]]


def test_an_optional_const_input_may_be_unconnected_but_not_computed() -> None:
    """``Optional(const(b))``: an unconnected port or a Constant matches; a computed value does not."""
    rule = Rule("conv", lambda op, x, w, b: op.Conv(x, const(w), Optional(const(b))))

    def conv(bias: str | None) -> Container:
        children = [_constant("w", np.ones((1, 1, 1))), _constant("b", [1.0]), op("Conv", "c", ["X", "W", "B"], ["Y"])]
        edges = [("g:x", "c:X"), ("w:output", "c:W"), ("c:Y", "g:y")]
        edges += [] if bias is None else [("b:output" if bias == "constant" else "g:b", "c:B")]
        return Container(None, "g", inputs=["x", "b"], outputs=["y"], children=children, edges=edges,
                         attrs={"namespace": "amanda/onnx/17"})

    assert [len(matches(conv(b), rule)) for b in (None, "constant", "input")] == [1, 1, 0]


@pytest.mark.parametrize(("var", "ndim"), [("w", None), (Var("w"), -1), (Var("w"), (2, "3")), (Var("w"), True)])
def test_const_names_a_bad_variable_or_rank(var: object, ndim: object) -> None:
    with pytest.raises(ArgumentError, match="const"):
        const(var, ndim=ndim)  # type: ignore[arg-type]


@pytest.mark.parametrize(("predicate", "value", "holds"), [
    (real(0, default=0), None, True), (real(0, default=0), np.int64(0), True), (real(0, default=0), False, True),
    (real(0, default=0), 1, False), (real(0, default=0), "0", False), (real(0), None, False),
    (real(default=1e-5), np.asarray(0.5, np.float32), True), (real(default=1e-5), np.ones(2), False),
    (real(), [1.0], False)])
def test_real_reads_numbers_of_every_kind_and_absent_as_its_default(predicate: real, value: object,
                                                                      holds: bool) -> None:
    assert predicate(value) is holds


def test_real_as_an_attribute_predicate_in_a_pattern() -> None:
    """A BatchNormalization matches ``training_mode=real(0, default=0)`` without the attribute
    or with 0, not in training mode."""
    rule = Rule("bn", lambda op, x, s, b, m, v: op.BatchNormalization(x, s, b, m, v, training_mode=real(0, default=0)))

    def bn(attrs: dict) -> Container:
        ports = ["X", "scale", "B", "input_mean", "input_var"]
        return Container(None, "g", inputs=ports, outputs=["y"], attrs={"namespace": "amanda/onnx/17"},
                         children=[op("BatchNormalization", "bn", ports, ["Y"], attrs)],
                         edges=[*((f"g:{p}", f"bn:{p}") for p in ports), ("bn:Y", "g:y")])

    assert [len(matches(bn(a), rule)) for a in ({}, {"training_mode": 0}, {"training_mode": 1})] == [1, 1, 0]
    assert matches(bn({"training_mode": None}), rule) == []  # set, to no number: not the default


GELU_LIKE = Rule("gelu_like", lambda op, x: op.Mul(x, op.Sigmoid(x)))


@pytest.mark.parametrize(("namespace", "internal", "since", "placed"), [
    ("amanda/onnx/24", False, 24, {}), ("amanda/onnx/17", False, 20, None),
    ("amanda/onnx/17", True, 20, {"namespace": "amanda/fused"}), ("amanda/onnx/com.example/30", False, 20, None)])
def test_target_places_a_new_op_where_its_opset_allows(namespace: str, internal: bool, since: int,
                                                        placed: object) -> None:
    """The level's ONNX opset decides; below ``since`` amanda's own op only where the context allows."""
    g = Container(None, "g", inputs=["x"], outputs=["y"], attrs={"namespace": namespace},
                  children=[op("Sigmoid", "s", ["X"], ["Y"]), op("Mul", "m", ["A", "B"], ["C"])],
                  edges=[("g:x", "s:X"), ("g:x", "m:A"), ("s:Y", "m:B"), ("m:C", "g:y")])
    (match,) = find_matches(TreeView(g), GELU_LIKE, MatchContext(namespace, internal=internal))
    assert target(match, since) == placed
    (bare,) = find_matches(TreeView(g), GELU_LIKE)  # no context: the ops' own namespace (none here), nothing of amanda's
    assert context_of(bare) == MatchContext() and target(bare, since) is None


def test_an_op_that_sets_its_own_namespace_decides_over_the_level() -> None:
    g = Container(None, "g", inputs=["x"], outputs=["y"], attrs={"namespace": "amanda/onnx/17"},
                  children=[op("Sigmoid", "s", ["X"], ["Y"], {"namespace": "amanda/onnx/24"}),
                            op("Mul", "m", ["A", "B"], ["C"])],
                  edges=[("g:x", "s:X"), ("g:x", "m:A"), ("s:Y", "m:B"), ("m:C", "g:y")])
    (match,) = find_matches(TreeView(g), GELU_LIKE, MatchContext("amanda/onnx/17"))
    assert target(match, 24) == {"namespace": "amanda/onnx/24"}


@pytest.mark.parametrize(("shape", "found"), [((3, 2), 2), ((1, 3, 2), 3), (None, None)])
def test_rank_reads_the_inferred_type_of_a_captured_ops_input(shape: tuple | None, found: int | None) -> None:
    """The rank of MatMul's left operand, from the types the context holds (None: unknown)."""
    rule = Rule("mm", lambda op, a, b: op.MatMul(a, b, _as="mm"))
    feeds = {"x": ("float32", shape)} if shape is not None else {}
    g = Container(None, "g", inputs=["x"], outputs=["y"], attrs={"namespace": "amanda/onnx/17"},
                  children=[_constant("w", np.ones((2, 2))), op("MatMul", "mm", ["A", "B"], ["Y"])],
                  edges=[("g:x", "mm:A"), ("w:output", "mm:B"), ("mm:Y", "g:y")])
    view = TreeView(g)
    (match,) = find_matches(view, rule, MatchContext(types=infer_types(g, feeds)))
    assert rank(match, "mm") == found
    (untyped,) = find_matches(view, rule, MatchContext())
    assert rank(untyped, "mm") is None


def test_onnx_opset_reads_only_the_default_domain() -> None:
    assert [onnx_opset(n) for n in ("amanda/onnx/20", "amanda/onnx", "amanda/onnx-ml/3", "amanda/core/1", "", 5)] == \
        [20, 0, 0, 0, 0, 0]


def test_a_level_view_gives_the_same_context_answers() -> None:
    """The optimiser's level view (keys are names) answers like the tree view."""
    from amanda.passes.level import Level

    g = _scaled(2.0, namespace="amanda/onnx/24")
    (match,) = find_matches(LevelView(Level.of(g)), SCALED, MatchContext("amanda/onnx/24"))
    assert match.constant("s").tolist() == 2.0 and target(match, 24) == {}


def test_const_value_reads_a_constant_and_names_a_value_that_is_none() -> None:
    """The array of a ``const`` variable; for a value no Constant produces, an ArgumentError
    naming the rule and the variable."""
    from amanda.rewrite.context import const_value

    rule = Rule("scaled", lambda op, x, s: op.Mul(x, s), commute=False)
    (constant,) = matches(_scaled([1.0, 2.0]), rule)
    assert const_value(constant, "s").tolist() == [1.0, 2.0]
    (computed,) = matches(_scaled(None), rule)
    with pytest.raises(ArgumentError, match=r"scaled\.s"):
        const_value(computed, "s")


def test_a_replaced_rule_wraps_its_given_guard_once() -> None:
    """``dataclasses.replace`` of a rule with ``const`` inputs keeps one requirements check
    around the guard given, which stays ``rule.given``."""
    import dataclasses

    guard = lambda m: True  # noqa: E731 - a guard to recognise
    rule = Rule("scaled", lambda op, x, s: op.Mul(x, const(s)), guard=guard)
    again = dataclasses.replace(rule, name="again")
    assert again.given is guard and again.guard.then is guard
    assert len(matches(_scaled(2.0), again)) == 1 and matches(_scaled(None), again) == []
