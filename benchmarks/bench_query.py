"""Queries on a 100,000-op model (1,000 blocks of 100 chained ops), against baselines.

The baselines scan the same 100,000 ops written as plain dicts (name, type, path,
depth, is_op, effective attrs), in the same run: a Python list comprehension, and the
jmespath library's filter over the list. Every query result is checked against the
list comprehension's answer.

    python benchmarks/bench_query.py [--blocks 1000] [--ops 100] [--repeat 5] [--blocks-cold 7]
    python benchmarks/bench_query.py --small        # 100 blocks, for a quick look

"First, fresh model" loads the model anew for each run, so nothing is cached on any of
its containers: the time includes listing the nodes, looking for graphs held in
attributes, building the index or columns the query reads, and the result's paths. On a
shared machine the load changes between runs, so these rows are measured in blocks, in CPU
time: each block loads a fresh model, times the list comprehension (median of three) and the
first query right after it, and the row gives the median of the blocks' ratios.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jmespath

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_containers import model_document
from common import median_time, table

import amanda
from amanda.query import select

BY_TYPE = "$..[?type=='MatMul']"
BY_VALUE = "$..[?is_op && attrs.i > `97`]"
FALLBACK = "$..[?is_op && path[0] == 'b7']"


def as_dicts(model: amanda.Container) -> list[dict]:
    """Every op of the model as the plain dict a hand-written scan would use."""
    out = []
    for path, node, attrs in amanda.walk(model):
        if path and not node.children:
            out.append(
                {"name": node.name, "type": node.type, "path": list(path), "depth": len(path),
                 "is_op": True, "attrs": dict(attrs)}
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--blocks", type=int, default=1000)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--blocks-cold", type=int, default=7, help="blocks of the first-query rows")
    parser.add_argument("--small", action="store_true", help="100 blocks of 100 ops")
    args = parser.parse_args()
    if args.small:
        args.blocks = 100
    text = json.dumps(model_document(args.blocks, args.ops))
    model = amanda.loads(text, "json")
    dicts = as_dicts(model)
    print(f"model: {len(dicts):,} ops in {args.blocks:,} blocks")

    def fresh_model() -> amanda.Container:
        # loaded anew: no table, column or index cached on any of its containers
        return amanda.loads(text, "json")

    def cold_blocks(selector: str, scan: Callable[[], object], blocks: int) -> tuple[float, float]:
        """Median CPU time of a first query on a fresh model, and the median of the blocks'
        ratios to the scan timed right before it (CPU time too: a shared machine's other
        processes then change the ratio less)."""
        times, ratios = [], []
        fresh = None
        for _ in range(blocks):
            fresh = None  # the last block's model freed before the next is loaded
            gc.collect()
            fresh = fresh_model()
            baseline = median_time(scan, 3, clock=time.process_time)
            gc.collect()
            start = time.process_time()
            answer = select(fresh, selector).paths
            times.append(time.process_time() - start)
            ratios.append(times[-1] / baseline)
            assert len(answer) > 0
        return statistics.median(times), statistics.median(ratios)

    # the scans are cheap: more runs steady their medians on a shared machine
    scans = 3 * args.repeat
    scan_type = median_time(lambda: [d for d in dicts if d["type"] == "MatMul"], scans)
    scan_value = median_time(lambda: [d for d in dicts if d["is_op"] and d["attrs"].get("i", 0) > 97], scans)
    scan_path = median_time(lambda: [d for d in dicts if d["is_op"] and d["path"][0] == "b7"], scans)
    jm_type_expr, jm_value_expr = jmespath.compile("[?type=='MatMul']"), jmespath.compile("[?is_op && attrs.i > `97`]")
    jm_type = median_time(lambda: jm_type_expr.search(dicts), args.repeat)
    jm_value = median_time(lambda: jm_value_expr.search(dicts), args.repeat)

    expected_type = [tuple(d["path"]) for d in dicts if d["type"] == "MatMul"]
    expected_value = [tuple(d["path"]) for d in dicts if d["attrs"].get("i", 0) > 97]
    assert list(select(model, BY_TYPE).paths) == expected_type
    assert list(select(model, BY_VALUE).paths) == expected_value
    assert len(select(model, FALLBACK)) == (args.ops if args.blocks > 7 else 0)

    warm_type = median_time(lambda: select(model, BY_TYPE).paths, args.repeat)
    first_type, first_type_ratio = cold_blocks(
        BY_TYPE, lambda: [d for d in dicts if d["type"] == "MatMul"], args.blocks_cold)
    warm_value = median_time(lambda: select(model, BY_VALUE).paths, args.repeat)
    first_value, first_value_ratio = cold_blocks(
        BY_VALUE, lambda: [d for d in dicts if d["is_op"] and d["attrs"].get("i", 0) > 97], args.blocks_cold)
    fallback = median_time(lambda: select(model, FALLBACK).paths, max(1, args.repeat // 2))

    rows = [
        (f"`{BY_TYPE}` repeated", warm_type, "list comprehension", warm_type / scan_type, "<= 0.1x"),
        (f"`{BY_TYPE}` repeated", warm_type, "jmespath over dicts", warm_type / jm_type, ""),
        (f"`{BY_TYPE}` first, fresh model", first_type, "list comprehension (blocks)", first_type_ratio, "<= 10x"),
        (f"`{BY_VALUE}` repeated", warm_value, "list comprehension", warm_value / scan_value, "<= 5x"),
        (f"`{BY_VALUE}` repeated", warm_value, "jmespath over dicts", warm_value / jm_value, ""),
        (f"`{BY_VALUE}` first, fresh model", first_value, "list comprehension (blocks)", first_value_ratio, ""),
        (f"`{FALLBACK}` (jmespath fallback)", fallback, "list comprehension", fallback / scan_path, ""),
    ]
    print(
        f"baselines: list comprehension {scan_type * 1e3:.1f} ms (type), {scan_value * 1e3:.1f} ms (value), "
        f"{scan_path * 1e3:.1f} ms (path); jmespath {jm_type * 1e3:.1f} ms (type), {jm_value * 1e3:.1f} ms (value)"
    )
    print(table(rows))


if __name__ == "__main__":
    main()
