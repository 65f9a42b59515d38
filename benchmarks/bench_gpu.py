"""amanda's GPU devices against onnxruntime's CUDA provider, on a machine with a CUDA GPU.

For each real model of bench_models.py (exported into its cache; torch is needed the first
time) and the MLP, CNN and transformer of bench_exec.py, five runners of the same feeds:

- ``ort-cuda``: an ``InferenceSession`` of the original file on onnxruntime's CUDA provider
  (the baseline of every ratio);
- ``amanda ort-cuda``: ``Session(model, backend="onnxruntime:cuda")``;
- ``amanda cupy``: ``Session(model, backend="cupy")``, the numpy executor's kernels on CuPy
  arrays where the registry marks them, the rest on numpy;
- ``amanda numpy`` and ``ort-cpu``: the same model on the host, for scale.

Every result is checked first (amanda's CUDA part against onnxruntime's CUDA run, CuPy
against the numpy executor); the times are medians over alternating settled blocks (each
runner's block back to back with the others', so a load change moves them alike). Host-device
copies are inside every runner's time: each takes numpy feeds and returns numpy fetches.

    PYTHONPATH=. python benchmarks/bench_gpu.py [--repeat 5] [--only resnet,...] [--budget 240]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_models  # noqa: E402
from common import fmt_time  # noqa: E402

from amanda.exec import Session  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402

RUNNERS = ("ort-cuda", "amanda ort-cuda", "amanda cupy", "amanda numpy", "ort-cpu")


def blocks(fns: dict, repeat: int, block: int = 3) -> dict:
    """Each runner's median time over ``repeat`` rounds of alternating blocks of ``block`` runs."""
    samples: dict = {name: [] for name in fns}
    order = list(fns)
    for k in range(repeat):
        for name in order if k % 2 == 0 else order[::-1]:
            gc.collect()
            fns[name]()  # not timed: wakes threads, fills caches
            for _ in range(block):
                started = time.perf_counter()
                fns[name]()
                samples[name].append(time.perf_counter() - started)
    return {name: float(np.median(times)) for name, times in samples.items()}


def devices(session: Session) -> dict:
    """How many parts of a placed session ran on each device."""
    return dict(Counter(record[1] for record in session._remote.records))


def measure(name: str, proto, feeds: dict, repeat: int) -> dict:
    """The five runners on one model: results checked, then timed."""
    import onnxruntime as ort

    out = proto.graph.output[0].name
    model = from_onnx(proto)
    data = proto.SerializeToString()
    cuda = ort.InferenceSession(data, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    if cuda.get_providers()[0] != "CUDAExecutionProvider":
        raise RuntimeError(f"onnxruntime's CUDA provider did not start (it runs on {cuda.get_providers()})")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    cpu = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    numpy_session = Session(model)
    started = time.perf_counter()
    ort_cuda = Session(model, backend="onnxruntime:cuda")
    ours_cuda = ort_cuda.run([out], feeds)[0]
    first_ort = time.perf_counter() - started
    started = time.perf_counter()
    cupy_session = Session(model, backend="cupy")
    ours_cupy = cupy_session.run([out], feeds)[0]
    first_cupy = time.perf_counter() - started
    reference = numpy_session.run([out], feeds)[0]
    np.testing.assert_allclose(ours_cuda, cuda.run([out], feeds)[0], rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(ours_cupy, reference, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(reference, cpu.run([out], feeds)[0], rtol=2e-3, atol=2e-3)
    times = blocks({
        "ort-cuda": lambda: cuda.run([out], feeds),
        "amanda ort-cuda": lambda: ort_cuda.run([out], feeds),
        "amanda cupy": lambda: cupy_session.run([out], feeds),
        "amanda numpy": lambda: numpy_session.run([out], feeds),
        "ort-cpu": lambda: cpu.run([out], feeds),
    }, repeat)
    row = {"name": name, "nodes": len(proto.graph.node), **times, "first ort-cuda": first_ort,
           "first cupy": first_cupy, "ort parts": devices(ort_cuda), "cupy parts": devices(cupy_session)}
    for session in (numpy_session, ort_cuda, cupy_session):
        session.close()
    return row


def report(rows: list[dict]) -> str:
    """The table: times, and ratios to onnxruntime's CUDA provider."""
    lines = ["| model | nodes | ort-cuda | amanda ort-cuda (ratio) | amanda cupy (ratio) | amanda numpy | ort-cpu | "
             "parts run (device: parts) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        base = r["ort-cuda"]
        parts = ", ".join(f"{k}: {v}" for k, v in sorted(r["cupy parts"].items()))
        parts += "; ort-cuda: " + ", ".join(f"{k}: {v}" for k, v in sorted(r["ort parts"].items()))
        lines.append(f"| {r['name']} | {r['nodes']} | {fmt_time(base)} | {fmt_time(r['amanda ort-cuda'])} "
                     f"({r['amanda ort-cuda'] / base:.3f}x) | {fmt_time(r['amanda cupy'])} ({r['amanda cupy'] / base:.2f}x) "
                     f"| {fmt_time(r['amanda numpy'])} | {fmt_time(r['ort-cpu'])} | {parts} |")
    real = [r["amanda ort-cuda"] / r["ort-cuda"] for r in rows if r["name"] in bench_models.REAL]
    if real:
        lines.append(f"\ngeomean of amanda ort-cuda / ort-cuda over {len(real)} real models: "
                     f"{math.exp(sum(map(math.log, real)) / len(real)):.3f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default=",".join(bench_models.REAL + list(bench_models.BUILT)))
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "amanda-bench-models")
    parser.add_argument("--budget", type=float, default=float("inf"), help="seconds; later models are skipped")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    started, rows = time.perf_counter(), []
    for name in args.only.split(","):
        if time.perf_counter() - started > args.budget:
            print(f"{name}: skipped (over the time budget)", file=sys.stderr)
            continue
        proto, feeds = bench_models.BUILT[name][0]() if name in bench_models.BUILT \
            else bench_models.export(name, args.cache)
        try:
            rows.append(measure(name, proto, feeds, args.repeat))
        except Exception as exc:  # noqa: BLE001 - one model's failure is reported, the others still run
            print(f"{name}: FAILED {type(exc).__name__}: {str(exc)[:500]}", file=sys.stderr)
            continue
        r = rows[-1]
        print(f"{name}: ort-cuda {fmt_time(r['ort-cuda'])}, amanda ort-cuda {r['amanda ort-cuda'] / r['ort-cuda']:.3f}x, "
              f"cupy {r['amanda cupy'] / r['ort-cuda']:.2f}x", file=sys.stderr, flush=True)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
