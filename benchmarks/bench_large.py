"""A model bigger than memory: load, query, edit and save, and run one block, from the weights' file.

Writes the Llama-shaped decoder of ``llama_onnx.py`` (``--size 7b``: 32 blocks of width 4096 in
float16, about 13.5 GB of external data) unless ``--model`` names one, then measures, each in a
fresh Python process so that peak RSS (``VmHWM`` of /proc, from the OS) is that step's alone:

- load to a queryable container: ``amanda.load`` against onnx-ir's ``load`` (lazy too), same run;
- a cold query over every op, ``$..[?type=='MatMul']``, on a freshly loaded model;
- an edit adding a LoRA adapter (two new weights, a MatMul pair and an Add) beside each q and v
  projection of every block, then ``amanda.dump`` beside the original, to a new folder with hard
  links, and (``--copy``) to a new folder by copying: time, bytes written, and a check of the
  saved model (onnx.checker with its external data; with ``--onnxruntime``, a session of
  onnxruntime and one forward over 8 tokens, and the same forward in amanda from the lazy weights);
- running block 0 on a batch of tokens (the Session prunes to the embedding, the rotary tables
  and the block): time and peak RSS growth against the block's weights.

    python benchmarks/bench_large.py [--size 7b] [--folder DIR] [--keep] [--tokens 128]

onnx-ir must be importable (``pip install onnx-ir``); the model is deleted afterwards unless
``--keep``. Figures are in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llama_onnx import SIZES, write_llama

import amanda
from amanda.containers.container import Container, op
from amanda.containers.edge import SELF
from amanda.io.onnx import dump_onnx

TARGETS = ("q_proj", "v_proj")


def _scope(model: Container, path: tuple[str, ...], node: Container) -> str:
    """The innermost module ``node`` (at ``path``) was recorded in: its container's ``scope`` in
    a module tree, else the dynamo exporter's metadata of a flat import ('' when none)."""
    if len(path) > 1:
        owner = model.descendant(path[:-1])
        if "scope" in owner.attrs:
            return str(owner.attrs["scope"])
    meta = node.attrs.get("metadata") or {}
    scopes = meta.get("pkg.torch.onnx.name_scopes")
    if not scopes:
        return ""
    return str(ast.literal_eval(scopes)[-2])  # a list literal the exporter wrote with repr


def add_lora(model: Container, rank: int = 8, targets: tuple[str, ...] = TARGETS, seed: int = 0) -> Container:
    """``model`` with a LoRA adapter beside each MatMul of a module named like ``targets``: the
    projection's output plus ``(x @ A) @ B``, A and B new weights of rank ``rank``."""
    rng = np.random.default_rng(seed)
    flat = amanda.flatten(model)
    producers = {(e.dst.op, e.dst.port): e.src for e in flat.edges}
    consumers: dict[tuple, list] = {}
    for e in flat.edges:
        consumers.setdefault((e.src.op, e.src.port), []).append(e.dst)
    top = model.name
    edit = amanda.edit(model)
    for path, node in model.select("$..[?type=='MatMul']"):
        scope = _scope(model, path, node)
        if not scope.endswith(tuple(f".{t}" for t in targets)):
            continue
        weight = flat.ops[producers[(path, "B")].op].attrs["value"]
        (k, n), dtype = weight.shape, weight.dtype
        a = (rng.standard_normal((k, rank), np.float32) / np.float32(np.sqrt(k))).astype(dtype)
        b = (rng.standard_normal((rank, n), np.float32) * np.float32(0.01)).astype(dtype)
        new = [op("Constant", f"{scope}.lora_A.weight", outputs=["output"], attrs={"value": a, "initializer": True}),
               op("Constant", f"{scope}.lora_B.weight", outputs=["output"], attrs={"value": b, "initializer": True}),
               op("MatMul", f"{scope}.lora_A", inputs=["A", "B"], outputs=["Y"]),
               op("MatMul", f"{scope}.lora_B", inputs=["A", "B"], outputs=["Y"]),
               op("Add", f"{scope}.lora_add", inputs=["A", "B"], outputs=["C"])]
        for added in new:
            edit.add(added)
        x = producers[(path, "A")]
        down, up, add = (f"{scope}.lora_A", f"{scope}.lora_B", f"{scope}.lora_add")
        edit.connect(((top, *x.op), x.port), (down, "A")).connect((f"{scope}.lora_A.weight", "output"), (down, "B"))
        edit.connect((down, "Y"), (up, "A")).connect((f"{scope}.lora_B.weight", "output"), (up, "B"))
        edit.connect(((top, *path), "Y"), (add, "A")).connect((up, "Y"), (add, "B"))
        for src, dst in _readers(model, path, consumers):
            edit.remove_edge(src, dst)
            edit.connect((add, "C"), dst)
    return edit.build(name=f"{top}_lora")


