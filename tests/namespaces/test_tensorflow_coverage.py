"""docs/mapping.md's TensorFlow -> ONNX coverage table agrees with the shipped table and fixtures."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tool():
    spec = importlib.util.spec_from_file_location("gen_cov", ROOT / "tools" / "gen_tensorflow_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "mapping.md").read_text(encoding="utf-8")
    block = text.split("<!-- tf-coverage:start -->")[1].split("<!-- tf-coverage:end -->")[0]
    return {m.group(1): [c.strip() for c in m.group(2).split("|")]
            for m in re.finditer(r"^\| `(\w+)` \|(.*)\|$", block, re.M)}


def test_amanda_column_is_the_shipped_tables_op_types():
    """Every op type a shipped rule matches says 'yes' under amanda, and no other does."""
    rows = _rows()
    covered = tool().amanda_op_types()
    assert {t for t, cells in rows.items() if cells[0] == "yes"} == covered
    assert {"DepthwiseConv2dNative", "Einsum", "GatherV2", "Pack", "SquaredDifference", "MatMul"} <= covered


def test_every_fixture_op_type_has_a_row():
    """The rows hold every op type of the committed fixtures, with the fixtures named."""
    rows, fixtures = _rows(), tool().fixture_op_types()
    assert set(fixtures) <= set(rows)
    assert all(rows[t][2] == ", ".join(f) for t, f in fixtures.items())


def test_table_renders_counts_and_the_tf2onnx_only_list():
    """The renderer counts both sides and lists what only tf2onnx handles."""
    text = tool().table({"Relu", "Einsum"}, {"Relu", "Where"}, "9.9", {"Relu": ["dense"]})
    assert "rules for 2 TensorFlow op types; tf2onnx 9.9: handlers for 2; both: 1" in text
    assert "| `Einsum` | yes | - | - |" in text and "| `Relu` | yes | yes | dense |" in text
    assert "Only tf2onnx (1): `Where`." in text
