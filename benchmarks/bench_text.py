"""YAML against JSON and against bare PyYAML: loading a transformer with weights, dumping a
100,000-op model.

- load: ``amanda.loads`` of the YAML text of the ~7,500-node transformer encoder of
  bench_onnx.py (48 layers; width 104 makes its YAML about 26 MB, most of it weights) against
  ``amanda.loads`` of its JSON text. Target: at most 2x.
- dump: ``amanda.dumps`` of the 100,000-op model of bench_containers.py (1,000 subgraphs of
  100 ops) against ``yaml.dump`` of the same plain document with libyaml's ``CSafeDumper`` and
  the same formatting options, in the same run. Target: at most 1.5x.

Each pair is timed in alternating blocks (ours, then the baseline, a short pause before each
block), and the figures are medians over the blocks, so both see the same machine load.

    python benchmarks/bench_text.py [--layers 48] [--width 104] [--blocks 1000] [--ops 100]
                                    [--repeat 3]
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
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_containers import model_document
from bench_onnx import transformer_encoder
from common import fmt_time, table

import amanda
from amanda.io import to_document
from amanda.io.onnx import from_onnx


def alternating(fns: dict[str, Callable[[], Any]], repeat: int, block: int = 1,
                settle: float = 0.2) -> dict[str, float]:
    """Median time of each function over ``repeat`` alternating blocks of ``block`` runs."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            gc.collect()
            time.sleep(settle)
            for _ in range(block):
                start = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) for name, times in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=48)
    parser.add_argument("--width", type=int, default=104)
    parser.add_argument("--blocks", type=int, default=1000)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    encoder = from_onnx(transformer_encoder(args.layers, args.width, ff=2 * args.width))
    yaml_text, json_text = amanda.dumps(encoder), amanda.dumps(encoder, "json")
    assert amanda.loads(yaml_text) == encoder and amanda.loads(json_text, "json") == encoder
    print(f"transformer: {len(encoder.children):,} ops; YAML {len(yaml_text) / 1e6:.1f} MB, "
          f"JSON {len(json_text) / 1e6:.1f} MB")
    loads = alternating({"yaml": lambda: amanda.loads(yaml_text),
                         "json": lambda: amanda.loads(json_text, "json")}, args.repeat, block=3)

    model = amanda.loads(json.dumps(model_document(args.blocks, args.ops)), "json")
    plain = to_document(model)
    options = {"sort_keys": False, "default_flow_style": None, "allow_unicode": True,
               "width": 100}
    assert amanda.dumps(model) == yaml.dump(plain, Dumper=yaml.CSafeDumper, **options)
    print(f"model: {args.blocks * args.ops:,} ops")
    dumps = alternating({"amanda": lambda: amanda.dumps(model),
                         "pyyaml": lambda: yaml.dump(plain, Dumper=yaml.CSafeDumper, **options)},
                        args.repeat)

    rows = [
        ("YAML load, transformer", loads["yaml"], f"JSON load {fmt_time(loads['json'])}",
         loads["yaml"] / loads["json"], "<= 2x"),
        ("YAML dump, 100k ops", dumps["amanda"], f"yaml.dump {fmt_time(dumps['pyyaml'])}",
         dumps["amanda"] / dumps["pyyaml"], "<= 1.5x"),
    ]
    print(table(rows))


if __name__ == "__main__":
    main()
