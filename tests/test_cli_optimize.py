"""The `amanda optimize` subcommand: outputs unchanged, reports per pass, exit codes 0 and 2."""

import json
from pathlib import Path

import numpy as np
import pytest

from amanda.cli import main

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

MODEL = Path("tests/fixtures/onnx/from_torch/bigru.onnx")


def _feeds() -> dict:
    spec = json.loads(MODEL.with_suffix(".json").read_text())
    rng = np.random.default_rng(0)
    return {k: rng.standard_normal(v["shape"]).astype(v["dtype"]) for k, v in spec.items()}


def _outputs(path: Path, feeds: dict) -> list:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_optimize_writes_a_smaller_model_computing_the_same_outputs(tmp_path, capsys):
    """optimize exits 0, prints one report line per pass and writes a model with fewer nodes and the same outputs under onnxruntime."""
    target = tmp_path / "fast.onnx"
    assert main(["optimize", str(MODEL), "-o", str(target), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "fold_constants:" in out and "eliminate_dead_code:" in out and f"wrote {target}" in out
    assert len(onnx.load(str(target)).graph.node) < len(onnx.load(str(MODEL)).graph.node)
    feeds = _feeds()
    for ours, theirs in zip(_outputs(target, feeds), _outputs(MODEL, feeds)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_optimize_runs_only_the_passes_named(tmp_path, capsys):
    """--passes runs exactly the passes named, in order, and writes a YAML document by suffix."""
    target = tmp_path / "out.yaml"
    assert main(["optimize", str(MODEL), "-o", str(target), "--passes", "remove_identities", "eliminate_dead_code"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if ":" in line and not line.startswith("wrote")]
    assert [line.split(":")[0] for line in lines] == ["remove_identities", "eliminate_dead_code"]
    assert target.exists()


def test_optimize_errors_exit_2_with_one_line(tmp_path, capsys):
    """An unknown pass or a missing file exits 2 with one error line; a missing -o is a usage error (2)."""
    assert main(["optimize", str(MODEL), "-o", str(tmp_path / "x.onnx"), "--passes", "no_such_pass"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("amanda: error: optimize:") and "no_such_pass" in err and err.count("\n") == 1
    assert main(["optimize", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "x.onnx")]) == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["optimize", str(MODEL)])
    assert exit_info.value.code == 2