def _readers(model: Container, path: tuple[str, ...], consumers: dict) -> list[tuple[Any, Any]]:
    """The edges (wrapper endpoints) that carry the projection at ``path`` to its readers: in a
    module tree, those leaving its module container at the level above it; flat, its own."""
    top = model.name
    owner = model.descendant(path[:-1]) if len(path) > 1 else None
    if owner is None or "scope" not in owner.attrs:
        return [(((top, *path), "Y"), ((top, *dst.op), dst.port)) for dst in consumers.get((path, "Y"), [])]
    above = path[:-2]
    found = []
    for edge in model.descendant(above).edges if above else model.edges:
        if edge.src.op in (path[-2], (path[-2],)):
            dst = (top, *above) if edge.dst.op == SELF else (top, *above, *_names(edge.dst.op))
            found.append((((top, *path[:-1]), edge.src.port), (dst, edge.dst.port)))
    return found


def _names(op: Any) -> tuple[str, ...]:
    return (op,) if isinstance(op, str) else tuple(op)


def block_output(model: Container, block: int = 0) -> str:
    """The fetch naming the output of decoder block ``block`` (its second residual Add)."""
    found = [path for path, node in model.select("$..[?type=='Add']")
             if _scope(model, path, node) == f"model.layers.{block}"]
    return f"{'/'.join(found[-1])}:C"


def _memory() -> dict[str, float]:
    """This process's resident memory from the OS, in MiB: ``peak`` (VmHWM, the high-water mark
    of this process image: ru_maxrss would carry the parent's over exec), ``now`` (VmRSS), and
    of it ``mapped`` (RssFile: file pages, the weights' maps) and ``anonymous`` (RssAnon)."""
    keys = {"VmHWM": "peak", "VmRSS": "now", "RssFile": "mapped", "RssAnon": "anonymous"}
    found: dict[str, float] = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in keys:
                found[keys[key]] = int(value.split()[0]) / 1024
    return found


def _rss_mb() -> float:
    return _memory()["peak"]


# -- the steps, each run in a fresh process ----------------------------------------------------


def step_load(path: str, which: str) -> dict:
    """Load time and peak RSS of amanda's or onnx-ir's load (onnx imported first for both, as
    importing onnx_ir does)."""
    import onnx  # noqa: F401

    if which == "onnx_ir":
        import onnx_ir

        before = _rss_mb()
        start = time.perf_counter()
        model = onnx_ir.load(path)
        seconds = time.perf_counter() - start
        ops = len(model.graph)
    else:
        before = _rss_mb()
        start = time.perf_counter()
        model = amanda.load(path)
        seconds = time.perf_counter() - start
        ops = len(model.children)
    return {"seconds": seconds, "peak_mb": _rss_mb(), "before_mb": before, "nodes": ops}


def step_query(path: str) -> dict:
    """A cold query over every op of a freshly loaded model."""
    model = amanda.load(path)
    start = time.perf_counter()
    found = model.select("$..[?type=='MatMul']")
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "found": len(found), "peak_mb": _rss_mb()}


