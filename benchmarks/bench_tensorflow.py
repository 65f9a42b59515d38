"""Reading TensorFlow files: ``amanda.load`` (scopes as containers) and ``hierarchy=False`` (flat)
against the protobuf parse alone and, where TensorFlow is installed, TensorFlow's own import of
the same GraphDef into a graph (``tf.graph_util.import_graph_def``); and ``amanda.dump`` of the
loaded graph. Files: tests/fixtures/tensorflow (TensorFlow 2.21 / Keras 3 models, see
docs/tensorflow.md).

Each loader runs once per round, alternating, 1 dropped warm-up round then ``--repeat`` rounds;
times are medians of CPU time of the process, ratios taken within the run.

    PYTHONPATH=$PWD python benchmarks/bench_tensorflow.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from common import fmt_time  # noqa: E402

import amanda  # noqa: E402
from amanda.io.tensorflow.protos import parse  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "tensorflow"
FILES = ["mobilenet_v2.pb", "resnet_small.pb", "transformer_block.pb", "lstm_classifier.pb",
         "control_flow_lowered.pb", "resnet_small.savedmodel", "transformer_block.savedmodel"]


def _tf_import() -> Callable[[Path], Any] | None:
    try:
        import os

        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf
    except ImportError:
        return None

    def load(path: Path) -> Any:
        graph_def = tf.compat.v1.GraphDef.FromString(path.read_bytes())
        with tf.Graph().as_default() as graph:
            tf.graph_util.import_graph_def(graph_def, name="")
        return graph

    return load


def measure(path: Path, repeat: int, tf_load: Callable[[Path], Any] | None) -> dict[str, float]:
    loaders: dict[str, Callable[[], Any]] = {
        "tree": lambda: amanda.load(path),
        "flat": lambda: amanda.load(path, hierarchy=False),
    }
    if path.suffix == ".pb":
        loaders["parse"] = lambda: parse("tensorflow.GraphDef", path.read_bytes(), str(path))
        if tf_load is not None:
            loaders["tensorflow"] = lambda: tf_load(path)
    graph = amanda.load(path)
    out = Path(tempfile.mkdtemp()) / "out.pb"
    loaders["dump"] = lambda: amanda.dump(graph, out)
    times: dict[str, list[float]] = {name: [] for name in loaders}
    for round_ in range(repeat + 1):
        for name, fn in loaders.items():
            gc.collect()
            start = time.process_time()
            kept = fn()
            spent = time.process_time() - start
            del kept
            if round_:
                times[name].append(spent)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    tf_load = _tf_import()
    print("| file | graph ops | load (tree) | flat | tree/flat | protobuf parse | TensorFlow import | "
          "tree/TF | dump |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in FILES:
        path = FIXTURES / name
        ops = len(list(amanda.load(path, hierarchy=False)))
        found = measure(path, args.repeat, tf_load)
        tf_time = found.get("tensorflow")
        parse_time = found.get("parse")
        versus_tf = f"{found['tree'] / tf_time:.2f}x" if tf_time else "-"
        print(f"| {name} | {ops} | {fmt_time(found['tree'])} | {fmt_time(found['flat'])} | "
              f"{found['tree'] / found['flat']:.2f}x | {fmt_time(parse_time) if parse_time else '-'} | "
              f"{fmt_time(tf_time) if tf_time else '-'} | {versus_tf} | {fmt_time(found['dump'])} |")


if __name__ == "__main__":
    main()
