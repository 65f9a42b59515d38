"""Drawing large models: ``amanda.render`` of flat and nested models of about 1,000 and 10,000 ops.

The models are those of the drawing tests (``tests/viz/large_models.py``): a ViT-like network of
transformer blocks (46 ops each, with residual branches), either flat, every op named by its
scope path as TorchScript names them (``/blocks/blocks.3/attn/qkv/MatMul``, weights
``blocks.3.attn.qkv.weight``), or nested, one container per module. Each row is the median of
blocks; each block builds the model anew (nothing cached on it) and times ``to_dot`` and then
``render`` to SVG (which runs Graphviz's ``dot`` on the text), wall time. Target: the whole
drawing within 5 s.

    python benchmarks/bench_render.py [--repeat 3] [--blocks 22,217]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import fmt_time

from amanda.viz import render, to_dot
from tests.viz.large_models import flat_scoped, nested_scoped


def boxes(dot: str) -> int:
    """Boxes in DOT text (node statements; clusters and edges not counted)."""
    return sum(1 for line in dot.splitlines() if re.match(r"\s*n\d+ \[label=", line) and "shape=ellipse" not in line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--blocks", default="22,217", help="transformer blocks of each size (46 ops each)")
    args = parser.parse_args()
    lines = ["| model | ops | boxes drawn | to_dot | render to SVG (to_dot + dot) | target |",
             "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as folder:
        for blocks in (int(b) for b in args.blocks.split(",")):
            for label, make in (("flat, scope-named", flat_scoped), ("nested by module", nested_scoped)):
                dot_times, render_times, ops, drawn = [], [], 0, 0
                for _ in range(args.repeat):
                    model = make(blocks)
                    ops = sum(1 for _ in model)
                    start = time.perf_counter()
                    drawn = boxes(to_dot(model))
                    dot_times.append(time.perf_counter() - start)
                    model = make(blocks)  # anew: render builds its view again
                    start = time.perf_counter()
                    svg = render(model, Path(folder) / "model.svg").read_text()
                    render_times.append(time.perf_counter() - start)
                    assert "<svg" in svg
                lines.append(f"| {label} | {ops:,} | {drawn} | {fmt_time(statistics.median(dot_times))} | "
                             f"{fmt_time(statistics.median(render_times))} | <= 5 s |")
                print(lines[-1], flush=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
