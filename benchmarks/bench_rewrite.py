"""Optimisation and run time of two amanda trees on bench_models.py's cached models, in one run.

    python benchmarks/bench_rewrite.py --trees /path/to/main /path/to/branch [--rounds 3] [--cache DIR]

For each tree in turn (alternating, ``--rounds`` times, each in a fresh process with that tree
first on ``sys.path``) and each model cached by ``bench_models.py`` (``--cache``, default the
same directory): the optimisation a Session's plan runs for the feeds' types
(``exec.plan_cache.optimized_for``, median of 5), a fresh session's plan, and ``Session.run``
(median of settled blocks; ``--optimise-only`` skips these two, ``--fusions`` times the five
fusion passes of ``passes/fuse.py`` on the imported model in place of the optimisation); and
the op types of the optimised model, which must agree between the trees when a change only
moves the optimiser onto another engine. Prints each tree's median
over the rounds and the median over the rounds of each round's ratio after / before.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS = ["resnet", "mobilenetv3", "efficientnet", "vit", "convnext", "gpt2", "bert", "unet", "gpt2x12"]
CACHE = Path(tempfile.gettempdir()) / "amanda-bench-models"
FUSIONS = ["fuse_conv_batchnorm", "fuse_matmul_add", "fuse_matmul_add_internal", "fuse_gelu_internal", "fuse_swish_internal"]


def _median_time(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _plan(session_type: type, model: object, out: str, feeds: dict) -> None:
    """A fresh session's plan for the feeds' types (specialisation, optimisation, compilation)."""
    with session_type(model) as fresh:
        fresh.plan([out], feeds)


def measure(cache: Path, models: list[str], optimise_only: bool = False, fusions: bool = False) -> dict:
    """The figures of the amanda on ``sys.path`` for each cached model."""
    import numpy as np
    import onnx

    from amanda.containers.flatten import flatten
    from amanda.exec import Session
    from amanda.exec.plan_cache import optimized_for, signature
    from amanda.io.onnx.importer import from_onnx

    found = {}
    for name in models:
        path = cache / f"{name}.onnx"
        feeds_path = cache / f"{'gpt2' if name == 'gpt2x12' else name}.feeds.npz"
        if not path.exists() or not feeds_path.exists():
            continue
        proto = onnx.load(str(path))
        out = proto.graph.output[0].name
        model = from_onnx(proto)
        feeds = dict(np.load(feeds_path))
        types = signature(model, (out,), feeds)
        optimized = optimized_for(model, types)
        optimise = _median_time(lambda: optimized_for(model, types), 5)  # noqa: B023 - called at once
        if fusions:  # the fusion passes alone, each on the imported model, summed
            from amanda.passes import fuse

            passes = [getattr(fuse, n) for n in FUSIONS]
            optimise = sum(_median_time(lambda: f(model), 9) for f in passes)  # noqa: B023 - called at once

        counts = collections.Counter(op.type for op in flatten(optimized).ops.values())
        found[name] = {"optimise": optimise, "ops": dict(sorted(counts.items()))}
        if optimise_only:
            continue
        found[name]["plan"] = _median_time(lambda: _plan(Session, model, out, feeds), 3)  # noqa: B023 - called at once
        with Session(model) as session:
            for _ in range(3):
                session.run([out], feeds)
            blocks = [_median_time(lambda: session.run([out], feeds), 5) for _ in range(5)]  # noqa: B023
        found[name]["run"] = statistics.median(blocks)
    return found


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} µs"


def main() -> int:
    """Alternate the trees, then print the medians and ratios as a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trees", nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--only", default=",".join(MODELS))
    parser.add_argument("--optimise-only", action="store_true", help="measure the optimisation alone")
    parser.add_argument("--fusions", action="store_true",
                        help="with --optimise-only: time the five fusion passes of passes/fuse.py instead")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    models = args.only.split(",")
    if args.measure:
        print(json.dumps(measure(args.cache, models, args.optimise_only, args.fusions)))
        return 0
    if not args.trees:
        parser.error("--trees BEFORE AFTER")
    runs: dict[str, list[dict]] = {tree: [] for tree in args.trees}
    for round_ in range(args.rounds):
        for tree in args.trees if round_ % 2 == 0 else args.trees[::-1]:  # ABBA: no tree always first
            argv = [__file__, "--measure", "--only", args.only, "--cache", str(args.cache)]
            argv += ["--optimise-only"] if args.optimise_only else []
            argv += ["--fusions"] if args.fusions else []
            code = (f"import sys; sys.path.insert(0, {tree!r}); sys.argv = {argv!r}; "
                    f"exec(compile(open({__file__!r}).read(), {__file__!r}, 'exec'))")
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            runs[tree].append(json.loads(done.stdout.strip().splitlines()[-1]))
    before, after = args.trees
    keys = ("optimise",) if args.optimise_only else ("optimise", "plan", "run")
    print("| model | " + " | ".join(f"{k} before | after | ratio" for k in keys) + " | same ops |")
    print("|---|" + "---|---|---|" * len(keys) + "---|")
    for name in models:
        if name not in runs[before][0]:
            continue
        row = [name]
        for key in keys:
            b = statistics.median(r[name][key] for r in runs[before])
            a = statistics.median(r[name][key] for r in runs[after])
            # the ratio of each round's pair (measured minutes apart at most), then their median
            ratio = statistics.median(x[name][key] / y[name][key] for x, y in zip(runs[after], runs[before]))
            row += [_fmt(b), _fmt(a), f"{ratio:.2f}"]
        row.append("yes" if runs[before][0][name]["ops"] == runs[after][0][name]["ops"] else
                   f"no: {runs[before][0][name]['ops']} vs {runs[after][0][name]['ops']}")
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
