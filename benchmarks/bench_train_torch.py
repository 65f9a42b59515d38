"""Training step time and peak memory against torch on the CPU, at the same number of threads:
an MLP (784-512-512-10, batch 64), the digits CNN (batch 32) and a 4-layer transformer encoder
(d_model 128, 4 heads, d_ff 512, sequence 32, batch 16), each trained by Adam.

Time: one process runs amanda's step (``session.run(["loss", "train"], ...)``, ``Session(threads=
n)``) and torch's (``zero_grad``, forward, loss, ``backward``, ``step``, ``torch.set_num_threads(
n)``) in alternating blocks of ``--steps`` steps, so both see the same machine load; each block
gives a time per step, and the table shows the medians over ``--blocks`` blocks after a warm-up
and their ratio. Memory: a fresh process per model and library imports the library, makes the
data, runs one step of a first copy of the model and drops it (so lazy imports and the
kernels' libraries are loaded), gives freed memory back (``malloc_trim``), resets the kernel's
peak-RSS mark (``/proc/self/clear_refs``), then builds the model and its
optimiser and runs ``--steps`` steps; the peak RSS above the level before the build (weights,
gradients, optimiser state, activations, workspace) is reported, and the ratio.

    /work/torchenv/bin/python benchmarks/bench_train_torch.py [--threads 1] [--blocks 9] [--steps 5]
    ... [--profile mlp|cnn|encoder]   # cProfile of amanda's steps, by total time
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_train import cnn, mlp, torch_step

import amanda
from amanda import Input, layers, ops
from amanda.optim import Adam, minimize

SEQ, D, HEADS, FF, BATCH = 32, 128, 4, 512, 16


def encoder() -> tuple[amanda.Container, dict]:
    """Four post-norm encoder blocks (relu) and the mean square of the output as the loss."""
    x = Input("x", "float32", ("batch", SEQ, D))
    v = x
    for i in range(4):
        v = layers.TransformerEncoder(D, HEADS, FF, name=f"layer{i}")(v)
    net = layers.seeded(amanda.model([x], {"loss": ops.ReduceMean(ops.Mul(v, v), keepdims=0)}, name="encoder"), 0)
    return net, {"x": np.random.default_rng(0).standard_normal((BATCH, SEQ, D)).astype(np.float32)}


def torch_encoder_step() -> Any:
    import torch

    layer = torch.nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, activation="relu", batch_first=True)
    module = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
    x = torch.randn(BATCH, SEQ, D)
    opt = torch.optim.Adam(module.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad()
        module(x).pow(2).mean().backward()
        opt.step()

    return step


MODELS = {"mlp": (mlp, lambda: torch_step("mlp")), "cnn": (cnn, lambda: torch_step("cnn")),
          "encoder": (encoder, torch_encoder_step)}
LABELS = {"mlp": "MLP 784-512-512-10, batch 64", "cnn": "digits CNN, batch 32",
          "encoder": f"4-layer encoder d{D} h{HEADS} ff{FF}, seq {SEQ}, batch {BATCH}"}


def amanda_step(kind: str, threads: int) -> tuple[Any, Any]:
    net, feeds = MODELS[kind][0]()
    session = amanda.Session(minimize(net, "loss", Adam(lr=1e-3)), threads=threads)

    def step() -> None:
        session.run(["loss", "train"], feeds, phase="train")

    return step, session


def per_step(fn: Any, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - start) / steps


def _status(field: str) -> int:
    """A field of /proc/self/status in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def memory_child(kind: str, library: str, threads: int, steps: int) -> None:
    """Run in a fresh process: the peak RSS of building and ``steps`` steps, above the level
    before the build, printed as JSON."""
    if library == "torch":
        import torch

        torch.set_num_threads(threads)
    first: Any = MODELS[kind][1]() if library == "torch" else amanda_step(kind, threads)
    (first if library == "torch" else first[0])()  # one step first: lazy imports, kernels' libraries, caches
    if library != "torch":
        first[1].close()
    del first
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed memory back to the system, for both libraries
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = _status("VmRSS")
    step: Any = MODELS[kind][1]() if library == "torch" else amanda_step(kind, threads)[0]
    for _ in range(steps):
        step()
    print(json.dumps({"peak": _status("VmHWM") - before}))


def memory(kind: str, library: str, threads: int, steps: int) -> int:
    env = {**os.environ, "AMANDA_PROGRESS": "0", "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run([sys.executable, __file__, "--memory-child", kind, library, "--threads", str(threads),
                           "--steps", str(steps)], capture_output=True, text=True, env=env, timeout=600, check=True)
    return int(json.loads(done.stdout.strip().splitlines()[-1])["peak"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--blocks", type=int, default=9)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--profile", choices=list(MODELS))
    parser.add_argument("--memory-child", nargs=2, metavar=("MODEL", "LIBRARY"))
    args = parser.parse_args()
    if args.memory_child:
        memory_child(*args.memory_child, args.threads, args.steps)
        return
    import torch

    torch.set_num_threads(args.threads)
    if args.profile:
        import cProfile
        import pstats

        ours, session = amanda_step(args.profile, args.threads)
        ours()
        profiler = cProfile.Profile()
        profiler.runcall(lambda: [ours() for _ in range(20)])
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
        session.close()
        return
    print(f"torch {torch.__version__}, numpy {np.__version__}, {args.threads} thread(s), "
          f"load {os.getloadavg()[0]:.1f} before")
    print("| model | amanda step | torch step | time ratio | amanda peak | torch peak | memory ratio |")
    print("|---|---|---|---|---|---|---|")
    for kind in args.models:
        ours, session = amanda_step(kind, args.threads)
        theirs = MODELS[kind][1]()
        for _ in range(2):  # warm-up: plans, variables, allocator
            ours()
            theirs()
        a, b = [], []
        for _ in range(args.blocks):
            a.append(per_step(ours, args.steps))
            b.append(per_step(theirs, args.steps))
        session.close()
        mine, base = statistics.median(a), statistics.median(b)
        m_ours, m_theirs = memory(kind, "amanda", args.threads, args.steps), memory(kind, "torch", args.threads, args.steps)
        print(f"| {LABELS[kind]} | {mine * 1e3:.1f} ms | {base * 1e3:.1f} ms | {mine / base:.2f}x | "
              f"{m_ours / 2**20:.1f} MiB | {m_theirs / 2**20:.1f} MiB | {m_ours / m_theirs:.2f}x |", flush=True)
    print(f"load {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
