"""Real models exported from torch (tools/export_gradient_fixtures.py, committed so CI needs no
torch): amanda's gradients of the loss with respect to every weight and the input equal the
gradients torch's autograd computed, for an LSTM, a bidirectional GRU, a torch.cond model (an
If, each branch taken), a MobileNetV3 block stack (HardSwish, HardSigmoid, BatchNorm), a UNet
(ConvTranspose, Resize) and an InstanceNorm CNN."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import amanda  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gradients"
CASES = sorted(p.stem for p in FIXTURES.glob("*.npz"))


def test_every_model_has_its_fixtures():
    """The six models of the issue, the recurrent ones and the If with two input sets."""
    models = {c.split("@")[0] for c in CASES}
    assert models == {"lstm", "gru", "if", "mobilenetv3", "unet", "instancenorm"}
    assert {"if@0", "if@1", "lstm@1", "gru@1"} <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_gradients_match_torch(case: str) -> None:
    """Each gradient within 1e-4 of torch's, relative to its largest entry (float32 both)."""
    name = case.split("@")[0]
    net = from_onnx(onnx.load(FIXTURES / f"{name}.onnx"))
    data = np.load(FIXTURES / f"{case}.npz", allow_pickle=False)
    feeds = {k[len("in:"):]: data[k] for k in data.files if k.startswith("in:")}
    expected = {k[len("grad:"):]: data[k] for k in data.files if k.startswith("grad:")}
    # the importer nests a dotted initializer name (net.conv.weight) into scopes
    constants = [tuple(p) for p, node, _ in amanda.walk(net) if node.type == "Constant"]
    paths = {**{p[-1]: p for p in constants}, **{".".join(p): p for p in constants}}
    wrt = sorted(expected)
    g = amanda.grad(net, "loss", [paths.get(w, w) for w in wrt])
    with amanda.Session(g, threads=1) as s:
        got = s.run(["loss"] + [f"grad/{'/'.join(paths[w]) if w in paths else w}" for w in wrt], feeds)
    np.testing.assert_allclose(got[0], data["loss"], rtol=1e-5, atol=1e-5)
    overall = max(float(np.abs(v).max()) for v in expected.values())
    for w, value in zip(wrt, got[1:]):
        # relative to the gradient's largest entry, or to 1% of the largest of all for one that is
        # zero in exact arithmetic (a convolution's bias before InstanceNorm)
        scale = max(float(np.abs(expected[w]).max()), 1e-2 * overall)
        assert value.shape == expected[w].shape, w
        assert float(np.abs(value - expected[w]).max()) / scale < 1e-4, w
