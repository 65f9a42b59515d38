"""Recurrent and control-flow models against onnxruntime, in one run.

The torch fixtures of tests/fixtures/onnx/from_torch (an LSTM tagger, a two-layer bidirectional
GRU, a ``torch.cond`` If and a scripted Loop with an If in its body) run in amanda's
``Session`` at its default thread setting and at ``threads=1``, and in onnxruntime at two
intra-op threads (spinning off, so its idle threads do not take the cores amanda's blocks run
on). The three runners take turns, block by block; each figure is the median over the blocks
of a block's mean per run, after warm-up blocks are dropped, and the ratio is amanda's median
over onnxruntime's; the last two columns are the best blocks' ratio, the steadier one on a
loaded machine (amanda's many short calls lose more to other processes than onnxruntime's few).

    PYTHONPATH=. python benchmarks/bench_recurrent.py [--blocks 150] [--runs 3] [--apart] [--profile lstm_tagger]

``--profile NAME`` prints cProfile's top functions for ``threads=1`` runs of one fixture, and
the number of numpy calls a run makes (by ``sys.setprofile``).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

import amanda
from amanda.io.onnx.importer import from_onnx

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "onnx" / "from_torch"
MODELS = ["lstm_tagger", "bigru", "torch_if", "scripted_loop"]
WARMUP = 3


def feeds(name: str) -> dict[str, np.ndarray]:
    """Inputs of the shapes and dtypes the fixture records (token ids below the vocabulary)."""
    rng = np.random.default_rng(0)
    spec = json.loads((FIXTURES / f"{name}.json").read_text())
    return {k: rng.integers(0, 50, v["shape"]).astype(v["dtype"]) if "int" in v["dtype"]
            else rng.standard_normal(v["shape"]).astype(v["dtype"]) for k, v in spec.items()}


def runners(name: str) -> dict[str, Any]:
    """name -> a function making one run, for amanda (default threads, threads=1) and onnxruntime."""
    proto = onnx.load(FIXTURES / f"{name}.onnx")
    inputs = feeds(name)
    outputs = [o.name for o in proto.graph.output]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    reference = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    model = from_onnx(proto)
    default, single = amanda.Session(model), amanda.Session(model, threads=1)
    want = reference.run(None, inputs)
    for session in (default, single):
        for got, expected in zip(session.run(outputs, inputs), want):
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    return {"amanda": lambda: default.run(outputs, inputs), "amanda threads=1": lambda: single.run(outputs, inputs),
            "onnxruntime": lambda: reference.run(None, inputs)}


def measure(name: str, blocks: int, runs: int, apart: bool = False) -> dict[str, tuple[float, float]]:
    """(median, least) seconds per run of each runner over blocks that alternate runners (with
    ``apart``, each runner's blocks one after the other: onnxruntime runs faster when its runs
    follow each other than between amanda's)."""
    fns = runners(name)
    times: dict[str, list[float]] = {k: [] for k in fns}
    order = [(block, key) for key in fns for block in range(blocks + WARMUP)] if apart else \
        [(block, key) for block in range(blocks + WARMUP) for key in fns]
    for block, key in order:
        fn = fns[key]
        start = time.perf_counter()
        for _ in range(runs):
            fn()
        if block >= WARMUP:
            times[key].append((time.perf_counter() - start) / runs)
    return {k: (statistics.median(v), min(v)) for k, v in times.items()}


def numpy_calls(fn: Any) -> Counter:
    """The numpy calls one call of ``fn`` makes, counted by name: array methods and C functions
    (seen by ``sys.setprofile``), and ufuncs and ``np.dot``/``np.matmul`` called through the
    ``np`` module (wrapped for the call, as a profiler does not see ufunc calls)."""
    counts: Counter = Counter()

    def tracer(frame: Any, event: str, arg: Any) -> None:
        if event != "c_call":
            return
        module = getattr(arg, "__module__", None) or ""
        if module.startswith("numpy") or isinstance(getattr(arg, "__self__", None), np.ndarray):
            counts[getattr(arg, "__qualname__", repr(arg))] += 1

    class Counting:
        """A ufunc (or function) that counts its calls; ``reduce`` and the rest pass through."""

        def __init__(self, name: str, real: Any) -> None:
            self.name, self.real = name, real

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            counts[self.name] += 1
            return self.real(*args, **kwargs)

        def __getattr__(self, attr: str) -> Any:
            return getattr(self.real, attr)

    wrapped = {name: getattr(np, name) for name in dir(np)
               if isinstance(getattr(np, name, None), np.ufunc) or name in ("dot", "matmul")}
    for name, real in wrapped.items():
        setattr(np, name, Counting(name, real))
    sys.setprofile(tracer)
    try:
        fn()
    finally:
        sys.setprofile(None)
        for name, real in wrapped.items():
            setattr(np, name, real)
    return counts


def profile(name: str, runs: int) -> None:
    """cProfile's top functions over ``runs`` threads=1 runs, and the numpy calls of one run."""
    fn = runners(name)["amanda threads=1"]
    fn()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        fn()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
    counts = numpy_calls(fn)
    print(f"numpy calls per run: {sum(counts.values())}")
    for call, count in counts.most_common(15):
        print(f"  {count:4d} {call}")


def main() -> None:
    """Print a markdown table of the fixtures' run times and ratios to onnxruntime."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=150)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", choices=MODELS)
    parser.add_argument("--apart", action="store_true", help="each runner's blocks in a row, not alternating")
    parser.add_argument("models", nargs="*", default=MODELS)
    args = parser.parse_args()
    if args.profile:
        profile(args.profile, 1000)
        return
    print("| model | amanda | amanda threads=1 | onnxruntime (2 threads) | ratio | ratio threads=1 "
          "| best-block ratio | best-block ratio threads=1 |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.models:
        found = measure(name, args.blocks, args.runs, args.apart)
        (mine, mine_best), (single, single_best), (base, base_best) = (
            found["amanda"], found["amanda threads=1"], found["onnxruntime"])
        print(f"| `{name}` | {mine * 1e6:.1f} µs | {single * 1e6:.1f} µs | {base * 1e6:.1f} µs | {mine / base:.2f}x "
              f"| {single / base:.2f}x | {mine_best / base_best:.2f}x | {single_best / base_best:.2f}x |")


if __name__ == "__main__":
    main()
