"""Distributed execution on a two-worker Dask LocalCluster against one local Session.

Three figures (issue 18):

- the fixed cost of a distributed run: a tiny model (two Relus on four numbers) split over
  two devices, each on its own worker process; target under 20 ms;
- the 6-layer transformer encoder of ``bench_exec.py`` at batch 64, its first half of ops on
  one worker and the second half on the other, against a local Session; target <= 1.3x;
- data-parallel inference of 4,096 samples of the MLP (784-512-512-10) with
  ``amanda.dask.map_blocks`` over the two workers, against one local Session running the
  same samples in blocks of 512 one after another; target >= 0.9x its throughput. The samples
  are held in the workers' memory (persisted) before the timing, as they are in the local
  process's. Two block sizes: 2,048 rows (one block per worker, the size docs/distribution.md
  recommends: a block should take tens of milliseconds) and 512 rows.

The cluster is ``LocalCluster(n_workers=2, processes=True, threads_per_worker=1)`` started with
the worker settings docs/distribution.md recommends (glibc's own malloc thresholds, OpenBLAS
threads that stop spinning sooner). Each
contender is warmed up (plans compiled, parts shipped), then their runs alternate and the
medians are compared.

    python benchmarks/bench_dist.py [--repeat 7] [--only fixed,transformer,data]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # this checkout's amanda, on the workers too

from bench_exec import Builder, alternating_blocks, dense, transformer  # noqa: E402
from common import fmt_time, table  # noqa: E402

import amanda  # noqa: E402
from amanda.exec import Session  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402

RNG = np.random.default_rng(0)
CHUNKS = (2048, 512)  # rows per block of the data-parallel runs; the first is judged
LOCAL_CHUNK = 512  # rows per run of the local Session


def halves(model: amanda.Container) -> amanda.Container:
    """``model`` with the first half of its computing ops (in running order) on ``worker-0``,
    the rest on ``worker-1``; its constants are copied into the parts that read them."""
    flat = amanda.flatten(model)
    order = [p for p in flat.topological_order() if p in flat.ops and flat.ops[p].type != "Constant"]
    placed = amanda.with_attrs(model, order[: len(order) // 2], device="worker-0")
    return amanda.with_attrs(placed, order[len(order) // 2:], device="worker-1")


def tiny() -> amanda.Container:
    """Two Relus in a row, one per device."""
    onnx = {"namespace": "amanda/onnx/17"}
    return amanda.Container("Tiny", "tiny", inputs=["x"], outputs=["y"], attrs=onnx, children=[
        amanda.op("Relu", "a", ["X"], ["Y"], attrs={"device": "worker-0"}),
        amanda.op("Relu", "b", ["X"], ["Y"], attrs={"device": "worker-1"}),
    ], edges=[("tiny:x", "a:X"), ("a:Y", "b:X"), ("b:Y", "tiny:y")])


def mlp_any_batch() -> Any:
    """The MLP 784-512-512-10 of bench_exec.py with a symbolic batch dimension."""
    b = Builder()
    h = dense(b, "x", 784, 512, True)
    h = dense(b, h, 512, 512, True)
    y = dense(b, h, 512, 10, False)
    return b.model([("x", ["N", 784])], y)


def run_fixed(client: Any, repeat: int) -> list[tuple]:
    model = tiny()
    feeds = {"x": np.array([-1.0, 2.0, -3.0, 4.0], np.float32)}
    remote, local = Session(model, client=client), Session(model)
    assert remote._remote is not None
    np.testing.assert_array_equal(remote.run(["y"], feeds)[0], local.run(["y"], feeds)[0])
    times = alternating_blocks({"dask": lambda: remote.run(["y"], feeds), "local": lambda: local.run(["y"], feeds)},
                               repeat * 4)
    remote.close()
    return [("tiny model over 2 workers: one run", times["dask"], f"local Session {fmt_time(times['local'])}",
             times["dask"] / 0.020, "< 20 ms")]


def run_transformer(client: Any, repeat: int) -> list[tuple]:
    proto, feeds = transformer(batch=64)
    out = proto.graph.output[0].name
    model = halves(from_onnx(proto))
    remote, local = Session(model, client=client), Session(model)
    np.testing.assert_allclose(remote.run([out], feeds)[0], local.run([out], feeds)[0], rtol=1e-4, atol=1e-4)
    times = alternating_blocks({"dask": lambda: remote.run([out], feeds), "local": lambda: local.run([out], feeds)},
                               repeat, warmup=2, block=2)
    remote.close()
    local.close()
    return [("transformer 6x256, batch 64, halves on 2 workers", times["dask"],
             f"local Session {fmt_time(times['local'])}", times["dask"] / times["local"], "<= 1.3x")]


def run_data(client: Any, repeat: int) -> list[tuple]:
    import dask.array as da

    import amanda.dask

    proto = mlp_any_batch()
    model = from_onnx(proto)
    out = proto.graph.output[0].name
    local = Session(model)
    rows = []
    for chunk in CHUNKS:
        # the samples sit in the workers' memory, as they sit in the local process's for the Session
        array = client.persist(da.random.default_rng(0).standard_normal((4096, 784), chunks=(chunk, 784),
                                                                         dtype=np.float32))
        x = array.compute()
        lazy = amanda.dask.map_blocks(model, array, client=client)

        def locally(x: np.ndarray = x) -> np.ndarray:
            return np.concatenate([local.run([out], {"x": x[i:i + LOCAL_CHUNK]})[0]
                                   for i in range(0, len(x), LOCAL_CHUNK)])

        np.testing.assert_allclose(lazy.compute(), locally(), rtol=1e-4, atol=1e-4)
        times = alternating_blocks({"dask": lazy.compute, "local": locally}, repeat, warmup=2, block=2)
        speed = times["local"] / times["dask"]
        rows.append((f"MLP, 4,096 samples in blocks of {chunk}, map_blocks on 2 workers", times["dask"],
                     f"local Session {fmt_time(times['local'])}", speed,
                     ">= 0.9x throughput" if chunk == CHUNKS[0] else "(info)"))
    local.close()
    return rows


MEASURES = {"fixed": run_fixed, "transformer": run_transformer, "data": run_data}


def verdict(row: tuple) -> str:
    what, seconds, _, ratio, target = row
    if target == "< 20 ms":
        return f"{'ok' if seconds < 0.020 else 'MISSED'} (< 20 ms)"
    if target == "(info)":
        return target
    if target.startswith(">="):
        return f"{'ok' if ratio >= 0.9 else 'MISSED'} ({target})"
    return f"{'ok' if ratio <= 1.3 else 'MISSED'} ({target})"


def main(argv: list[str] | None = None) -> int:
    import dask
    from distributed import Client, LocalCluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", default=",".join(MEASURES))
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    rows: list[tuple] = []
    # the worker settings docs/distribution.md recommends (see "Worker processes" there)
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
                          "distributed.nanny.pre-spawn-environ.OPENBLAS_THREAD_TIMEOUT": 20}), \
            LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                         silence_logs=50) as cluster, Client(cluster) as client:
        for key in args.only.split(","):
            started = time.perf_counter()
            rows += MEASURES[key](client, args.repeat)
            print(f"{key}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    text = table([(what, seconds, baseline, ratio, verdict((what, seconds, baseline, ratio, target)))
                  for what, seconds, baseline, ratio, target in rows])
    print(text)
    print(f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after; {os.cpu_count()} cores")
    return 0 if all("MISSED" not in verdict(r) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
