"""Cost of storing arrays immutably: loading the ~7,500-node transformer encoder of
``bench_onnx.py`` with this tree's amanda and with a baseline revision, in the same run.

Each side runs in its own Python process (so each imports its own ``amanda``); the two
alternate for ``--rounds`` rounds of ``--repeat`` loads each. Times are CPU times of the
loading process (other processes on a shared machine disturb them less than wall time); the
figure is the ratio of the fastest loads, and the ratio of medians is printed too. The baseline
is ``git archive`` of ``--baseline`` (a revision of this repository).

    python benchmarks/bench_arrays.py [--baseline e08bdbf] [--layers 48] [--repeat 5] [--rounds 3] [--gc-off]

``--gc-off`` pauses the cycle collector around every timed load in both trees, so the ratio is
the cost of the work itself (the import of this tree pauses it anyway).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _worker(src: str, model: str, repeat: int, gc_off: bool) -> None:
    sys.path.insert(0, src)
    from amanda.io.onnx import load_onnx

    load_onnx(model)  # warm-up: builds the opset's namespace once
    times = []
    for _ in range(repeat):
        gc.collect()
        if gc_off:
            gc.disable()
        start = time.process_time()
        load_onnx(model)
        times.append(time.process_time() - start)
        gc.enable()
    print(json.dumps(times))


def _export(revision: str, target: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "amanda"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target


def _time(src: Path, model: Path, repeat: int, gc_off: bool) -> list[float]:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", str(src), str(model), "--repeat", str(repeat)]
        + (["--gc-off"] if gc_off else []),
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", default="e08bdbf", help="git revision to compare with")
    parser.add_argument("--layers", type=int, default=48)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gc-off", action="store_true",
                        help="pause the cycle collector in both trees (isolates the cost of the checks)")
    parser.add_argument("--worker", nargs=2, metavar=("SRC", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(*args.worker, args.repeat, args.gc_off)
        return
    import onnx

    sys.path.insert(0, str(HERE))
    from bench_onnx import transformer_encoder
    from common import fmt_time

    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "encoder.onnx"
        proto = transformer_encoder(args.layers)
        onnx.save(proto, model)
        baseline = _export(args.baseline, Path(tmp) / "baseline")
        times: dict[str, list[float]] = {"baseline": [], "current": []}
        for _ in range(args.rounds):
            times["baseline"] += _time(baseline, model, args.repeat, args.gc_off)
            times["current"] += _time(ROOT, model, args.repeat, args.gc_off)
    print(f"model: {len(proto.graph.node):,} nodes, {len(proto.graph.initializer):,} initializers")
    print("| load_onnx | baseline | this tree | ratio | target |\n|---|---|---|---|---|")
    for label, pick in (("fastest", min), ("median", statistics.median)):
        base, current = pick(times["baseline"]), pick(times["current"])
        target = "<= 1.10x" if pick is min else "-"
        print(f"| {label} of {len(times['current'])} ({args.baseline} vs this tree) | {fmt_time(base)} "
              f"| {fmt_time(current)} | {current / base:.3f}x | {target} |")


if __name__ == "__main__":
    main()
