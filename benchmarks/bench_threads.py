"""The default thread setting against ``threads=1``, on an idle machine and beside a busy core.

The corpus of ``bench_models.py`` (its eight exported architectures when torch or the cache has
them, and the MLP, CNN and transformer of ``bench_exec.py``) runs in two sessions per model, one
with ``threads=None`` (the default) and one with ``threads=1``, in alternating blocks of runs.
Every run after the first (the plan) is timed, the BLAS tuner's probes and retries included,
since a user pays for each of them; a block's figure is its mean run, and a setting's figure the
median over its blocks. The two conditions:

- ``idle``: nothing else on the machine (as far as this script knows);
- ``busy``: a process spinning on core 0 (pinned with ``sched_setaffinity``) for the length of
  the measurement, as another job on a shared machine would.

    python benchmarks/bench_threads.py [--blocks 12] [--block 5] [--only resnet,mlp] [--conditions idle,busy]

Target: in ``busy``, the default at most 1.1x ``threads=1`` for every model, by the median of
blocks and by the total time; in ``idle``, the default no slower than before (compare its
column across revisions: run the script with ``PYTHONPATH`` set to each tree). "runs on every
core" counts the default's runs with BLAS on more than one thread (its probes and retries
included). Exported models are read from ``--cache`` (default that of
``bench_models.py``); without torch, the feeds saved beside them are used.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_models  # noqa: E402
from common import fmt_time  # noqa: E402

from amanda.exec import Session  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402

SPIN = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"
TARGET = 1.1


@contextlib.contextmanager
def busy_core(core: int = 0) -> Iterator[None]:
    """A process spinning on ``core`` for the length of the block."""
    spinner = subprocess.Popen([sys.executable, "-c", SPIN, str(core)])
    try:
        time.sleep(0.3)  # let it start spinning before anything is timed
        yield
    finally:
        spinner.kill()
        spinner.wait()


def corpus_model(name: str, cache: Path) -> tuple[onnx.ModelProto, dict]:
    """``name``'s ONNX model and feeds: built, exported with torch, or read from the cache."""
    if name in bench_models.BUILT:
        return bench_models.BUILT[name][0]()
    saved = cache / f"{name}.feeds.npz"
    if bench_models.torch is not None:
        proto, feeds = bench_models.export(name, cache)
        np.savez(saved, **feeds)
        return proto, feeds
    path = cache / f"{name}.onnx"
    if not path.exists() or not saved.exists():
        raise FileNotFoundError(f"{name}: no torch and no {path.name} with {saved.name} in {cache}")
    with np.load(saved) as found:
        return onnx.load(str(path)), {k: found[k] for k in found.files}


def blocks(fns: dict[str, Callable[[], Any]], count: int, size: int, settle: float = 0.05) -> dict[str, dict]:
    """Alternating blocks of ``size`` runs of each function, every run timed: per function the
    median of the blocks' mean runs, the slowest run and the total (which the stalls weigh on,
    where the median of blocks passes over a few of them)."""
    runs: dict[str, list[float]] = {name: [] for name in fns}
    means: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(count):
        for name, fn in fns.items():
            gc.collect()
            time.sleep(settle)  # spinning BLAS threads of the other setting go idle first
            times = []
            for _ in range(size):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            runs[name] += times
            means[name].append(sum(times) / size)
    return {name: {"median": statistics.median(means[name]), "slowest": max(runs[name]), "total": sum(runs[name])}
            for name in fns}


def measure(name: str, proto: onnx.ModelProto, feeds: dict, count: int, size: int) -> dict:
    """The default and threads=1 on one model, each in a session of its own after its first run."""
    model = from_onnx(proto)
    out = proto.graph.output[0].name
    sessions = {"default": Session(model), "threads=1": Session(model, threads=1)}
    try:
        first = {k: s.run([out], feeds)[0] for k, s in sessions.items()}
        np.testing.assert_allclose(first["default"], first["threads=1"], rtol=1e-4, atol=1e-4)
        times = blocks({k: (lambda s=s: s.run([out], feeds)) for k, s in sessions.items()}, count, size)
        tuner = sessions["default"].plan([out], feeds).tuner
        times["default"]["budget_runs"] = getattr(tuner, "budget_runs", None) if tuner is not None else 0
    finally:
        for s in sessions.values():
            s.close()
    return {"name": name, **times}


def report(condition: str, rows: list[dict]) -> str:
    """One markdown table for a condition."""
    busy = condition == "busy"
    lines = [f"{condition}:", "", "| model | default | threads=1 | ratio | ratio of totals | slowest run, default |"
             " slowest run, threads=1 | runs on every core |" + (" target |" if busy else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|" if busy else "")]
    for r in rows:
        d, one = r["default"], r["threads=1"]
        ratio, totals = d["median"] / one["median"], d["total"] / one["total"]
        verdict = f" {'ok' if max(ratio, totals) <= TARGET else 'MISSED'} (<= {TARGET}x) |" if busy else ""
        lines.append(f"| {r['name']} | {fmt_time(d['median'])} | {fmt_time(one['median'])} | {ratio:.2f}x | "
                     f"{totals:.2f}x | {fmt_time(d['slowest'])} | {fmt_time(one['slowest'])} | "
                     f"{'?' if d.get('budget_runs') is None else d['budget_runs']} |{verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=12, help="blocks per setting")
    parser.add_argument("--block", type=int, default=5, help="runs per block")
    parser.add_argument("--only", default=",".join(bench_models.REAL + list(bench_models.BUILT)))
    parser.add_argument("--conditions", default="idle,busy")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "amanda-bench-models")
    args = parser.parse_args(argv)
    if args.blocks < 1 or args.block < 1:
        parser.error("--blocks and --block must be at least 1")
    args.cache.mkdir(parents=True, exist_ok=True)
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} before", file=sys.stderr)
    models = {}
    for name in args.only.split(","):
        try:
            models[name] = corpus_model(name, args.cache)
        except FileNotFoundError as exc:
            print(f"{name}: skipped ({exc})", file=sys.stderr)
    for condition in args.conditions.split(","):
        rows = []
        with busy_core() if condition == "busy" else contextlib.nullcontext():
            for name, (proto, feeds) in models.items():
                started = time.perf_counter()
                rows.append(measure(name, proto, feeds, args.blocks, args.block))
                print(f"{condition} {name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
        print(report(condition, rows) + "\n")
    print(f"load average {os.getloadavg()[0]:.1f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
