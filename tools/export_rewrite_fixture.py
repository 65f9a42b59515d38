"""Export the model whose LayerNorms are written out into tests/fixtures/onnx/rewrite/, once, so
CI needs no torch: the fixture on which amanda.rewrite and onnxscript's rewriter must find the
same LayerNorm matches (tools/compare_rewrite.py; the real-model fixtures use the
LayerNormalization op and hold none).

    PYTHONPATH=. /path/to/env-with-torch/bin/python tools/export_rewrite_fixture.py

Three blocks, each a written-out LayerNorm (the square as ``pow(2)`` or ``d * d``, the
normalisation as a division or a multiplication by a reciprocal), a Linear and a written-out
erf GELU, exported with the dynamo exporter (ReduceMean with its axes as an input, the form
onnxscript's LayerNorm rule matches) and its default optimisation (constants folded; no fusion).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "onnx" / "rewrite"


class WrittenLayerNorm(torch.nn.Module):
    """LayerNorm over the last axis written out: ``scale * (x - mean) / sqrt(var + eps)``."""

    def __init__(self, width: int, squared_by_pow: bool, divided: bool) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.rand(width) + 0.5)
        self.squared_by_pow, self.divided = squared_by_pow, divided

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x - x.mean(-1, keepdim=True)
        variance = (d.pow(2) if self.squared_by_pow else d * d).mean(-1, keepdim=True)
        std = torch.sqrt(variance + 1e-5)
        return (d / std if self.divided else d * torch.reciprocal(std)) * self.scale


class ErfGelu(torch.nn.Module):
    """GELU written out with erf (``nn.GELU`` exports as one Gelu op at opset 20)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * (x * (torch.erf(x / math.sqrt(2)) + 1.0))


class Block(torch.nn.Module):
    """Written-out LayerNorm, Linear, GELU (erf)."""

    def __init__(self, width: int, squared_by_pow: bool, divided: bool) -> None:
        super().__init__()
        self.norm = WrittenLayerNorm(width, squared_by_pow, divided)
        self.linear = torch.nn.Linear(width, width)
        self.act = ErfGelu()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.act(self.linear(self.norm(x)))


class Net(torch.nn.Module):
    """Three blocks, one per LayerNorm form."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(width, p, d) for p, d in ((True, True), (False, True), (True, False)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def main() -> None:
    """Write layer_norms.onnx, layer_norms.json (input shape and dtype) and layer_norms.npz
    (an input and torch's output for it)."""
    torch.manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)
    x = torch.randn(2, 3, 8)
    net = Net().eval()
    torch.onnx.export(net, (x,), str(OUT / "layer_norms.onnx"), dynamo=True, optimize=True,
                      input_names=["x"], output_names=["y"], external_data=False)
    with torch.no_grad():
        np.savez(OUT / "layer_norms.npz", x=x.numpy(), y=net(x).numpy())
    (OUT / "layer_norms.json").write_text(json.dumps({"inputs": {"x": {"dtype": "float32", "shape": [2, 3, 8]}}}) + "\n")


if __name__ == "__main__":
    main()
