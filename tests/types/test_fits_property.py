"""Oracle (b): every value the executor computes fits the type inferred for its port."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")

import amanda
from amanda.io.onnx import from_onnx
from amanda.types import fits, infer_types
from tests.conformance.onnx_cases import all_cases
from tests.fixtures.onnx import onnx_models as models
from tests.types.oracle import strip_types
from tests.types.test_check import GOOD, _model, chains
from tests.types.test_onnx_oracle import _claimed

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def _check_every_value(container: amanda.Container, feeds: dict) -> int:
    """Run the model fetching every leaf output; assert each fits its type; return how many."""
    types = infer_types(container)
    flat = amanda.flatten(container)
    fetches = [amanda.Endpoint(path, port.name) for path, op in flat.ops.items() for port in op.outputs]
    values = amanda.Session(container).run(fetches, feeds)
    bindings: dict = {}
    for name, value in feeds.items():
        assert fits(types.input((), name), value, bindings), (name, types.input((), name))
    for endpoint, value in zip(fetches, values):
        t = types.output(endpoint.op, endpoint.port)
        assert fits(t, value, bindings), (endpoint, t, amanda.exec.dispatch.describe(value), bindings)
    return len(fetches)


@pytest.mark.parametrize("name", ["mlp", "cnn", "attention", "control_flow"])
def test_fixture_models_values_fit(name):
    """Each intermediate value of the fixture models fits its inferred (symbolic) type."""
    build = getattr(models, name)
    container = from_onnx(build())
    assert _check_every_value(container, models.feeds(name, batch=3)) > 3


def test_transformer_values_fit():
    """Each intermediate value of a small exported transformer fits its inferred type."""
    from bench_onnx import transformer_encoder

    container = from_onnx(transformer_encoder(layers=1))
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((2, 5, 32)).astype(np.float32),
             "mask": (rng.random((2, 5)) > 0.2).astype(np.int64)}
    feeds = {p.name: feeds[p.name].astype(p.attrs["dtype"]) for p in container.inputs}
    assert _check_every_value(container, feeds) > 100


def test_backend_case_outputs_fit():
    """On the backend node cases, the outputs the executor computes fit their inferred types."""
    claimed, seen, checked = _claimed(), set(), 0
    for case in all_cases():
        key = case.name.split("[")[0]
        if case.domain or case.op_type not in claimed or key in seen:
            continue
        seen.add(key)
        container = from_onnx(strip_types(case.model))  # inferred, not declared, output types
        names = [vi.name for vi in case.model.graph.input
                 if vi.name not in {t.name for t in case.model.graph.initializer}]
        feeds = dict(zip(names, case.inputs))
        types = infer_types(container)
        outputs = [p.name for p in container.outputs]
        try:
            values = amanda.Session(container).run(outputs, feeds)
        except amanda.AmandaError:
            continue  # the few cases amanda's kernels do not pass are the conformance suite's concern
        bindings: dict = {}
        for name, value in zip(outputs, values):
            assert fits(types.output((), name), value, bindings), (key, name, types.output((), name))
        checked += 1
    assert checked > 900


@settings(max_examples=25)
@given(chains, st.integers(1, 5))
def test_random_chains_values_fit(chain, batch):
    """Random nested chains run by the executor give values that fit their symbolic types."""
    model, _ = _model([GOOD[k]() for k, _ in chain], [d for _, d in chain])
    x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
    assert _check_every_value(model, {"x": x}) >= len(chain)
