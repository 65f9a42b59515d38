"""amanda's onnxruntime device against onnxruntime itself, and the profiler's coverage.

For each real model of bench_models.py (exported once into its cache; torch is needed the
first time) and the MLP, CNN and transformer of bench_exec.py: ``Session(model,
backend="onnxruntime", threads=2)`` against an ``InferenceSession`` of the original file at 2
intra-op threads, in alternating settled blocks (ratios in one run: the median of the
ratios of back-to-back blocks, which a load change moves on both sides alike). Then a split
model: a 6-layer MLP whose middle Relu is placed on numpy, so it runs as two onnxruntime parts
around a numpy op, against onnxruntime on the whole MLP. Last, ``Session(profile=True)`` on
each model: how much of a profiled run's wall time the per-op times cover.

    PYTHONPATH=. python benchmarks/bench_backends.py [--repeat 10] [--only resnet,gpt2,...]
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_exec  # noqa: E402
import bench_models  # noqa: E402
from bench_exec import ort_session  # noqa: E402
from common import fmt_time  # noqa: E402

from amanda.exec import Session  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402


def paired(fns: dict, repeat: int, block: int = 3, settle: float = 0.1) -> dict:
    """Each function's median time over alternating settled blocks (as ``alternating_blocks``),
    and ``ratio``: the median over the blocks of the first function's block median over the
    second's, the two blocks run back to back (in alternating order), so that a load change
    between blocks moves both sides of a ratio alike."""
    (a, fa), (b, fb) = fns.items()
    for fn in (fa, fb):
        time.sleep(settle)
        for _ in range(6):
            fn()
    samples: dict = {a: [], b: []}
    ratios = []
    for k in range(max(1, repeat // block)):
        medians = {}
        for name, fn in ((a, fa), (b, fb)) if k % 2 == 0 else ((b, fb), (a, fa)):
            gc.collect()
            time.sleep(settle)
            fn()  # wakes the engine's threads; not timed
            times = []
            for _ in range(block):
                started = time.perf_counter()
                fn()
                times.append(time.perf_counter() - started)
            medians[name] = float(np.median(times))
            samples[name] += times
        ratios.append(medians[a] / medians[b])
    return {a: float(np.median(samples[a])), b: float(np.median(samples[b])), "ratio": float(np.median(ratios))}


#: (runs per block, seconds of sleep before a block): ``--block 1 --settle 0`` pairs single runs
#: back to back, the steadiest ratio on a machine whose speed drifts within a second
BLOCKING = {"block": 3, "settle": 0.1}


def measure(name: str, proto, feeds: dict, repeat: int) -> dict:
    """amanda's onnxruntime backend and onnxruntime, timed in alternating blocks."""
    out = proto.graph.output[0].name
    session = Session(from_onnx(proto), backend="onnxruntime", threads=2)
    theirs = ort_session(proto)
    np.testing.assert_allclose(session.run([out], feeds)[0], theirs.run([out], feeds)[0], rtol=2e-3, atol=2e-3)
    times = paired({"amanda": lambda: session.run([out], feeds),
                    "onnxruntime": lambda: theirs.run([out], feeds)}, repeat, **BLOCKING)
    parts = len(session._remote.records)
    session.close()
    return {"name": name, "parts": parts, **times}


