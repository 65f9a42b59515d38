"""Importing and exporting a ~7,500-node transformer encoder (48 layers, small widths).

The encoder is built here with onnx.helper in the style of a framework export: every reshape
target is computed from ``Shape``/``Gather``/``Unsqueeze``/``Concat``, scalars are ``Constant``
nodes, LayerNorm and tanh-GELU are decomposed, and each layer adds a padding mask and a learned
relative-position bias (about 154 nodes per layer). Figures are ratios, in the same run, to
``onnx.load`` of the same file (import, a fresh container each time so nothing is cached) and
to ``onnx.save`` of the same model (export). Each import and export is checked: onnxruntime
gives the same outputs for the exported model, and re-importing it gives an equal container.

    python benchmarks/bench_onnx.py [--layers 48] [--width 32] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import median_time, table

from amanda.io.onnx import dump_onnx, from_onnx, load_onnx, to_onnx

FLOAT = TensorProto.FLOAT


class _Builder:
    """Nodes and initializers with generated, unique names."""

    def __init__(self, seed: int) -> None:
        self.nodes: list = []
        self.inits: list = []
        self.count = 0
        self.rng = np.random.default_rng(seed)

    def _name(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    def node(self, op: str, inputs: list[str], **attrs) -> str:
        name = self._name(op)
        self.nodes.append(helper.make_node(op, inputs, [f"{name}_out"], name=name, **attrs))
        return f"{name}_out"

    def const(self, value) -> str:
        return self.node("Constant", [], value=numpy_helper.from_array(np.asarray(value)))

    def weight(self, base: str, *shape: int, offset: float = 0.0) -> str:
        name = self._name(base)
        values = (offset + self.rng.standard_normal(shape) * 0.1).astype(np.float32)
        self.inits.append(numpy_helper.from_array(values, name))
        return name


def transformer_encoder(
    layers: int = 48, d: int = 32, heads: int = 4, ff: int = 64, seed: int = 0
) -> onnx.ModelProto:
    """The encoder: inputs ``x`` [batch, seq, d] and ``mask`` [batch, seq] (1 = keep)."""
    b = _Builder(seed)
    dh = d // heads
    i64 = np.int64

    def dim(x: str, axis: int) -> str:
        gathered = b.node("Gather", [b.node("Shape", [x]), b.const(i64(axis))], axis=0)
        return b.node("Unsqueeze", [gathered, b.const(np.array([0], i64))])

    def split_heads(x: str) -> str:
        shape = b.node(
            "Concat",
            [dim(x, 0), dim(x, 1), b.const(np.array([heads], i64)), b.const(np.array([dh], i64))],
            axis=0,
        )
        return b.node("Reshape", [x, shape])

    def linear(x: str, n_in: int, n_out: int) -> str:
        return b.node(
            "Add", [b.node("MatMul", [x, b.weight("W", n_in, n_out)]), b.weight("b", n_out)]
        )

    def layer_norm(x: str) -> str:
        x = b.node("Cast", [x], to=FLOAT)
        centred = b.node("Sub", [x, b.node("ReduceMean", [x], axes=[-1], keepdims=1)])
        var = b.node(
            "ReduceMean", [b.node("Pow", [centred, b.const(np.float32(2))])], axes=[-1], keepdims=1
        )
        std = b.node("Sqrt", [b.node("Add", [var, b.const(np.float32(1e-5))])])
        scaled = b.node("Mul", [b.node("Div", [centred, std]), b.weight("gamma", d, offset=1.0)])
        return b.node("Cast", [b.node("Add", [scaled, b.weight("beta", d)])], to=FLOAT)

    def attention(x: str) -> str:
        q = b.node("Transpose", [split_heads(linear(x, d, d))], perm=[0, 2, 1, 3])
        k = b.node("Transpose", [split_heads(linear(x, d, d))], perm=[0, 2, 3, 1])
        v = b.node("Transpose", [split_heads(linear(x, d, d))], perm=[0, 2, 1, 3])
        depth = b.node("Gather", [b.node("Shape", [q]), b.const(i64(3))], axis=0)
        scores = b.node(
            "Div", [b.node("MatMul", [q, k]), b.node("Sqrt", [b.node("Cast", [depth], to=FLOAT)])]
        )
        # padding mask [B, S] -> additive [B, 1, 1, S]
        mask = b.node(
            "Unsqueeze",
            [
                b.node("Unsqueeze", ["mask", b.const(np.array([1], i64))]),
                b.const(np.array([2], i64)),
            ],
        )
        keep = b.node("Sub", [b.const(np.float32(1)), b.node("Cast", [mask], to=FLOAT)])
        mask = b.node("Mul", [keep, b.const(np.float32(-1e4))])
        # relative position bias [H, S, S] from a table of 127 offsets
        n = b.node("Squeeze", [dim(x, 1), b.const(np.array([0], i64))])
        pos = b.node("Range", [b.const(i64(0)), n, b.const(i64(1))])
        rel = b.node(
            "Sub",
            [
                b.node("Unsqueeze", [pos, b.const(np.array([0], i64))]),
                b.node("Unsqueeze", [pos, b.const(np.array([1], i64))]),
            ],
        )
        rel = b.node("Add", [rel, b.const(i64(63))])
        bias = b.node(
            "Transpose",
            [b.node("Gather", [b.weight("rel_table", 127, heads), rel], axis=0)],
            perm=[2, 0, 1],
        )
        scores = b.node("Add", [b.node("Add", [scores, mask]), bias])
        probs = b.node("Dropout", [b.node("Softmax", [scores], axis=-1)])
        context = b.node("Transpose", [b.node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        merged = b.node("Concat", [dim(x, 0), dim(x, 1), b.const(np.array([d], i64))], axis=0)
        return b.node("Dropout", [linear(b.node("Reshape", [context, merged]), d, d)])

    def gelu(h: str) -> str:
        cube = b.node(
            "Mul", [b.node("Pow", [h, b.const(np.float32(3))]), b.const(np.float32(0.044715))]
        )
        inner = b.node("Mul", [b.node("Add", [h, cube]), b.const(np.float32(np.sqrt(2 / np.pi)))])
        half = b.node("Mul", [h, b.const(np.float32(0.5))])
        return b.node(
            "Mul", [half, b.node("Add", [b.node("Tanh", [inner]), b.const(np.float32(1))])]
        )

    x = "x"
    for _ in range(layers):
        x = layer_norm(b.node("Add", [x, attention(x)]))
        x = layer_norm(
            b.node("Add", [x, b.node("Dropout", [linear(gelu(linear(x, d, ff)), ff, d)])])
        )
    b.nodes.append(helper.make_node("Identity", [x], ["y"], name="output"))
    graph = helper.make_graph(
        b.nodes,
        "encoder",
        [
            helper.make_tensor_value_info("x", FLOAT, ["batch", "seq", d]),
            helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("y", FLOAT, ["batch", "seq", d])],
        b.inits,
    )
    return helper.make_model(
        graph,
        ir_version=10,
        opset_imports=[helper.make_opsetid("", 17)],
        producer_name="bench_onnx",
    )


def _check(original: onnx.ModelProto, exported: onnx.ModelProto, width: int) -> None:
    import onnxruntime as ort

    rng = np.random.default_rng(1)
    feeds = {
        "x": rng.standard_normal((2, 7, width)).astype(np.float32),
        "mask": np.array([[1] * 7, [1] * 4 + [0] * 3], np.int64),
    }
    outputs = []
    for proto in (original, exported):
        session = ort.InferenceSession(
            proto.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        outputs.append(session.run(None, feeds)[0])
    assert np.array_equal(outputs[0], outputs[1]), "onnxruntime disagrees on the exported model"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=48)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    proto = transformer_encoder(args.layers, args.width, ff=2 * args.width)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "encoder.onnx"
        out = Path(tmp) / "out.onnx"
        onnx.save(proto, path)
        size = path.stat().st_size
        print(
            f"model: {len(proto.graph.node):,} nodes, {len(proto.graph.initializer):,} initializers, "
            f"{size / 1e6:.1f} MB"
        )
        container = load_onnx(path)  # warm-up: builds the opset's namespace once
        exported = to_onnx(container)
        _check(proto, exported, args.width)
        assert from_onnx(exported) == container, "import(export(import(x))) != import(x)"

        parse = median_time(lambda: onnx.load(path), args.repeat)
        load = median_time(lambda: load_onnx(path), args.repeat)
        save = median_time(lambda: onnx.save(proto, out), args.repeat)
        # a fresh container per run: its flattened view is cached, and export must pay for it
        dump = median_time(lambda c: dump_onnx(c, out), args.repeat, setup=lambda: from_onnx(proto))
        to_proto = median_time(lambda c: to_onnx(c), args.repeat, setup=lambda: from_onnx(proto))
    rows = [
        ("import (amanda.load)", load, "onnx.load", load / parse, "<= 30x"),
        ("export (amanda.dump)", dump, "onnx.save", dump / save, "<= 30x"),
        ("export to ModelProto (to_onnx)", to_proto, "onnx.save", to_proto / save, "-"),
    ]
    print(f"baselines: onnx.load {parse * 1e3:.1f} ms, onnx.save {save * 1e3:.1f} ms")
    print(table(rows))


if __name__ == "__main__":
    main()
