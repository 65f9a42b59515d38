"""Loading and flattening a 100,000-op model (1,000 subgraphs of 100 chained ops).

Each figure is a ratio to the bare parse of the same text in the same run:
JSON load vs ``json.loads``, flatten vs ``json.loads``, YAML load vs libyaml's
``yaml.load(text, Loader=CSafeLoader)``.

    python benchmarks/bench_containers.py [--blocks 1000] [--ops 100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import median_time, table

import amanda


def model_document(blocks: int, ops: int) -> dict:
    """The document of ``blocks`` subgraphs, each a chain of ``ops`` ops, chained in turn."""

    def block(b: int) -> dict:
        body = [
            {
                "type": "Relu" if i % 2 else "MatMul",
                "name": f"op{i}",
                "input_ports": [{"name": "x"}],
                "output_ports": [{"name": "y"}],
                "attrs": {"i": i},
            }
            for i in range(ops)
        ]
        edges = [
            {"output_port": {"op": f"op{i}", "port": "y"}, "input_port": {"op": f"op{i + 1}", "port": "x"}}
            for i in range(ops - 1)
        ]
        edges.append({"output_port": {"op": f"b{b}", "port": "x"}, "input_port": {"op": "op0", "port": "x"}})
        edges.append({"output_port": {"op": f"op{ops - 1}", "port": "y"}, "input_port": {"op": f"b{b}", "port": "y"}})
        return {
            "type": "Block", "name": f"b{b}", "attrs": {"block": b},
            "input_ports": [{"name": "x"}], "output_ports": [{"name": "y"}], "ops": body, "edges": edges,
        }

    top_edges = [
        {"output_port": {"op": f"b{b}", "port": "y"}, "input_port": {"op": f"b{b + 1}", "port": "x"}}
        for b in range(blocks - 1)
    ]
    return {"graph": {"namespace": "amanda/onnx/17", "ops": [block(b) for b in range(blocks)], "edges": top_edges}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--blocks", type=int, default=1000)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    doc = model_document(args.blocks, args.ops)
    json_text = json.dumps(doc)
    yaml_text = yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=None)
    total = args.blocks * args.ops
    print(f"model: {total:,} ops; JSON {len(json_text) / 1e6:.1f} MB, YAML {len(yaml_text) / 1e6:.1f} MB")

    json_parse = median_time(lambda: json.loads(json_text), args.repeat)
    json_load = median_time(lambda: amanda.loads(json_text, "json"), args.repeat)
    flat = median_time(lambda model: amanda.flatten(model), args.repeat, setup=lambda: amanda.loads(json_text, "json"))
    model = amanda.loads(json_text, "json")
    assert len(amanda.flatten(model).ops) == total
    yaml_repeat = max(1, args.repeat // 2)
    yaml_parse = median_time(lambda: yaml.load(yaml_text, Loader=yaml.CSafeLoader), yaml_repeat)
    yaml_load = median_time(lambda: amanda.loads(yaml_text), yaml_repeat)

    rows = [
        ("JSON load", json_load, "json.loads", json_load / json_parse, "<= 8x"),
        ("flatten", flat, "json.loads", flat / json_parse, "<= 6x"),
        ("YAML load", yaml_load, "libyaml CSafeLoader parse", yaml_load / yaml_parse, "<= 1.3x"),
    ]
    print(f"baselines: json.loads {json_parse:.3f} s, libyaml parse {yaml_parse:.3f} s")
    print(table(rows))


if __name__ == "__main__":
    main()
