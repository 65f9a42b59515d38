"""Check amanda's GraphDef export against TensorFlow itself: every frozen or TF1 fixture of
tests/fixtures/tensorflow/ is loaded by amanda, dumped again (binary, and text for the TF1
graph), imported into TensorFlow with ``tf.graph_util.import_graph_def`` and run on the
fixture's inputs; the outputs must equal TensorFlow's recorded ones (npz).

    PYTHONPATH=. python tools/check_tensorflow_export.py      # needs tensorflow-cpu

Prints the largest absolute difference per file and exits non-zero if one exceeds 1e-5.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FIXTURES = ROOT / "tests" / "fixtures" / "tensorflow"


def run(path: Path, spec: dict) -> float:
    """The largest difference between TensorFlow's run of ``path`` and the recorded outputs."""
    import tensorflow as tf
    from google.protobuf import text_format

    graph_def = tf.compat.v1.GraphDef()
    if path.suffix == ".pbtxt":
        text_format.Parse(path.read_text(), graph_def)
    else:
        graph_def.ParseFromString(path.read_bytes())
    data = np.load(FIXTURES / f"{spec['name']}.npz")
    with tf.Graph().as_default() as graph:
        tf.graph_util.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=graph) as session:
            for op in spec["init"]:
                session.run(op)
            feeds = {i["tensor"]: data[i["key"]] for i in spec["inputs"]}
            outs = session.run([o["tensor"] for o in spec["outputs"]], feeds)
    return max(float(np.max(np.abs(got - data[o["key"]]))) for got, o in zip(outs, spec["outputs"], strict=True))


def main() -> int:
    import amanda

    worst = 0.0
    out = Path(tempfile.mkdtemp())
    for manifest in sorted(FIXTURES.glob("*.json")):
        spec = json.loads(manifest.read_text())
        for key, suffix in (("frozen", ".pb"), ("lowered", ".pb"), ("graphdef", ".pbtxt")):
            if not spec.get(key):
                continue
            dumped = out / (Path(spec[key]).stem + suffix)
            amanda.dump(amanda.load(FIXTURES / spec[key]), dumped)
            difference = run(dumped, spec)
            worst = max(worst, difference)
            print(f"{spec[key]:32} {difference:.3g}")
    return 0 if worst <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