def split_mlp(layers: int = 6, width: int = 512, batch: int = 64):
    """An MLP of ``layers`` dense+Relu layers, and the name of its middle Relu."""
    b = bench_exec.Builder()
    h = "x"
    relus = []
    for _ in range(layers):
        h = bench_exec.dense(b, h, width, width, True)
        relus.append(h)
    proto = b.model([("x", [batch, width])], h)
    feeds = {"x": np.random.default_rng(0).standard_normal((batch, width)).astype(np.float32)}
    return proto, feeds, relus[layers // 2 - 1]


def measure_split(repeat: int) -> dict:
    proto, feeds, middle = split_mlp()
    out = proto.graph.output[0].name
    session = Session(from_onnx(proto), backend="onnxruntime", threads=2,
                      placement={f"$..[?name=='{middle}']": "cpu:0"})
    theirs = ort_session(proto)
    np.testing.assert_allclose(session.run([out], feeds)[0], theirs.run([out], feeds)[0], rtol=2e-3, atol=2e-3)
    devices = [r[1] for r in session._remote.records]
    assert devices == ["onnxruntime:cpu", "cpu:0", "onnxruntime:cpu"], devices
    times = paired({"amanda": lambda: session.run([out], feeds),
                    "onnxruntime": lambda: theirs.run([out], feeds)}, repeat, **BLOCKING)
    return {"name": "mlp split around a numpy Relu", "parts": len(devices), **times}


def coverage(name: str, proto, feeds: dict, runs: int = 5) -> tuple[float, float, float]:
    """(median share of wall time the per-op times cover, profiled wall, plain run) for numpy."""
    out = proto.graph.output[0].name
    model = from_onnx(proto)
    profiled, plain = Session(model, profile=True, threads=1), Session(model, threads=1)
    shares, walls, plains = [], [], []
    for _ in range(runs + 1):
        profiled.run([out], feeds)
        shares.append(profiled.profile.total / profiled.profile.wall)
        walls.append(profiled.profile.wall)
        started = time.perf_counter()
        plain.run([out], feeds)
        plains.append(time.perf_counter() - started)
    return (float(np.median(shares[1:])), float(np.median(walls[1:])), float(np.median(plains[1:])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--only", default=",".join(bench_models.REAL + list(bench_models.BUILT)))
    parser.add_argument("--block", type=int, default=3, help="runs per timed block")
    parser.add_argument("--settle", type=float, default=0.1, help="seconds of sleep before each block")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "amanda-bench-models")
    args = parser.parse_args(argv)
    BLOCKING.update(block=args.block, settle=args.settle)
    args.cache.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    rows, covered, models = [], [], []
    for name in args.only.split(","):
        if name not in bench_models.BUILT and bench_models.torch is None:
            print(f"{name}: skipped (torch is not installed)", file=sys.stderr)
            continue
        proto, feeds = bench_models.BUILT[name][0]() if name in bench_models.BUILT \
            else bench_models.export(name, args.cache)
        models.append((name, proto, feeds))
        rows.append(measure(name, proto, feeds, args.repeat))
        print(f"{name}: {rows[-1]['ratio']:.3f}x", file=sys.stderr)
    split = measure_split(args.repeat)
    for name, proto, feeds in models:
        covered.append((name, *coverage(name, proto, feeds)))
    lines = ["| model | parts | amanda backend=onnxruntime | onnxruntime | ratio | target |", "|---|---|---|---|---|---|"]
    for r in [*rows, split]:
        ratio = r["ratio"]
        target = 1.3 if r is split else 1.1
        lines.append(f"| {r['name']} | {r['parts']} | {fmt_time(r['amanda'])} | {fmt_time(r['onnxruntime'])} | "
                     f"{ratio:.3f}x | {'ok' if ratio <= target else 'MISSED'} (<= {target}x) |")
    real = [r["ratio"] for r in rows if r["name"] in bench_models.REAL]
    if real:
        geomean = math.exp(sum(map(math.log, real)) / len(real))
        lines.append(f"\ngeomean over {len(real)} real models: {geomean:.3f}x ({'ok' if geomean <= 1.05 else 'MISSED'}, "
                     "<= 1.05x)")
    lines += ["", "| model (numpy, threads=1) | per-op times / profiled wall | profiled run | plain run |",
              "|---|---|---|---|"]
    for name, share, wall, plain in covered:
        lines.append(f"| {name} | {100 * share:.1f}% | {fmt_time(wall)} | {fmt_time(plain)} |")
    print("\n".join(lines))
    print(f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
