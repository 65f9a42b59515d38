"""Type inference: a 7,500-node exported transformer, and a one-op edit of a 100,000-op model.

1. Full inference of the transformer of ``bench_onnx.py`` (48 layers, shape arithmetic
   everywhere) against ``onnx.shape_inference.infer_shapes(strict_mode=True, data_prop=True)``
   on the same model in the same run. Each amanda run infers a freshly imported container (the
   import is not timed), so no cached result is reused. Target: at most 5x.
2. A nested model of 100,000 ops (100 stages of 100 blocks of 10 ops, every op its own object)
   is inferred in full; then one op deep inside is replaced (``amanda.replace``, which shares every
   untouched subtree) and the edited model is inferred. Target: the second at most 0.2x the first.
   A third row wraps the model in an ``amanda.edit`` that adds a skip connection around one block
   (a tombstone and edges reaching inside by path), for information.

Both results are checked: the transformer's types agree with onnx's (no disagreement), and the
edited model's output type is the expected one.

    python benchmarks/bench_types.py [--layers 48] [--stages 100] [--blocks 100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_onnx import transformer_encoder
from common import median_time, table

import amanda
from amanda.io.onnx import from_onnx
from amanda.types import TensorType, infer_types
from tests.types.oracle import compare

NS = {"namespace": "amanda/onnx/17"}
WIDTH = 16


def _block(name: str, seed: int) -> amanda.Container:
    """Ten ops: a weight and a bias, then MatMul, Add, Relu, Neg, Abs, MatMul, Add, Relu."""
    rng = np.random.default_rng(seed)
    children = [
        amanda.op("Constant", "w", outputs=["output"],
                  attrs={"value": rng.standard_normal((WIDTH, WIDTH)).astype(np.float32)}),
        amanda.op("Constant", "bias", outputs=["output"],
                  attrs={"value": rng.standard_normal(WIDTH).astype(np.float32)}),
    ]
    edges, prev = [], f"{name}:x"
    steps = [("MatMul", "Y"), ("Add", "C"), ("Relu", "Y"), ("Neg", "Y"), ("Abs", "Y"),
             ("MatMul", "Y"), ("Add", "C"), ("Relu", "Y")]
    for j, (op_type, out) in enumerate(steps):
        op_name = f"{op_type.lower()}{j}"
        ins = ["A", "B"] if op_type in ("MatMul", "Add") else ["X"]
        children.append(amanda.op(op_type, op_name, inputs=ins, outputs=[out]))
        edges.append((prev, f"{op_name}:{ins[0]}"))
        if len(ins) == 2:
            edges.append((f"{'w' if op_type == 'MatMul' else 'bias'}:output", f"{op_name}:B"))
        prev = f"{op_name}:{out}"
    edges.append((prev, f"{name}:y"))
    return amanda.Container("Block", name, inputs=["x"], outputs=["y"], children=children, edges=edges)


def _chain(type_: str, name: str, children: list, attrs: dict | None = None, top: bool = False) -> amanda.Container:
    edges = [(f"{name}:x", f"{children[0].name}:x")]
    edges += [(f"{a.name}:y", f"{b.name}:x") for a, b in itertools.pairwise(children)]
    edges += [(f"{children[-1].name}:y", f"{name}:y")]
    inputs = [amanda.Port("x", attrs={"dtype": "float32", "shape": ("batch", WIDTH)})] if top else ["x"]
    return amanda.Container(type_, name, inputs=inputs, outputs=["y"], children=children, edges=edges,
                            attrs=attrs or {})


def nested_model(stages: int = 100, blocks: int = 100) -> amanda.Container:
    """``stages`` × ``blocks`` blocks of 10 ops each, all distinct objects."""
    parts = [_chain("Stage", f"s{s}", [_block(f"b{b}", s * blocks + b) for b in range(blocks)])
             for s in range(stages)]
    return _chain(None, "model", parts, NS, top=True)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=48)
    parser.add_argument("--stages", type=int, default=100)
    parser.add_argument("--blocks", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    proto = transformer_encoder(layers=args.layers)
    counts, bad = compare(proto)
    assert not bad, bad[:5]
    print(f"transformer: {len(proto.graph.node)} nodes; verdicts against onnx: {dict(counts)}")
    theirs = median_time(lambda: onnx.shape_inference.infer_shapes(proto, strict_mode=True, data_prop=True),
                         args.repeat)
    ours = median_time(lambda c: infer_types(c), args.repeat, setup=lambda: from_onnx(proto))

    start = time.perf_counter()
    model = nested_model(args.stages, args.blocks)
    n_ops = sum(1 for _ in model)
    print(f"nested model: {n_ops} ops built in {time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    full = infer_types(model)
    first = time.perf_counter() - start
    expected = TensorType("float32", ("batch", WIDTH))
    assert full[(), "y"] == expected and not full.problems
    target = f"s{args.stages // 2}/b{args.blocks // 2}/neg3"
    edited = amanda.replace(model, target, amanda.op("Relu", "neg3", inputs=["X"], outputs=["Y"]))
    start = time.perf_counter()
    again = infer_types(edited)
    second = time.perf_counter() - start
    assert again[(), "y"] == expected and again[tuple(target.split("/")), "Y"] == expected
    e = amanda.edit(model)  # a skip connection around one block: a wrapper with a tombstone
    stage, block = f"s{args.stages // 2}", f"b{args.blocks // 2}"
    prev, nxt = f"b{args.blocks // 2 - 1}", f"b{args.blocks // 2 + 1}"
    e.add(amanda.op("Add", "skip", inputs=["A", "B"], outputs=["C"], attrs=NS))
    e.remove_edge(f"model/{stage}/{block}:y", f"model/{stage}/{nxt}:x")
    e.connect(f"model/{stage}/{block}:y", "skip:A")
    e.connect(f"model/{stage}/{prev}:y", "skip:B")
    e.connect("skip:C", f"model/{stage}/{nxt}:x")
    wrapped = e.build(name="wrapped")
    start = time.perf_counter()
    skipped = infer_types(wrapped)
    third = time.perf_counter() - start
    assert skipped[(), "y"] == expected and skipped[("skip",), "C"] == expected

    rows = [
        (f"infer_types, transformer ({len(proto.graph.node)} nodes)", ours, "onnx infer_shapes",
         ours / theirs, "<= 5x"),
        (f"infer_types after a one-op edit ({n_ops} ops)", second, "first full inference",
         second / first, "<= 0.2x"),
        ("infer_types after an amanda.edit skip connection", third, "first full inference",
         third / first, "(info)"),
    ]
    print(table(rows))
    print(f"\nBaselines in this run: onnx infer_shapes {theirs * 1e3:.1f} ms, "
          f"first full inference {first:.2f} s.")


if __name__ == "__main__":
    main()