def step_edit(path: str, out: str, mode: str) -> dict:
    """The LoRA edit, then a dump (beside the original, or to a new folder linking or copying)."""
    import warnings

    model = amanda.load(path)
    start = time.perf_counter()
    edited = add_lora(model)
    edit_seconds = time.perf_counter() - start
    target = Path(path).with_name("model_lora.onnx") if mode == "beside" else Path(out) / "model.onnx"
    target.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = dump_onnx(edited, target, link=mode == "link")
    dump_seconds = time.perf_counter() - start
    model_bytes = sum(f.stat().st_size for f in Path(path).parent.glob("model.onnx*"))
    reloaded = amanda.load(target)
    return {"edit_seconds": edit_seconds, "dump_seconds": dump_seconds, "written": report.written,
            "model_bytes": model_bytes, "referenced": list(report.referenced), "linked": [list(x) for x in report.linked],
            "copied": [list(x) for x in report.copied], "warnings": [str(w.message) for w in caught],
            "ops": len(amanda.flatten(edited).ops), "reloaded_ops": len(amanda.flatten(reloaded).ops),
            "target": str(target), "peak_mb": _rss_mb()}


def step_check(target: str, checker: bool, runtime: bool) -> dict:
    """The saved model through onnx.checker (which finds its external data files, and refuses
    hard-linked ones), and through onnxruntime when asked: a session on the saved folder and one
    forward over 8 tokens, timed, with this process's peak RSS (prepacking off, so that the
    session holds one copy of the weights)."""
    import onnx

    found: dict = {}
    if checker:
        start = time.perf_counter()
        onnx.checker.check_model(target)
        found["checker_seconds"] = time.perf_counter() - start
    if runtime:
        import onnxruntime

        found["available_before_mb"] = _available_mb()
        options = onnxruntime.SessionOptions()
        options.add_session_config_entry("session.disable_prepacking", "1")
        start = time.perf_counter()
        session = onnxruntime.InferenceSession(target, options, providers=["CPUExecutionProvider"])
        found["session_seconds"] = time.perf_counter() - start
        found["session_peak_mb"] = _rss_mb()
        ids = np.arange(8, dtype=np.int64)[None] % 100
        start = time.perf_counter()
        logits = session.run(None, {"input_ids": ids, "position_ids": np.arange(8, dtype=np.int64)[None]})[0]
        found["run_seconds"] = time.perf_counter() - start
        found["peak_mb"] = _rss_mb()
        found["onnxruntime_finite"] = bool(np.isfinite(logits.astype(np.float32)).all())
        found["argmax"] = logits.argmax(-1).ravel().tolist()
        found["last_logits"] = logits[0, -1, :8].astype(float).tolist()
    return found


def step_forward(target: str) -> dict:
    """The saved model's whole forward in amanda over the 8 tokens of the onnxruntime check, from
    the lazy weights: time, peak RSS, and what to compare with onnxruntime's answer."""
    model = amanda.load(target)
    session = amanda.Session(model)
    ids = np.arange(8, dtype=np.int64)[None] % 100
    start = time.perf_counter()
    (logits,) = session.run(["logits"], {"input_ids": ids, "position_ids": np.arange(8, dtype=np.int64)[None]})
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_mb": _rss_mb(), "argmax": logits.argmax(-1).ravel().tolist(),
            "last_logits": logits[0, -1, :8].astype(float).tolist(), "memory": _memory()}


