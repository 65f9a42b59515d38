"""Completeness of the op registry: every op amanda can run is typed, says how it
differentiates, and is kept by CSE and dead-code elimination when it is not pure."""

from __future__ import annotations

import pytest

import amanda
import amanda.exec.dist.partition  # noqa: E402, F401  (registers Send and Recv)
from amanda.ops import Effect, define
from amanda.ops.registry import ONNX, OpDef, entries, entry
from amanda.passes import eliminate_common_subexpressions, eliminate_dead_code


def _shipped(e: OpDef) -> bool:
    """Whether amanda itself registered the op's kernels (not a test's or a user's)."""
    return all(v.fn.__module__.startswith("amanda.") for v in (*e.kernels, *e.session_kernels))


RUNNABLE = [e for e in entries() if (e.kernels or e.session_kernels) and _shipped(e)]


def _key(e: OpDef) -> str:
    return f"{e.family}{'/' + e.domain if e.domain else ''} {e.op_type}"


def test_there_is_something_to_check() -> None:
    """The shipped families all register ops."""
    assert {e.family for e in RUNNABLE} >= {ONNX, "amanda/core", "amanda/tensorflow", "amanda/fused", "amanda/train",
                                            "amanda/dist"}
    assert len(RUNNABLE) > 200


def test_every_op_with_a_kernel_has_a_type_rule() -> None:
    """Type inference knows every op a Session can run."""
    assert [_key(e) for e in RUNNABLE if e.type_rule is None] == []


def test_every_op_with_a_kernel_says_how_it_differentiates() -> None:
    """A gradient rule, or a reason: no gradient (and why), or no rule yet (and why); never
    silence. An op with a rule is not also marked as lacking one."""
    assert [_key(e) for e in RUNNABLE if e.differentiable is None] == []
    for e in entries():
        for reason in (e.no_gradient, e.gradient_gap):
            assert reason is None or (isinstance(reason, str) and reason), _key(e)
        assert not (e.vjp is not None and e.gradient_gap is not None), _key(e)


def test_a_rule_closes_a_gap_and_the_definition_api_checks_its_arguments() -> None:
    """Registering a vjp clears gradient_gap; a definition refuses a non-function rule and an
    empty reason with ArgumentErrors naming the field."""
    d = define("Gap", family="amanda/test-completeness", gradient_gap="not yet")
    assert d.entry.differentiable is False
    d.vjp(lambda n: [n.grad()])
    assert d.entry.differentiable is True and d.entry.gradient_gap is None
    with pytest.raises(amanda.ArgumentError, match="vjp"):
        d.vjp(3)  # type: ignore[arg-type]
    with pytest.raises(amanda.ArgumentError, match="no_gradient"):
        d.not_differentiable("")


def test_session_kernels_and_bodies_make_an_op_impure() -> None:
    """An op run with the session (state, control flow) or holding bodies is never pure."""
    assert [_key(e) for e in RUNNABLE if e.session_kernels and e.pure] == []
    assert [_key(e) for e in entries() if e.bodies and e.effect is not Effect.CONTROL] == []
    assert {e.op_type for e in entries(ONNX, "") if e.effect is Effect.RANDOM} >= {
        "RandomNormal", "RandomUniform", "Bernoulli", "Multinomial"}


def _namespace(e: OpDef) -> str:
    return f"{ONNX}/{e.domain}/1" if e.family == ONNX and e.domain else (f"{ONNX}/17" if e.family == ONNX else e.family)


def _twins(op_type: str, namespace: str) -> amanda.Container:
    """Two identical ops of ``op_type`` reading the graph's input, their outputs unused."""
    twins = [amanda.op(op_type, name, ["x"], ["y"]) for name in ("a", "b")]
    return amanda.Container(None, "g", inputs=["x"], outputs=["out"], children=twins,
                            edges=[("g:x", "a:x"), ("g:x", "b:x"), ("g:x", "g:out")], attrs={"namespace": namespace})


IMPURE = [e for e in entries() if not e.pure]


@pytest.mark.parametrize("e", IMPURE, ids=_key)
def test_every_impure_op_is_kept_by_cse_and_dce(e: OpDef) -> None:
    """Neither pass removes or merges an op with effects, whatever the family."""
    g = _twins(e.op_type, _namespace(e))
    assert [c.name for c in eliminate_dead_code(g).model.children] == ["a", "b"]
    assert [c.name for c in eliminate_common_subexpressions(g).model.children] == ["a", "b"]


def test_a_pure_op_is_merged_and_removed() -> None:
    """The check above can fail: pure twins are merged by CSE and dropped by DCE."""
    assert entry(ONNX, "Relu").pure and len(IMPURE) > 20
    g = _twins("Relu", f"{ONNX}/17")
    assert [c.name for c in eliminate_common_subexpressions(g).model.children] == ["a"]
    assert [c.name for c in eliminate_dead_code(g).model.children] == []
