"""TensorFlow -> ONNX conversion of the fixtures' frozen graphs: amanda (import flat, convert to
ONNX 17, ``to_onnx`` with its checks, serialize; and the same from the scoped import, the
default) against tf2onnx (``tf2onnx.convert.from_graph_def`` at opset 17, which also serializes)
on the same file; which fixtures each converts.

Needs tf2onnx and TensorFlow (not dependencies of amanda); run it where they are installed::

    PYTHONPATH=$PWD /path/to/tfenv/bin/python benchmarks/bench_tensorflow_convert.py [--repeat 5]

Each converter runs once per round, alternating, after one dropped warm-up round; times are
medians of wall time, ratios taken within the run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FIXTURES = ROOT / "tests" / "fixtures" / "tensorflow"


def amanda_convert(spec: dict, hierarchy: bool = False) -> bytes:
    """amanda: the frozen graph imported flat (or scoped), converted, exported and serialized."""
    from amanda.io.onnx import to_onnx
    from amanda.io.tensorflow import endpoint
    from amanda.io.tensorflow.files import load_graphdef
    from amanda.rewrite.mapping.convert import convert

    graph = load_graphdef(FIXTURES / (spec.get("frozen") or spec["graphdef"]), hierarchy=hierarchy and "auto")
    outputs = {o["key"]: str(endpoint(graph, o["tensor"])) for o in spec["outputs"]}
    return to_onnx(convert(graph, "amanda/onnx/17", outputs=outputs)).SerializeToString()


def tf2onnx_convert(spec: dict) -> bytes:
    """tf2onnx: the same GraphDef through ``from_graph_def`` at opset 17."""
    import tensorflow as tf
    import tf2onnx

    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString((FIXTURES / (spec.get("frozen") or spec["graphdef"])).read_bytes())
    model, _ = tf2onnx.convert.from_graph_def(
        graph_def, input_names=[i["tensor"] for i in spec["inputs"]],
        output_names=[o["tensor"] for o in spec["outputs"]], opset=17)
    return model.SerializeToString()


def attempt(fn: Callable[[dict], bytes], spec: dict) -> tuple[float | None, str]:
    """(seconds, '') or (None, why it failed)."""
    start = time.perf_counter()
    try:
        fn(spec)
    except Exception as exc:  # noqa: BLE001 - a benchmark reports any converter's failure
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
    return time.perf_counter() - start, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    converters: dict[str, Callable[[dict], bytes]] = {
        "amanda": amanda_convert, "scoped": lambda spec: amanda_convert(spec, True), "tf2onnx": tf2onnx_convert}
    converted = {name: 0 for name in converters}
    specs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(FIXTURES.glob("*.json"))]
    specs += [{**spec, "name": f"{spec['name']}_lowered", "frozen": spec["lowered"]} for spec in specs if spec.get("lowered")]
    print(f"{'fixture':20} {'amanda':>10} {'scoped':>10} {'tf2onnx':>10} {'ratio':>7} {'scoped':>7}")
    for spec in specs:
        times: dict[str, list[float]] = {name: [] for name in converters}
        errors: dict[str, str] = {}
        for round_ in range(args.repeat + 1):
            for name, fn in converters.items():
                if name in errors:
                    continue
                seconds, why = attempt(fn, spec)
                if seconds is None:
                    errors[name] = why
                elif round_:
                    times[name].append(seconds)
        med: dict[str, Any] = {n: statistics.median(t) if t else None for n, t in times.items()}
        for name in converters:
            converted[name] += name not in errors
        ratios = [f"{med[n] / med['tf2onnx']:.2f}x" if med[n] and med["tf2onnx"] else "-" for n in ("amanda", "scoped")]
        cells = [f"{med[n] * 1e3:8.1f}ms" if med[n] else "    failed" for n in converters]
        print(f"{spec['name']:20} {cells[0]:>10} {cells[1]:>10} {cells[2]:>10} {ratios[0]:>7} {ratios[1]:>7}")
        for name, why in errors.items():
            print(f"    {name}: {why}")
    print("converted: " + ", ".join(f"{n} {c} of {len(specs)}" for n, c in converted.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
