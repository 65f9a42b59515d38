"""Write docs/mapping.md's TensorFlow -> ONNX coverage table: the TensorFlow op types amanda's
shipped table has a rule for, against the op types tf2onnx registers handlers for.

tf2onnx is not a dependency of amanda; run this where it is installed (it needs TensorFlow)::

    PYTHONPATH=. /path/to/tfenv/bin/python tools/gen_tensorflow_coverage.py

tf2onnx's handlers are read from its registry (``tf2onnx.handler.tf_op._OPSETS``, filled when
``tf2onnx.tfonnx`` imports its ``onnx_opset`` modules): every op name of every domain and opset.
The rows are the op types of the committed fixtures (tests/fixtures/tensorflow/*.json) and every
op type amanda has a rule for; the op types only tf2onnx handles follow as a list. The text goes
between the ``tf-coverage`` markers of docs/mapping.md; ``--check`` compares instead.
tests/namespaces/test_tensorflow_coverage.py checks amanda's column against the shipped table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DOC = ROOT / "docs" / "mapping.md"
FIXTURES = ROOT / "tests" / "fixtures" / "tensorflow"
START, END = "<!-- tf-coverage:start -->", "<!-- tf-coverage:end -->"


def amanda_op_types() -> set[str]:
    """The TensorFlow op types some rule of the shipped TensorFlow -> ONNX table matches (a rule
    that only explains why it cannot map, like ``reduce_dynamic``, counts too: its op type has
    other rules)."""
    from amanda.rewrite.mapping.tables.tensorflow_onnx import tensorflow_to_onnx

    found: set[str] = set()
    for rule in tensorflow_to_onnx().ordered_rules():
        for _, op_pattern in rule.pattern.ops:
            found |= {t for t in op_pattern.types if isinstance(t, str)}
    return found


def fixture_op_types() -> dict[str, list[str]]:
    """Op type -> the fixtures whose frozen graph holds it (from their manifests)."""
    found: dict[str, list[str]] = {}
    for path in sorted(FIXTURES.glob("*.json")):
        for op_type in json.loads(path.read_text(encoding="utf-8")).get("op_types", {}):
            found.setdefault(op_type, []).append(path.stem)
    return found


def tf2onnx_op_types() -> tuple[str, set[str]]:
    """(tf2onnx version, the op types its handler registry names)."""
    import tf2onnx
    import tf2onnx.tfonnx  # noqa: F401 - registers the handlers
    from tf2onnx.handler import tf_op

    return tf2onnx.__version__, {name for opsets in tf_op._OPSETS.values() for table in opsets for name in table}


def table(amanda: set[str], theirs: set[str], version: str, fixtures: dict[str, list[str]]) -> str:
    """The markdown between the markers."""
    rows = sorted(amanda | set(fixtures))
    yes = lambda flag: "yes" if flag else "-"  # noqa: E731
    lines = [START, "",
             f"amanda: rules for {len(amanda)} TensorFlow op types; tf2onnx {version}: handlers for "
             f"{len(theirs)}; both: {len(amanda & theirs)}. Rows: every op type with an amanda rule "
             "and every op type of the fixtures (written by tools/gen_tensorflow_coverage.py).", "",
             "| TensorFlow op | amanda | tf2onnx | in fixtures |", "|---|---|---|---|"]
    for op_type in rows:
        lines.append(f"| `{op_type}` | {yes(op_type in amanda)} | {yes(op_type in theirs)} | "
                     f"{', '.join(fixtures.get(op_type, [])) or '-'} |")
    only = sorted(theirs - amanda)
    lines += ["", f"Only tf2onnx ({len(only)}): " + ", ".join(f"`{t}`" for t in only) + ".", "", END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/mapping.md differs")
    args = parser.parse_args(argv)
    version, theirs = tf2onnx_op_types()
    text = table(amanda_op_types(), theirs, version, fixture_op_types())
    doc = DOC.read_text(encoding="utf-8")
    if START in doc and END in doc:
        new = doc.split(START)[0] + text + doc.split(END, 1)[1]
    else:
        new = doc.rstrip("\n") + "\n\n## TensorFlow -> ONNX coverage\n\n" + text + "\n"
    if args.check:
        print("up to date" if new == doc else "docs/mapping.md is out of date")
        return 0 if new == doc else 1
    DOC.write_text(new, encoding="utf-8")
    print(f"wrote the coverage table: {len(theirs)} tf2onnx op types")
    return 0


if __name__ == "__main__":
    sys.exit(main())
