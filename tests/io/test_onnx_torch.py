"""Models exported by torch (when it is installed): import, export, and the same results."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from amanda.io.onnx import from_onnx, load_onnx, to_onnx
from amanda.namespaces.model_fit import validate
from tests.fixtures.onnx import onnx_models as models


def _export(module: torch.nn.Module, example: torch.Tensor, path) -> onnx.ModelProto:
    module.eval()
    try:
        torch.onnx.export(
            module,
            (example,),
            str(path),
            input_names=["x"],
            output_names=["y"],
            opset_version=17,
            dynamo=False,
        )
    except TypeError:  # a torch without the ``dynamo`` switch
        torch.onnx.export(
            module, (example,), str(path), input_names=["x"], output_names=["y"], opset_version=17
        )
    except Exception as exc:  # noqa: BLE001 - exporter extras (onnxscript …) may be missing
        pytest.skip(f"torch cannot export ONNX here: {exc}")
    return onnx.load(str(path))


class _Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.attn(x, x, x, need_weights=False)
        return self.norm(x + out)


MODULES = {
    "mlp": (
        lambda: torch.nn.Sequential(
            torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)
        ),
        (2, 6),
    ),
    "cnn": (
        lambda: torch.nn.Sequential(
            torch.nn.Conv2d(1, 4, 3, padding=1),
            torch.nn.BatchNorm2d(4),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Flatten(),
            torch.nn.Linear(4 * 4 * 4, 5),
        ),
        (2, 1, 8, 8),
    ),
    "attention": (_Attention, (2, 5, 8)),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_torch_exports_round_trip_with_the_same_results(name, tmp_path):
    """A torch-exported model imports validly, exports to a model onnxruntime runs identically,
    and its export imports back equal."""
    torch.manual_seed(0)
    build, shape = MODULES[name]
    module = build()
    example = torch.randn(*shape)
    original = _export(module, example, tmp_path / f"{name}.onnx")
    c = load_onnx(tmp_path / f"{name}.onnx")
    assert validate(c) == []
    exported = to_onnx(c)
    onnx.checker.check_model(exported, full_check=True)
    feeds = {"x": example.numpy()}
    (want,), (got,) = models.run(original, feeds), models.run(exported, feeds)
    assert np.array_equal(want, got)
    with torch.no_grad():
        assert np.allclose(module(example).numpy(), got, atol=1e-5)
    assert from_onnx(exported) == c
