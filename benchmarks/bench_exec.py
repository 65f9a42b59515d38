"""The executor against onnxruntime and onnx's ReferenceEvaluator on models built here.

Every figure is a ratio measured in the same run: amanda's ``Session.run`` against
onnxruntime (CPU, ``intra_op_num_threads=2``, every graph optimisation) and against
``onnx.reference.ReferenceEvaluator`` on the same ONNX model, which amanda imports with
``from_onnx``. Each contender is warmed up (amanda compiles its plan and probes its BLAS thread
count), then their runs alternate and the medians are compared, so both see the same load on a
shared machine. Outputs are checked against onnxruntime's first.

    python benchmarks/bench_exec.py [--repeat 7] [--only mlp,cnn,...] [--write]

``--write`` replaces the "## Executor" section of benchmarks/README.md with the table.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import fmt_time, table  # noqa: E402

from amanda.exec import Session  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402

F = TensorProto.FLOAT
README = Path(__file__).resolve().parent / "README.md"
RNG = np.random.default_rng(0)


class Builder:
    """Nodes and initializers of an ONNX graph under construction, with fresh names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def weight(self, shape: tuple, scale: float | None = None) -> str:
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[0] if len(shape) < 4 else np.prod(shape[1:]))
        name = self.name("w")
        self.inits.append(numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(self, value: Any, dtype: Any = np.int64) -> str:
        name = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def model(self, inputs: list[tuple[str, list]], output: str, opset: int = 17) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, "bench", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
            [helper.make_tensor_value_info(output, F, None)], initializer=self.inits,
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def dense(b: Builder, x: str, n_in: int, n_out: int, relu: bool) -> str:
    y = b.op("Add", [b.op("MatMul", [x, b.weight((n_in, n_out))]), b.weight((n_out,), 0.1)])
    return b.op("Relu", [y]) if relu else y


def mlp() -> tuple[onnx.ModelProto, dict]:
    """MLP 784-512-512-10 at batch 64."""
    b = Builder()
    h = dense(b, "x", 784, 512, True)
    h = dense(b, h, 512, 512, True)
    y = dense(b, h, 512, 10, False)
    return b.model([("x", [64, 784])], y), {"x": RNG.standard_normal((64, 784)).astype(np.float32)}


def cnn() -> tuple[onnx.ModelProto, dict]:
    """conv 1->32 3x3, relu, maxpool, conv 32->64 3x3, relu, maxpool, fc 3136->10; batch 64."""
    b = Builder()
    h = b.op("Relu", [b.op("Conv", ["x", b.weight((32, 1, 3, 3)), b.weight((32,), 0.1)], pads=[1, 1, 1, 1])])
    h = b.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = b.op("Relu", [b.op("Conv", [h, b.weight((64, 32, 3, 3)), b.weight((64,), 0.1)], pads=[1, 1, 1, 1])])
    h = b.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = b.op("Flatten", [h], axis=1)
    y = b.op("Gemm", [h, b.weight((3136, 10)), b.weight((10,), 0.1)])
    return b.model([("x", [64, 1, 28, 28])], y), {"x": RNG.standard_normal((64, 1, 28, 28)).astype(np.float32)}


def transformer(layers: int = 6, d: int = 256, heads: int = 4, ff: int = 1024, seq: int = 128,
                batch: int = 8) -> tuple[onnx.ModelProto, dict]:
    """A post-norm transformer encoder: multi-head self-attention and a ReLU feed-forward."""
    b = Builder()
    dh = d // heads
    split = b.const([batch, seq, heads, dh])
    merge = b.const([batch, seq, d])
    scale = b.const(1.0 / np.sqrt(dh), np.float32)
    x = "x"
    for _ in range(layers):
        q, k, v = (b.op("Transpose", [b.op("Reshape", [dense(b, x, d, d, False), split])], perm=[0, 2, 1, 3])
                   for _ in range(3))
        kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
        scores = b.op("Softmax", [b.op("Mul", [b.op("MatMul", [q, kt]), scale])], axis=-1)
        ctx = b.op("Reshape", [b.op("Transpose", [b.op("MatMul", [scores, v])], perm=[0, 2, 1, 3]), merge])
        attn = dense(b, ctx, d, d, False)
        x = b.op("LayerNormalization", [b.op("Add", [x, attn]), b.weight((d,), 0.0), b.weight((d,), 0.0)], axis=-1)
        # LayerNormalization scale starts at 1: a zero weight plus one
        b.inits[-2] = numpy_helper.from_array(np.ones(d, np.float32), b.inits[-2].name)
        hidden = dense(b, dense(b, x, d, ff, True), ff, d, False)
        x = b.op("LayerNormalization", [b.op("Add", [x, hidden]), b.weight((d,), 0.0), b.weight((d,), 0.0)], axis=-1)
        b.inits[-2] = numpy_helper.from_array(np.ones(d, np.float32), b.inits[-2].name)
    return b.model([("x", [batch, seq, d])], x), {"x": RNG.standard_normal((batch, seq, d)).astype(np.float32)}


def add_chain(n: int = 10_000) -> tuple[onnx.ModelProto, dict]:
    """A chain of n Adds of a 4-element float32 vector and a constant."""
    b = Builder()
    one = b.const(np.full(4, 1e-4), np.float32)
    x = "x"
    for _ in range(n):
        x = b.op("Add", [x, one])
    return b.model([("x", [4])], x), {"x": np.zeros(4, np.float32)}


def two_chains(n: int = 8, size: int = 512) -> tuple[onnx.ModelProto, dict]:
    """Two independent chains of n size x size MatMuls, joined by an Add."""
    b = Builder()
    ends = []
    for x in ("xa", "xb"):
        for _ in range(n):
            x = b.op("MatMul", [x, b.weight((size, size))])
        ends.append(x)
    y = b.op("Add", ends)
    feeds = {k: RNG.standard_normal((size, size)).astype(np.float32) for k in ("xa", "xb")}
    return b.model([("xa", [size, size]), ("xb", [size, size])], y), feeds


def ort_session(proto: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def alternating_blocks(fns: dict[str, Callable[[], Any]], repeat: int, warmup: int = 6, block: int = 5,
                settle: float = 0.2) -> dict[str, float]:
    """Median time of each function over alternating blocks of ``block`` runs.

    Blocks alternate so that every function sees the same machine load over the run; within
    a block each runs back to back, in its steady state. Both onnxruntime's intra-op threads
    and OpenBLAS's threads keep spinning on the cores for a while after they finish, which
    slows whatever runs next in this process; a pause of ``settle`` seconds before each block
    lets them go idle, so each engine is timed on the machine, not on the other's spinning.
    """
    for fn in fns.values():
        # warm-up: plan compilation and amanda's BLAS-thread probes (6 runs), onnxruntime's
        # first-run allocations; settled first, so the probes do not time the other's threads
        time.sleep(settle)
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(max(1, repeat // block)):
        for name, fn in fns.items():
            gc.collect()  # once per block: a collection before each run would leave caches cold
            time.sleep(settle)
            fn()  # the block's first run wakes the engine's threads; it is not timed
            for _ in range(block):
                start = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) for name, times in samples.items()}


def measure(name: str, proto: onnx.ModelProto, feeds: dict, repeat: int, target: float,
            threads: int | None = None, reference: bool = True) -> list[tuple]:
    """Rows for one model: amanda vs onnxruntime, and amanda vs ReferenceEvaluator."""
    out = proto.graph.output[0].name
    session = Session(from_onnx(proto), threads=threads)
    theirs = ort_session(proto)
    fns: dict[str, Callable[[], Any]] = {
        "amanda": lambda: session.run([out], feeds),
        "onnxruntime": lambda: theirs.run([out], feeds),
    }
    np.testing.assert_allclose(fns["amanda"]()[0], fns["onnxruntime"]()[0], rtol=1e-3, atol=1e-3)
    times = alternating_blocks(fns, repeat)
    ours_t, ort_t = times["amanda"], times["onnxruntime"]
    rows = [(f"{name}: amanda / onnxruntime", ours_t, f"onnxruntime {fmt_time(ort_t)}", ours_t / ort_t, target)]
    if reference:
        ref = ReferenceEvaluator(proto)
        ref_times = alternating_blocks({"amanda": fns["amanda"], "reference": lambda: ref.run([out], feeds)},
                                max(1, repeat // 3), warmup=1)
        ref_t, ours_ref = ref_times["reference"], ref_times["amanda"]
        rows.append((f"{name}: amanda / ReferenceEvaluator", ours_ref, f"ReferenceEvaluator {fmt_time(ref_t)}",
                     ours_ref / ref_t, 1.0))
    session.close()
    return rows


def run_chain(repeat: int) -> list[tuple]:
    proto, feeds = add_chain()
    rows = measure("10,000 tiny Adds", proto, feeds, repeat, target=float("inf"))
    seconds = rows[0][1]
    rows.insert(0, ("10,000 tiny Adds: µs per op", seconds, "3 µs per op", seconds / 10_000 / 3e-6, 1.0))
    return rows


def run_threads(repeat: int) -> list[tuple]:
    proto, feeds = two_chains()
    out = proto.graph.output[0].name
    one, two = Session(from_onnx(proto), threads=1), Session(from_onnx(proto), threads=2)
    times = alternating_blocks({"1": lambda: one.run([out], feeds), "2": lambda: two.run([out], feeds)}, repeat)
    one.close()
    two.close()
    return [("2 chains of 8 MatMul 512: threads=1 / threads=2", times["2"],
             f"threads=1 {fmt_time(times['1'])}", times["1"] / times["2"], 1 / 1.4)]


MODELS = {
    "mlp": lambda r: measure("MLP 784-512-512-10, batch 64", *mlp(), r, 1.5),
    "cnn": lambda r: measure("CNN (2 conv, 2 pool, fc), batch 64", *cnn(), r, 2.5),
    "transformer": lambda r: measure("transformer encoder 6x256, seq 128, batch 8", *transformer(), r, 1.2),
    "chain": run_chain,
    "threads": run_threads,
}


def verdict(row: tuple) -> str:
    what, _, _, ratio, target = row
    if target == float("inf"):
        return "(info)"
    if "threads=1 / threads=2" in what:
        return f"{'ok' if ratio >= 1.4 else 'MISSED'} (>= 1.40x)"
    if "ReferenceEvaluator" in what:
        return f"{'ok' if ratio < 1.0 else 'MISSED'} (< 1x)"
    if "per op" in what:
        return f"{'ok' if ratio <= 1.0 else 'MISSED'} (<= 3 µs)"
    return f"{'ok' if ratio <= target else 'MISSED'} (<= {target}x)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", default=",".join(MODELS))
    parser.add_argument("--write", action="store_true", help="update benchmarks/README.md")
    args = parser.parse_args(argv)
    rows: list[tuple] = []
    load_before = os.getloadavg()[0]
    for key in args.only.split(","):
        started = time.perf_counter()
        rows += MODELS[key](args.repeat)
        print(f"{key}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    text = table([(what, seconds, baseline, ratio, verdict((what, seconds, baseline, ratio, target)))
                  for what, seconds, baseline, ratio, target in rows])
    load = f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    print(text)
    print(load)
    if args.write:
        write_section(text, load)
    return 0 if all("MISSED" not in verdict(r) for r in rows) else 1


# what the measurements have shown about the rows that miss (kept in the README by --write)
GAPS = """Where the gaps are (issue 6 is blocked on them): over five runs on 2026-11-22 the MLP
measured 1.9x-2.9x (amanda 0.67 ms alone in the process, 0.75-1.0 ms in the alternating
blocks; onnxruntime 0.36-0.48 ms), the CNN 4.9x-6.3x and the transformer 1.34x-1.45x (it
was 1.45x-1.6x before Softmax stopped taking a row-wise max). The time is in the GEMMs and
around them, not in the executor (per-op overhead is below 3 µs): numpy's OpenBLAS sgemm
alone runs the MLP's three products in 0.43-0.52 ms, where onnxruntime's MLAS, with
weights packed once at load and bias and activation fused into the product, runs the whole
MLP in 0.36-0.42 ms; the transformer's products alone take ~48 ms of onnxruntime's 52 ms
total, leaving 14 ms for everything else against ~21 ms spent; the CNN's 3x3 convolution
spends ~2.7 ms on columns and layout copies beside a 2.2 ms GEMM, where onnxruntime
convolves directly in a blocked layout. Splitting numpy ops across the cores with Python
threads was tried and measured slower (docs/execution.md, "Runners and threads"). Closing
the gaps needs compiled kernels (prepacked GEMMs with fused epilogues, direct convolution,
a thread pool that spins without the GIL), which the issue's numpy kernels do not allow."""


def write_section(text: str, load: str) -> None:
    """Replace (or append) the "## Executor" section of benchmarks/README.md."""
    import onnxruntime

    cores = os.cpu_count()
    section = (
        "## Executor\n\n"
        "`python benchmarks/bench_exec.py --write` (numpy "
        f"{np.__version__}, onnxruntime {onnxruntime.__version__}, onnx {onnx.__version__}, {cores} cores, "
        f"{load}). "
        "Medians over alternating blocks of 5 runs after warm-up, each block after a 0.2 s pause so that the "
        "other engine's spinning threads have gone idle; amanda runs with `threads=None` except in the "
        "threads row. onnxruntime: CPU, 2 intra-op threads, all graph optimisations. For the tiny Adds "
        "the first row is the time per op against the 3 µs budget. In the threads row the ratio is "
        "the speed-up of threads=2 over threads=1. The machine is shared with other jobs, so figures "
        "move from run to run; see docs/execution.md for how amanda picks BLAS threads.\n\n" + text + "\n\n"
        + GAPS + "\n"
    )
    current = README.read_text() if README.exists() else "# Benchmarks\n"
    pattern = re.compile(r"^## Executor\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(current):
        updated = pattern.sub(lambda _: section + "\n", current)
    else:
        updated = current.rstrip("\n") + "\n\n" + section
    README.write_text(updated)


if __name__ == "__main__":
    sys.exit(main())
