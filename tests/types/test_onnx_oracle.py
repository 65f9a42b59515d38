"""Oracle (a): amanda's inferred types agree with onnx.shape_inference wherever ONNX infers one.

onnx runs with ``strict_mode=True, data_prop=True`` on each model with its value_info and output
types removed; amanda infers the import of the same model. Verdict counts over the backend node
cases (one model per case, for every op type amanda has a kernel for) are printed with ``-s``.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")

from amanda.exec.dispatch import session_op_types
from amanda.exec.kernels import registry
from tests.conformance.onnx_cases import all_cases
from tests.fixtures.onnx import onnx_models as models
from tests.types.oracle import amanda_types, compare, compare_one, strip_types

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def _claimed() -> set[str]:
    import amanda.opset.onnx.control_flow  # noqa: F401  (registers the session kernels)

    return set(registry.supported_op_types()) | set(session_op_types())


def _case_models() -> list[tuple[str, onnx.ModelProto]]:
    claimed, seen, found = _claimed(), set(), []
    for case in all_cases():
        key = case.name.split("[")[0]
        if case.domain or case.op_type not in claimed or key in seen:
            continue
        seen.add(key)
        found.append((key, case.model))
    return found


def test_verdict_of_one_value():
    """The comparison itself: onnx's made-up dims are unknown, concrete conflicts disagree."""
    from amanda.types import TensorType as T

    assert compare_one(T("float32", (2, "n")), T("float32", (2, "n"))) == "agree"
    assert compare_one(T("float32", (2, 3)), T("float32", (2, "unk__0"))) == "more"
    assert compare_one(T("float32", (2, None)), T("float32", (2, 3))) == "unknown"
    assert compare_one(T("float32", (2, 4)), T("float32", (2, 3))) == "disagree"
    assert compare_one(T("int64", (2, 3)), T("float32", (2, 3))) == "disagree"
    assert compare_one(None, T("float32", (2, 3))) == "unknown"


def test_backend_node_cases_agree_with_onnx(capsys):
    """On every backend node case of a claimed op type, no inferred type disagrees with ONNX's."""
    total: Counter = Counter()
    bad, skipped = [], []
    cases = _case_models()
    for name, model in cases:
        try:
            counts, disagreements = compare(model)
        except onnx.shape_inference.InferenceError:
            skipped.append(name)  # onnx's own strict inference refuses the case
            continue
        total += counts
        bad += [(name, *d) for d in disagreements]
    with capsys.disabled():
        print(f"\nbackend node cases: {len(cases)} models ({len(skipped)} refused by onnx): {dict(total)}")
    assert not bad, bad[:10]
    assert len(skipped) <= 2
    assert total["unknown"] <= 0.01 * sum(total.values())


def test_backend_node_cases_have_no_problems_or_unknown_ops():
    """Valid models give no type problems and every op of a claimed type has a rule."""
    for name, model in _case_models():
        try:
            _, types = amanda_types(strip_types(model))
        except Exception as exc:
            raise AssertionError(f"{name}: {exc}") from exc
        assert not types.problems, (name, types.problems)
        assert not types.unknown_ops, (name, types.unknown_ops)


@pytest.mark.parametrize("build", [models.mlp, models.cnn, models.attention, models.control_flow])
def test_fixture_models_agree_with_onnx(build):
    """The shared fixture models (MLP, CNN, attention, control flow) agree with ONNX."""
    counts, bad = compare(build())
    assert not bad and counts["unknown"] == 0, (counts, bad)


def test_exported_transformer_agrees_with_onnx(capsys):
    """A framework-style transformer export (shape arithmetic everywhere) agrees value by value."""
    from bench_onnx import transformer_encoder

    counts, bad = compare(transformer_encoder(layers=2))
    with capsys.disabled():
        print(f"\ntransformer (2 layers): {dict(counts)}")
    assert not bad and counts["unknown"] == 0, (counts, bad)