def _available_mb() -> float:
    """The memory the OS says is available to new work (MemAvailable), in MiB."""
    with open("/proc/meminfo") as info:
        for line in info:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def step_block(path: str, tokens: int) -> dict:
    """Block 0 on ``tokens`` tokens: time, peak RSS growth, the block's weight bytes (weights
    named by their paths joined with dots: a module tree's and a flat import's names agree)."""
    model = amanda.load(path)
    fetch = block_output(model)
    weights = {".".join(path): node.attrs["value"] for path, node in model.select("$..[?type=='Constant']")}
    block_bytes = sum(w.nbytes for name, w in weights.items() if name.startswith("model.layers.0."))
    session = amanda.Session(model)
    vocab = weights["model.embed_tokens.weight"].shape[0]
    ids = (np.arange(tokens, dtype=np.int64)[None] * 7919) % vocab
    feeds = {"input_ids": ids, "position_ids": np.arange(tokens, dtype=np.int64)[None]}
    before = _memory()
    start = time.perf_counter()
    (hidden,) = session.run([fetch], feeds)
    seconds = time.perf_counter() - start
    after = _memory()
    return {"seconds": seconds, "before": before, "after": after, "peak_growth_mb": after["peak"] - before["peak"],
            "mapped_growth_mb": after["mapped"] - before["mapped"],
            "block_weight_mb": block_bytes / 2**20, "output_mb": hidden.nbytes / 2**20,
            "finite": bool(np.isfinite(hidden.astype(np.float32)).all())}


STEPS = {"load": step_load, "query": step_query, "edit": step_edit, "check": step_check, "block": step_block,
         "forward": step_forward}


def _in_process(step: str, *args: object) -> dict:
    """Run one step in a fresh interpreter (this file, ``--step``) and read back its JSON."""
    command = [sys.executable, __file__, "--step", step, json.dumps(args)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"step {step} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="7b")
    parser.add_argument("--folder", help="where to write the model (default: a temporary folder)")
    parser.add_argument("--model", help="an existing model to measure instead of writing one")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--copy", action="store_true", help="also time a dump to a new folder by copying")
    parser.add_argument("--onnxruntime", action="store_true", help="check the saved model in onnxruntime")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("args", nargs="?", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.step:
        print(json.dumps(STEPS[options.step](*json.loads(options.args))))
        return
    folder = Path(options.folder or tempfile.mkdtemp(prefix="amanda-large-"))
    try:
        results = _measure(options, folder)
    finally:
        # a temporary folder always goes (with --model it holds the saved copies, whose hard
        # links to the model's data would make onnx's checker refuse that data next time)
        if not options.keep and (not options.model or not options.folder):
            shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(results, indent=1))


def _median(runs: list[dict], key: str) -> float:
    return float(np.median([r[key] for r in runs]))


def _measure(options: argparse.Namespace, folder: Path) -> dict:
    results: dict = {}
    if options.model:
        path = Path(options.model)
    else:
        start = time.perf_counter()
        path = write_llama(folder / "model", options.size)
        results["write_seconds"] = time.perf_counter() - start
    results["data_bytes"] = sum(f.stat().st_size for f in path.parent.glob("*.data"))
    for which in ("onnx_ir", "amanda"):
        runs = [_in_process("load", str(path), which) for _ in range(options.repeat)]
        results[f"load_{which}"] = {"seconds": _median(runs, "seconds"), "peak_mb": _median(runs, "peak_mb"),
                                    "before_mb": _median(runs, "before_mb"), "runs": [r["seconds"] for r in runs]}
    runs = [_in_process("query", str(path)) for _ in range(options.repeat)]
    results["query"] = {"seconds": _median(runs, "seconds"), "found": runs[0]["found"]}
    modes = ["beside"] + (["copy"] if options.copy else []) + ["link"]  # links last: onnx refuses linked files
    for mode in modes:
        edited = _in_process("edit", str(path), str(folder / f"saved_{mode}"), mode)
        edited["check"] = _in_process("check", edited["target"], mode != "link", options.onnxruntime)
        results[f"edit_{mode}"] = edited
    if options.onnxruntime:  # the edited model's whole forward in amanda, beside onnxruntime's
        results["forward"] = _in_process("forward", results["edit_beside"]["target"])
    results["block"] = _in_process("block", str(path), options.tokens)
    return results


if __name__ == "__main__":
    main()
