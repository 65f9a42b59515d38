"""Export small real models from torch into tests/fixtures/onnx/from_torch/, once, so CI needs no torch.

    pip install torch==2.13.0 onnxscript   # the bench extra; CPU build
    python tools/export_fixture_models.py

Each model is exported with a fixed seed; a JSON file beside it records the input shapes and
dtypes the tests feed. The models: an LSTM tagger (embedding, LSTM, linear), a two-layer
bidirectional GRU, a model whose forward branches on its input with ``torch.cond`` (an ONNX If,
then-branch written first, as torch writes it), a small MLP exported with its modules as
model-local functions, one whose function takes an attribute (each call's LeakyRelu slope,
which the body refers to with ``ref_attr_name``), and a scripted loop whose body branches (an
ONNX Loop with an If in its body).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "onnx" / "from_torch"


class Tagger(torch.nn.Module):
    """Token ids -> tag scores: Embedding, LSTM, Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.lstm = torch.nn.LSTM(16, 12, batch_first=True)
        self.tags = torch.nn.Linear(12, 5)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.lstm(self.embed(tokens))
        return self.tags(hidden)


class BiGRU(torch.nn.Module):
    """Two layers of bidirectional GRU over float features, then a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = torch.nn.GRU(6, 10, num_layers=2, bidirectional=True)
        self.head = torch.nn.Linear(20, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x)
        return self.head(out)


class Branching(torch.nn.Module):
    """Doubles its input when the sum is positive, else negates it and adds one."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: t * 2.0, lambda t: -t + 1.0, (x,))


class Block(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)) + x


class Functions(torch.nn.Module):
    """Two residual blocks, exported as model-local functions."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = Block(8), Block(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x))


class Scaled(torch.nn.Module):
    """Linear, LeakyRelu of a per-instance slope, times two: exported as a function whose slope
    is a function attribute."""

    def __init__(self, width: int, slope: float) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(width, width)
        self.slope = slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.leaky_relu(self.linear(x), self.slope) * 2


class Slopes(torch.nn.Module):
    """Three calls of one function, two of them with the same slope."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = Scaled(8, 0.1), Scaled(8, 0.3), Scaled(8, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(self.b(self.a(x)))


def export_function_attributes() -> None:
    """The model whose local function takes an attribute (its own seed, so adding it changed
    no other fixture)."""
    torch.manual_seed(1)
    x = torch.randn(2, 8)
    torch.onnx.export(Slopes().eval(), (x,), OUT / "function_attributes.onnx", dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"], export_modules_as_functions={Scaled})
    _save("function_attributes", {"x": x})


class ScriptedLoop(torch.nn.Module):
    """Sums the input's rows, doubling those whose sum is positive and negating the others: a
    TorchScript loop with a data-dependent branch in its body."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        acc = torch.zeros_like(x[0])
        for i in range(x.size(0)):
            row = x[i]
            if bool(row.sum() > 0):
                acc = acc + row * 2.0
            else:
                acc = acc - row
        return acc


def export_scripted_loop() -> None:
    """The scripted Loop-with-If model (its own seed, so adding it changed no other fixture)."""
    torch.manual_seed(2)
    x = torch.randn(6, 4)
    torch.onnx.export(torch.jit.script(ScriptedLoop()), (x,), OUT / "scripted_loop.onnx", dynamo=False,
                      opset_version=17, input_names=["x"], output_names=["y"])
    _save("scripted_loop", {"x": x})


def _save(name: str, inputs: dict[str, torch.Tensor]) -> None:
    spec = {k: {"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")} for k, v in inputs.items()}
    (OUT / f"{name}.json").write_text(json.dumps(spec, indent=1) + "\n")


def main() -> None:
    """Export every fixture model."""
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    tokens = torch.randint(0, 50, (2, 7))
    torch.onnx.export(Tagger().eval(), (tokens,), OUT / "lstm_tagger.onnx", dynamo=False, opset_version=17,
                      input_names=["tokens"], output_names=["tags"])
    _save("lstm_tagger", {"tokens": tokens})
    x = torch.randn(5, 2, 6)
    torch.onnx.export(BiGRU().eval(), (x,), OUT / "bigru.onnx", dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"])
    _save("bigru", {"x": x})
    x = torch.randn(3, 4)
    program = torch.onnx.export(Branching().eval(), (x,), dynamo=True, input_names=["x"], output_names=["y"])
    program.save(str(OUT / "torch_if.onnx"))
    _save("torch_if", {"x": x})
    x = torch.randn(2, 8)
    torch.onnx.export(Functions().eval(), (x,), OUT / "local_functions.onnx", dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"], export_modules_as_functions={Block})
    _save("local_functions", {"x": x})
    export_function_attributes()
    export_scripted_loop()
    print(f"wrote {sorted(p.name for p in OUT.iterdir())}")


if __name__ == "__main__":
    main()
