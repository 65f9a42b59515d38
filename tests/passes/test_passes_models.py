"""Every ONNX model of the test corpus gives the same outputs optimised and not, against onnxruntime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import amanda  # noqa: E402
from amanda.errors import ExecutionError  # noqa: E402
from amanda.io.onnx.export import to_onnx  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402
from tests.fixtures.onnx import onnx_models  # noqa: E402

FROM_TORCH = Path(__file__).resolve().parents[1] / "fixtures" / "onnx" / "from_torch"


def _torch_case(name: str) -> tuple:
    proto = onnx.load(str(FROM_TORCH / f"{name}.onnx"))
    rng = np.random.default_rng(0)
    feeds = {}
    for key, spec in json.loads((FROM_TORCH / f"{name}.json").read_text()).items():
        shape, dtype = tuple(spec["shape"]), np.dtype(spec["dtype"])
        feeds[key] = rng.integers(0, 10, shape).astype(dtype) if dtype.kind == "i" else rng.standard_normal(shape).astype(dtype)
    return proto, feeds


CASES = {name: (lambda n=name: (onnx_models.BUILDERS[n](), onnx_models.feeds(n))) for name in onnx_models.BUILDERS}
CASES.update({p.stem: (lambda n=p.stem: _torch_case(n)) for p in sorted(FROM_TORCH.glob("*.onnx"))})


def _run(model: amanda.Container, names: list[str], feeds: dict) -> list:
    with amanda.Session(model) as session:
        return session.run(names, feeds)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("specialised", [False, True])
def test_optimised_model_computes_what_onnxruntime_does(name: str, specialised: bool) -> None:
    """The optimised model (input shapes specialised or not), run by amanda and exported to onnxruntime, matches onnxruntime on the original."""
    proto, feeds = CASES[name]()
    names = [o.name for o in proto.graph.output]
    expected = onnx_models.run(proto, feeds)
    model = from_onnx(proto)
    result = amanda.optimize(model, inputs=feeds if specialised else None)
    assert len(result.reports) >= 6
    for theirs, exported in zip(expected, onnx_models.run(to_onnx(result.model), feeds)):
        np.testing.assert_allclose(exported, theirs, rtol=1e-4, atol=1e-5)
    try:
        plain = _run(model, names, feeds)
    except ExecutionError:  # ops amanda has no kernels for (ai.onnx.ml): onnxruntime's run above is the check
        return
    for theirs, ours, before in zip(expected, _run(result.model, names, feeds), plain):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(ours, before, rtol=1e-5, atol=1e-6)


def test_torch_shape_chains_fold_away_once_inputs_are_specialised() -> None:
    """With the input shapes fixed, no Shape op of the exported LSTM tagger is left to run."""
    proto, feeds = _torch_case("lstm_tagger")
    model = from_onnx(proto)
    before = [c.type for c in model]  # every op, in whichever module container it sits
    after = [c.type for c in amanda.optimize(model, inputs=feeds).model]
    assert "Shape" in before and "Shape" not in after
    assert len(after) < len(before)
