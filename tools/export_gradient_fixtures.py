"""Export tiny real models from torch with torch's own gradients, so CI checks amanda's without torch.

    PYTHONPATH=. /work/torchenv/bin/python tools/export_gradient_fixtures.py   # any torch >= 2.4, CPU

Into tests/fixtures/gradients/: per model ``<name>.onnx`` (its forward returns the loss
``sum(model(x) * r)`` for a random ``r``, so the loss is in the graph) and ``<name>.npz`` with
the inputs (``in:<name>``), torch's loss (``loss``), torch's gradient of every ONNX
initializer (``grad:<initializer>``, in the layout the exporter wrote: an LSTM's or GRU's
weights with their gates reordered and biases joined as ONNX wants them) and of the float
inputs (``grad:<input>``), all float32. Several input sets of one model are ``<name>@<k>``.

The models: an LSTM and a bidirectional GRU with a linear head, a torch.cond model (an ONNX
If, both branches with weights of their own, fed so that each branch is taken), a small
MobileNetV3 block stack (HardSwish, HardSigmoid squeeze-excitation, depthwise convolutions,
BatchNorm in eval mode), a UNet-like encoder-decoder (ConvTranspose and a bilinear Resize
beside a skip connection) and an InstanceNorm CNN.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn
from torch.nn import functional as F  # noqa: N812

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gradients"


class Loss(nn.Module):
    """``sum(net(x) * r)``: the scalar every fixture differentiates."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return (self.net(x) * r).sum()


