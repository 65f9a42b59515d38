"""The executor on real-model architectures against onnxruntime and onnx's ReferenceEvaluator.

Small faithful versions of public architectures (ResNet, MobileNetV3, EfficientNet, ViT,
ConvNeXt, a GPT-2-style decoder, a BERT-style encoder, a UNet) are defined here with
``torch.nn`` and exported with torch's TorchScript exporter (dynamic batch and sequence axes, so
the graphs carry the shape-computing subgraphs real exports have); the MLP, CNN and 6-layer
transformer of bench_exec.py are built with ``onnx.helper``. The torch models are skipped when
torch is absent. Exported files are cached outside the repository (``--cache``, default a
directory under the system temp dir).

Every figure is a ratio measured in the same run, as in bench_exec.py: alternating settled
blocks of amanda's ``Session.run`` and onnxruntime (2 intra-op threads, all optimisations), then
amanda against ``ReferenceEvaluator``. Outputs are checked against onnxruntime first.

    python benchmarks/bench_models.py [--repeat 10] [--only resnet,vit,...] [--cache DIR]

"plan" is the plan of a fresh session for the feeds' types (specialisation, ``amanda.optimize``
and compilation); "first run" is a new session's first ``run``, plan included; gpt2x12 (a
12-layer decoder of about 1,000 nodes) is there for the plan-time figure and stays out of the
geomean.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_exec  # noqa: E402
from bench_exec import alternating_blocks, ort_session  # noqa: E402
from common import fmt_time  # noqa: E402

from amanda.exec import Session  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402

try:
    import torch
    from torch import nn
except ImportError:  # the torch models are skipped
    torch = None  # type: ignore[assignment]
    nn = None  # type: ignore[assignment]


def _torch_models() -> dict[str, Callable[[], tuple[Any, tuple, dict]]]:
    """Name -> factory of (module, example inputs, dynamic axes)."""
    # the classes need torch.nn at definition time, so they live in this function

    class ConvBN(nn.Sequential):
        def __init__(self, cin: int, cout: int, k: int = 3, s: int = 1, groups: int = 1, act: Any = nn.ReLU) -> None:
            layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
            super().__init__(*layers, *([act()] if act else []))

    class Basic(nn.Module):  # ResNet basic block
        def __init__(self, cin: int, cout: int, s: int) -> None:
            super().__init__()
            self.a, self.b = ConvBN(cin, cout, 3, s), ConvBN(cout, cout, 3, 1, act=None)
            self.skip = ConvBN(cin, cout, 1, s, act=None) if s != 1 or cin != cout else nn.Identity()

        def forward(self, x: Any) -> Any:
            return torch.relu(self.b(self.a(x)) + self.skip(x))

    class ResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(ConvBN(3, 32, 7, 2), nn.MaxPool2d(3, 2, 1))
            chans = [32, 64, 128, 256]
            blocks = []
            for i, c in enumerate(chans):
                cin = chans[max(0, i - 1)]
                blocks += [Basic(cin, c, 1 if i == 0 else 2), Basic(c, c, 1)]
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(256, 100)

        def forward(self, x: Any) -> Any:
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))

    class SE(nn.Module):
        def __init__(self, c: int, r: int, gate: Any) -> None:
            super().__init__()
            self.a, self.b, self.gate = nn.Conv2d(c, r, 1), nn.Conv2d(r, c, 1), gate()

        def forward(self, x: Any) -> Any:
            s = nn.functional.adaptive_avg_pool2d(x, 1)
            return x * self.gate(self.b(torch.relu(self.a(s))))

    class MBConv(nn.Module):  # MobileNetV3 / EfficientNet inverted residual
        def __init__(self, cin: int, cout: int, k: int, s: int, expand: int, act: Any, gate: Any) -> None:
            super().__init__()
            mid = cin * expand
            self.expand = ConvBN(cin, mid, 1, act=act) if expand != 1 else nn.Identity()
            self.dw = ConvBN(mid, mid, k, s, groups=mid, act=act)
            self.se = SE(mid, max(8, mid // 4), gate)
            self.project = ConvBN(mid, cout, 1, act=None)
            self.residual = s == 1 and cin == cout

        def forward(self, x: Any) -> Any:
            y = self.project(self.se(self.dw(self.expand(x))))
            return x + y if self.residual else y

    class MobileNet(nn.Module):
        def __init__(self, act: Any, gate: Any, spec: list[tuple]) -> None:
            super().__init__()
            self.stem = ConvBN(3, spec[0][0], 3, 2, act=act)
            self.blocks = nn.Sequential(*(MBConv(cin, cout, k, s, e, act, gate) for cin, cout, k, s, e in spec))
            self.head = ConvBN(spec[-1][1], 256, 1, act=act)
            self.fc = nn.Linear(256, 100)

        def forward(self, x: Any) -> Any:
            y = nn.functional.adaptive_avg_pool2d(self.head(self.blocks(self.stem(x))), 1)
            return self.fc(torch.flatten(y, 1))

    mobilenet_spec = [(16, 16, 3, 2, 1), (16, 24, 3, 2, 4), (24, 24, 3, 1, 3), (24, 40, 5, 2, 3),
                      (40, 40, 5, 1, 3), (40, 80, 3, 2, 6), (80, 80, 3, 1, 2), (80, 112, 3, 1, 6),
                      (112, 160, 5, 2, 6), (160, 160, 5, 1, 6)]
    efficient_spec = [(32, 16, 3, 1, 1), (16, 24, 3, 2, 6), (24, 24, 3, 1, 6), (24, 40, 5, 2, 6),
                      (40, 40, 5, 1, 6), (40, 80, 3, 2, 6), (80, 80, 3, 1, 6), (80, 112, 5, 1, 6),
                      (112, 192, 5, 2, 6)]

    class Attention(nn.Module):
        def __init__(self, d: int, heads: int, causal: bool = False) -> None:
            super().__init__()
            self.heads, self.causal = heads, causal
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)

        def forward(self, x: Any, mask: Any = None) -> Any:
            b, t, d = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
            if self.causal:
                keep = torch.tril(torch.ones(t, t, dtype=torch.bool))
                scores = scores.masked_fill(~keep, float("-inf"))
            if mask is not None:
                scores = scores + (1.0 - mask[:, None, None, :]) * -10000.0
            ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
            return self.out(ctx)

    class NewGELU(nn.Module):  # GPT-2's tanh GELU, written with pow as the original is
        def forward(self, x: Any) -> Any:
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    class Block(nn.Module):
        def __init__(self, d: int, heads: int, causal: bool = False, pre: bool = True, act: Any = nn.GELU) -> None:
            super().__init__()
            self.pre = pre
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = Attention(d, heads, causal)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), act(), nn.Linear(4 * d, d))

        def forward(self, x: Any, mask: Any = None) -> Any:
            if self.pre:
                x = x + self.attn(self.ln1(x), mask)
                return x + self.mlp(self.ln2(x))
            x = self.ln1(x + self.attn(x, mask))
            return self.ln2(x + self.mlp(x))

    class ViT(nn.Module):
        def __init__(self, d: int = 192, depth: int = 6, heads: int = 3, patch: int = 16, size: int = 112) -> None:
            super().__init__()
            self.embed = nn.Conv2d(3, d, patch, patch)
            self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
            self.pos = nn.Parameter(torch.randn(1, (size // patch) ** 2 + 1, d) * 0.02)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(depth))
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 100)

        def forward(self, x: Any) -> Any:
            x = self.embed(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x[:, 0]))

    class ConvNeXtBlock(nn.Module):
        def __init__(self, d: int) -> None:
            super().__init__()
            self.dw = nn.Conv2d(d, d, 7, padding=3, groups=d)
            self.norm = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            self.gamma = nn.Parameter(torch.full((d,), 0.1))

        def forward(self, x: Any) -> Any:
            y = self.dw(x).permute(0, 2, 3, 1)
            y = self.gamma * self.mlp(self.norm(y))
            return x + y.permute(0, 3, 1, 2)

    class ConvNeXt(nn.Module):
        def __init__(self, dims: tuple = (32, 64, 128, 256), depths: tuple = (2, 2, 4, 2)) -> None:
            super().__init__()
            layers: list[Any] = [nn.Conv2d(3, dims[0], 4, 4)]
            for i, (d, n) in enumerate(zip(dims, depths)):
                if i:
                    layers.append(nn.Conv2d(dims[i - 1], d, 2, 2))
                layers += [ConvNeXtBlock(d) for _ in range(n)]
            self.features = nn.Sequential(*layers)
            self.norm, self.head = nn.LayerNorm(dims[-1]), nn.Linear(dims[-1], 100)

        def forward(self, x: Any) -> Any:
            return self.head(self.norm(self.features(x).mean((2, 3))))

    class GPT(nn.Module):
        def __init__(self, vocab: int = 2000, d: int = 256, depth: int = 4, heads: int = 4, ctx: int = 128) -> None:
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList(Block(d, heads, causal=True, act=NewGELU) for _ in range(depth))
            self.norm = nn.LayerNorm(d)

        def forward(self, ids: Any) -> Any:
            x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.norm(x) @ self.tok.weight.T

    class BERT(nn.Module):
        def __init__(self, vocab: int = 2000, d: int = 256, depth: int = 4, heads: int = 4, ctx: int = 128) -> None:
            super().__init__()
            self.tok, self.pos, self.typ = nn.Embedding(vocab, d), nn.Embedding(ctx, d), nn.Embedding(2, d)
            self.ln = nn.LayerNorm(d)
            self.blocks = nn.ModuleList(Block(d, heads, pre=False) for _ in range(depth))
            self.pool = nn.Linear(d, d)

        def forward(self, ids: Any, mask: Any) -> Any:
            x = self.tok(ids) + self.pos(torch.arange(ids.shape[1])) + self.typ(torch.zeros_like(ids))
            x = self.ln(x)
            for block in self.blocks:
                x = block(x, mask)
            return torch.tanh(self.pool(x[:, 0]))

    class UNet(nn.Module):
        def __init__(self, chans: tuple = (16, 32, 64, 128)) -> None:
            super().__init__()

            def double(cin: int, cout: int) -> Any:
                return nn.Sequential(ConvBN(cin, cout), ConvBN(cout, cout))

            self.down = nn.ModuleList(double(cin, c) for cin, c in zip((3,) + chans[:-1], chans))
            self.up = nn.ModuleList(nn.ConvTranspose2d(c, c // 2, 2, 2) for c in reversed(chans[1:]))
            self.dec = nn.ModuleList(double(c, c // 2) for c in reversed(chans[1:]))
            self.out = nn.Conv2d(chans[0], 2, 1)

        def forward(self, x: Any) -> Any:
            skips = []
            for i, down in enumerate(self.down):
                x = down(nn.functional.max_pool2d(x, 2) if i else x)
                skips.append(x)
            for up, dec, skip in zip(self.up, self.dec, reversed(skips[:-1])):
                x = dec(torch.cat([skip, up(x)], 1))
            return self.out(x)

    image = {"x": {0: "batch"}}
    text = {"ids": {0: "batch", 1: "seq"}}
    ids = torch.randint(0, 2000, (4, 64))
    return {
        "resnet": lambda: (ResNet(), (torch.randn(2, 3, 112, 112),), image),
        "mobilenetv3": lambda: (MobileNet(nn.Hardswish, nn.Hardsigmoid, mobilenet_spec),
                                (torch.randn(2, 3, 112, 112),), image),
        "efficientnet": lambda: (MobileNet(nn.SiLU, nn.Sigmoid, efficient_spec), (torch.randn(2, 3, 112, 112),), image),
        "vit": lambda: (ViT(), (torch.randn(2, 3, 112, 112),), image),
        "convnext": lambda: (ConvNeXt(), (torch.randn(2, 3, 112, 112),), image),
        "gpt2": lambda: (GPT(), (ids,), text),
        "gpt2x12": lambda: (GPT(depth=12), (ids,), text),  # ~1,000 nodes: the plan-time figure
        "bert": lambda: (BERT(), (ids, torch.ones(4, 64)), {**text, "mask": {0: "batch", 1: "seq"}}),
        "unet": lambda: (UNet(), (torch.randn(1, 3, 96, 96),), image),
    }


def export(name: str, cache: Path) -> tuple[onnx.ModelProto, dict]:
    """The torch model ``name`` as ONNX (from the cache when there) and feeds for it."""
    torch.manual_seed(0)
    module, args, axes = _torch_models()[name]()
    module.eval()
    names = list(axes)
    path = cache / f"{name}.onnx"
    if not path.exists():
        with torch.no_grad():
            torch.onnx.export(module, args, str(path), dynamo=False, input_names=names, output_names=["y"],
                              dynamic_axes={**axes, "y": {0: "batch"}}, opset_version=17)
    return onnx.load(str(path)), {n: a.numpy() for n, a in zip(names, args)}


def measure(name: str, proto: onnx.ModelProto, feeds: dict, repeat: int, reference: bool) -> dict:
    """amanda, onnxruntime and (optionally) ReferenceEvaluator times for one model."""
    out = proto.graph.output[0].name
    model = from_onnx(proto)
    with Session(model) as fresh:  # plan and optimisation alone, on a session of its own
        started = time.perf_counter()
        fresh.plan([out], feeds)
        planned = time.perf_counter() - started
    started = time.perf_counter()
    session = Session(model)
    ours = session.run([out], feeds)[0]
    first = time.perf_counter() - started
    theirs = ort_session(proto)
    np.testing.assert_allclose(ours, theirs.run([out], feeds)[0], rtol=2e-3, atol=2e-3)
    times = alternating_blocks({"amanda": lambda: session.run([out], feeds),
                                "onnxruntime": lambda: theirs.run([out], feeds)}, repeat)
    row = {"name": name, "nodes": len(proto.graph.node), "plan": planned, "first": first, **times}
    if reference:
        ref = ReferenceEvaluator(proto)
        ref_times = alternating_blocks({"amanda": lambda: session.run([out], feeds),
                                        "reference": lambda: ref.run([out], feeds)}, 1, warmup=1, block=1)
        row["reference"], row["amanda_vs_ref"] = ref_times["reference"], ref_times["amanda"]
    session.close()
    return row


BUILT = {
    "mlp": (lambda: bench_exec.mlp(), 1.5),
    "cnn": (lambda: bench_exec.cnn(), 2.5),
    "transformer": (lambda: bench_exec.transformer(), 1.5),
}
REAL = ["resnet", "mobilenetv3", "efficientnet", "vit", "convnext", "gpt2", "bert", "unet"]
EXTRA = ["gpt2x12"]  # measured, outside the geomean


def report(rows: list[dict]) -> str:
    """A markdown table of the rows and the geomean over the real models."""
    lines = ["| model | nodes | plan | first run | amanda | onnxruntime | ratio | target | vs reference |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = r["amanda"] / r["onnxruntime"]
        target = BUILT[r["name"]][1] if r["name"] in BUILT else 4.0 if r["name"] in REAL else float("inf")
        ref = (f"{r['reference'] / r['amanda_vs_ref']:.1f}x faster" if "reference" in r else "-")
        verdict = "(info)" if target == float("inf") else f"{'ok' if ratio <= target else 'MISSED'} (<= {target}x)"
        lines.append(f"| {r['name']} | {r['nodes']} | {fmt_time(r['plan'])} | {fmt_time(r['first'])} | "
                     f"{fmt_time(r['amanda'])} | {fmt_time(r['onnxruntime'])} | {ratio:.2f}x | {verdict} | {ref} |")
    real = [r["amanda"] / r["onnxruntime"] for r in rows if r["name"] in REAL]
    if real:
        geomean = math.exp(sum(map(math.log, real)) / len(real))
        lines.append(f"\ngeomean over {len(real)} real models: {geomean:.2f}x "
                     f"({'ok' if geomean <= 2.5 else 'MISSED'}, <= 2.5x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--only", default=",".join(REAL + list(BUILT) + EXTRA))
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "amanda-bench-models")
    parser.add_argument("--no-reference", action="store_true", help="skip onnx.reference")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    rows = []
    for name in args.only.split(","):
        if name not in BUILT and torch is None:
            print(f"{name}: skipped (torch is not installed)", file=sys.stderr)
            continue
        started = time.perf_counter()
        proto, feeds = BUILT[name][0]() if name in BUILT else export(name, args.cache)
        rows.append(measure(name, proto, feeds, args.repeat, not args.no_reference))
        print(f"{name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    print(report(rows))
    print(f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
