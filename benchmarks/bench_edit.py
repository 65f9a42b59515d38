"""Removing and re-adding one edge, non-destructively, in models of 100,000 and 1,000 ops.

Compared, in the same run, with the same edit on a model of 1,000 ops (10 blocks of 100)
and with ``copy.deepcopy`` of an equivalent list-of-dicts graph followed by the edit (what
a mutable graph library needs to keep the original intact).

    python benchmarks/bench_edit.py [--blocks 1000] [--ops 100] [--repeat 200]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_containers import model_document
from common import median_time, table

import amanda


def load_model(blocks: int, ops: int) -> amanda.Container:
    doc = model_document(blocks, ops)
    doc["graph"]["name"] = "model"
    return amanda.loads(json.dumps(doc), "json")


def skip_edit(model: amanda.Container, block: int, op: int) -> amanda.Container:
    src = f"model/b{block}/op{op}:y"
    dst = f"model/b{block}/op{op + 1}:x"
    return amanda.edit(model).remove_edge(src, dst).connect(src, dst).build(name="edited")


def dict_graph(blocks: int, ops: int) -> dict:
    nodes, edges = [], []
    for b in range(blocks):
        for i in range(ops):
            nodes.append({"name": f"b{b}/op{i}", "type": "Relu", "inputs": ["x"], "outputs": ["y"], "attrs": {"i": i}})
            if i:
                edges.append({"src": [f"b{b}/op{i - 1}", "y"], "dst": [f"b{b}/op{i}", "x"]})
        if b:
            edges.append({"src": [f"b{b - 1}/op{ops - 1}", "y"], "dst": [f"b{b}/op0", "x"]})
    return {"nodes": nodes, "edges": edges}


def deepcopy_then_edit(graph: dict, block: int, op: int) -> dict:
    new = copy.deepcopy(graph)
    wanted = {"src": [f"b{block}/op{op}", "y"], "dst": [f"b{block}/op{op + 1}", "x"]}
    new["edges"].remove(wanted)
    new["edges"].append(wanted)
    return new


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--blocks", type=int, default=1000)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    large = load_model(args.blocks, args.ops)
    small = load_model(10, args.ops)
    block, op = args.blocks // 2, args.ops // 2

    start = time.perf_counter()
    edited = skip_edit(large, block, op)
    cold = time.perf_counter() - start
    assert edited.child("model") is large
    assert len(amanda.flatten(edited).edges) == len(amanda.flatten(large).edges)

    large_edit = median_time(lambda: skip_edit(large, block, op), args.repeat)
    small_edit = median_time(lambda: skip_edit(small, 5, op), args.repeat)
    graph = dict_graph(args.blocks, args.ops)
    deep = median_time(lambda: deepcopy_then_edit(graph, block, op), max(3, args.repeat // 50))

    print(f"model: {args.blocks * args.ops:,} ops; first edit (cold caches) {cold * 1e3:.2f} ms")
    print(table([
        (f"edit in {args.blocks * args.ops:,}-op model", large_edit, "same edit, 1,000-op model",
         large_edit / small_edit, "<= 3x"),
        (f"edit in {args.blocks * args.ops:,}-op model", large_edit, "deepcopy + edit of list-of-dicts",
         large_edit / deep, "<= 0.001x (>= 1,000x less)"),
    ]))
    print(f"deepcopy + edit: {deep:.3f} s; speed-up {deep / large_edit:,.0f}x")


if __name__ == "__main__":
    main()