class Recurrent(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        cell = nn.LSTM if kind == "lstm" else nn.GRU
        self.rnn = cell(3, 4, batch_first=True, bidirectional=kind == "gru")
        self.head = nn.Linear(4 if kind == "lstm" else 8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return self.head(out)


class Branching(nn.Module):
    """tanh(a(x)) when sum(x) > 0, else sin(b(x)) * 2: an ONNX If."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: torch.tanh(self.a(t)), lambda t: torch.sin(self.b(t)) * 2.0, (x,))


class MobileBlock(nn.Module):
    """Inverted residual of MobileNetV3: expand, depthwise, squeeze-excite, project."""

    def __init__(self, c: int, hidden: int) -> None:
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(c, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.Hardswish())
        self.depth = nn.Sequential(nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False),
                                   nn.BatchNorm2d(hidden), nn.Hardswish())
        self.squeeze = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(hidden, 4, 1), nn.ReLU(),
                                     nn.Conv2d(4, hidden, 1), nn.Hardsigmoid())
        self.project = nn.Sequential(nn.Conv2d(hidden, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.depth(self.expand(x))
        return x + self.project(h * self.squeeze(h))


class MobileNetV3(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
        self.blocks = nn.Sequential(MobileBlock(8, 16), MobileBlock(8, 12))
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


class UNet(nn.Module):
    """One level down and up: the decoder joins a ConvTranspose and a bilinear Resize of the
    bottleneck with the encoder's skip connection."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Conv2d(1, 4, 3, padding=1)
        self.mid = nn.Conv2d(4, 6, 3, padding=1)
        self.up = nn.ConvTranspose2d(6, 4, 2, stride=2)
        self.out = nn.Conv2d(4 + 6 + 4, 1, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = F.relu(self.enc(x))
        bottom = F.relu(self.mid(F.max_pool2d(skip, 2)))
        resized = F.interpolate(bottom, scale_factor=2.0, mode="bilinear", align_corners=False)
        return self.out(torch.cat([self.up(bottom), resized, skip], dim=1))


class InstanceNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.norm = nn.InstanceNorm2d(4, affine=True)
        self.head = nn.Conv2d(4, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.relu(self.norm(self.conv(x))))


def _param_grads(net: nn.Module, inputs: list[torch.Tensor]) -> tuple[float, dict[str, np.ndarray], list]:
    for p in net.parameters():
        p.grad = None
    xs = [t.clone().requires_grad_(True) for t in inputs]
    loss = net(*xs)
    loss.backward()
    grads = {name: p.grad.detach().numpy() for name, p in net.named_parameters()}
    return float(loss), grads, [x.grad.detach().numpy() if x.grad is not None else None for x in xs]


def _onnx_layout(net: nn.Module, grads: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(value, gradient) per candidate ONNX initializer: each parameter as it is, and an LSTM's
    or GRU's weights in ONNX's layout (gates i,o,f,c from torch's i,f,g,o; z,r,h from r,z,n;
    directions stacked, the two biases joined), and a matrix transposed (a Linear as MatMul)."""
    found = {name: (p.detach().numpy(), grads[name]) for name, p in net.named_parameters()}
    found.update({f"{name}:T": (v.T, g.T) for name, (v, g) in list(found.items()) if v.ndim == 2})  # MatMul's
    for prefix, module in net.named_modules():
        if not isinstance(module, (nn.LSTM, nn.GRU)):
            continue
        order = [0, 3, 1, 2] if isinstance(module, nn.LSTM) else [1, 0, 2]
        hidden = module.hidden_size
        suffixes = ["", "_reverse"] if module.bidirectional else [""]

        def gates(a: np.ndarray, order: list = order, hidden: int = hidden) -> np.ndarray:
            return np.concatenate([a[k * hidden:(k + 1) * hidden] for k in order], axis=0)

        for kind in ("weight_ih", "weight_hh", "bias"):
            stacked_v, stacked_g = [], []
            for s in suffixes:
                key = f"{prefix}.{{}}_l0{s}"
                if kind == "bias":
                    v = np.concatenate([gates(found[key.format(b)][0]) for b in ("bias_ih", "bias_hh")])
                    g = np.concatenate([gates(found[key.format(b)][1]) for b in ("bias_ih", "bias_hh")])
                else:
                    v, g = gates(found[key.format(kind)][0]), gates(found[key.format(kind)][1])
                stacked_v.append(v)
                stacked_g.append(g)
            found[f"{prefix}:{kind}"] = (np.stack(stacked_v), np.stack(stacked_g))
    return found


def _match(proto: onnx.ModelProto, candidates: dict[str, tuple[np.ndarray, np.ndarray]],
           buffers: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Torch's gradient of each float initializer, found by its value (names change on export)."""
    out = {}
    for init in proto.graph.initializer:
        value = numpy_helper.to_array(init)
        if value.dtype != np.float32 or value.size <= 1:
            continue
        hits = [g for v, g in candidates.values() if v.shape == value.shape and np.array_equal(v, value)]
        if not hits and any(np.array_equal(b, value) for b in buffers):
            continue  # BatchNorm's running statistics: not trained
        if len(hits) != 1:
            raise SystemExit(f"{len(hits)} torch parameters have the value of initializer {init.name} {value.shape}")
        out[init.name] = hits[0].astype(np.float32)
    return out


def export(name: str, net: nn.Module, shapes: list[tuple], seeds: list[int], dynamo: bool = False,
           fill: list | None = None, fold: bool = False) -> None:
    """Export ``sum(net(x) * r)`` and torch's gradients for each input set (``fold``: let the
    exporter fold constants, which an RNN's reordered weights need and BatchNorm must not get)."""
    torch.manual_seed(0)
    for m in net.modules():  # no two initializers alike: the exporter would share one between them
        if isinstance(m, (nn.BatchNorm2d, nn.InstanceNorm2d)):
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.normal_(m.bias)
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.normal_()
            m.running_var.uniform_(0.5, 1.5)
    wrapped = Loss(net).eval()
    example = [torch.randn(s) for s in shapes]
    path = OUT / f"{name}.onnx"
    if dynamo:
        program = torch.onnx.export(wrapped, tuple(example), dynamo=True, input_names=["x", "r"], output_names=["loss"])
        program.save(str(path))
    else:
        torch.onnx.export(wrapped, tuple(example), path, dynamo=False, opset_version=17, do_constant_folding=fold,
                          input_names=["x", "r"], output_names=["loss"])
    proto = onnx.load(path)
    for k, seed in enumerate(seeds):
        gen = torch.Generator().manual_seed(seed)
        inputs = [torch.randn(s, generator=gen) for s in shapes]
        if fill is not None:
            inputs[0] = inputs[0].abs() * fill[k]
        loss, grads, input_grads = _param_grads(wrapped, inputs)
        entries = {f"in:{n}": t.numpy() for n, t in zip(["x", "r"], inputs)}
        entries["loss"] = np.array(loss, np.float32)
        buffers = [b.numpy() for b in wrapped.buffers()]
        entries.update({f"grad:{n}": g for n, g in _match(proto, _onnx_layout(wrapped, grads), buffers).items()})
        entries["grad:x"] = input_grads[0]
        np.savez_compressed(OUT / f"{name}@{k}.npz", **entries)
    print(name, path.stat().st_size, "bytes")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    export("lstm", Recurrent("lstm"), [(2, 5, 3), (2, 5, 2)], [1, 2], fold=True)
    export("gru", Recurrent("gru"), [(2, 4, 3), (2, 4, 2)], [1, 2], fold=True)
    export("if", Branching(), [(2, 3), (2, 3)], [1, 2], dynamo=True, fill=[1.0, -1.0])
    export("mobilenetv3", MobileNetV3(), [(2, 3, 8, 8), (2, 3)], [1])
    export("unet", UNet(), [(1, 1, 8, 8), (1, 1, 8, 8)], [1], fold=True)  # constant Resize scales
    export("instancenorm", InstanceNet(), [(2, 2, 5, 5), (2, 2, 5, 5)], [1])


if __name__ == "__main__":
    main()
