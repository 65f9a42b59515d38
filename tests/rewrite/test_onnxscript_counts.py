"""amanda.rewrite finds as many matches as onnxscript's rewriter for the same rules on the
real-model fixtures (and a model of written-out LayerNorms), in the imported module tree and in
the flat import alike.

The expected counts were printed by ``tools/compare_rewrite.py`` (onnxscript 0.7.2's rewriter:
its erf-GELU, tanh-GELU and LayerNorm fusion rules, and MatMul+Add as its MatMulAddToGemm
pattern without the rank check); CI has no onnxscript, so they are recorded here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import amanda
from amanda.rewrite import Rule, matches
from amanda.rewrite.library import (
    LAYER_NORM_PATTERNS,
    erf_gelu,
    erf_gelu_half_inside,
    matmul_add,
    tanh_gelu,
    tanh_gelu_half_inside,
)
from tests.fixtures.onnx import hierarchy_models as fx

RULES = {
    "erf_gelu": [Rule("erf_gelu", erf_gelu), Rule("erf_gelu_half_inside", erf_gelu_half_inside)],
    "tanh_gelu": [Rule("tanh_gelu", tanh_gelu), Rule("tanh_gelu_half_inside", tanh_gelu_half_inside)],
    "layer_norm": [Rule(p.__name__, p) for p in LAYER_NORM_PATTERNS],
    "matmul_add": [Rule("matmul_add", matmul_add)],
}
# (fixture, kind): onnxscript's counts for erf_gelu, tanh_gelu, layer_norm, matmul_add
ONNXSCRIPT = {
    ("nested", "torchscript"): (0, 0, 0, 0), ("nested", "dynamo"): (0, 0, 0, 0),
    ("gpt2", "torchscript"): (0, 2, 0, 2), ("gpt2", "dynamo"): (0, 2, 0, 2),
    ("bert", "torchscript"): (2, 0, 0, 14), ("bert", "dynamo"): (0, 0, 0, 14),
    ("resnet", "torchscript"): (0, 0, 0, 0), ("resnet", "dynamo"): (0, 0, 0, 0),
    ("vit", "torchscript"): (2, 0, 0, 8), ("vit", "dynamo"): (0, 0, 0, 8),
    ("mobilenet", "torchscript"): (0, 0, 0, 0), ("mobilenet", "dynamo"): (0, 0, 0, 0),
}
# the written-out LayerNorms of tools/export_rewrite_fixture.py (the real models have none)
LAYER_NORMS = Path(__file__).resolve().parent.parent / "fixtures" / "onnx" / "rewrite" / "layer_norms"
LAYER_NORMS_ONNXSCRIPT = (3, 0, 3, 3)


@pytest.mark.parametrize(("model", "kind"), sorted(ONNXSCRIPT))
def test_amanda_finds_onnxscripts_matches_with_the_hierarchy_kept(model: str, kind: str) -> None:
    """Per rule, the matches in the module tree and in the flat import number what onnxscript found."""
    tree = amanda.load(fx.path(model, kind))
    flat = amanda.load(fx.path(model, kind), hierarchy=False)
    expected = dict(zip(RULES, ONNXSCRIPT[(model, kind)], strict=True))
    assert {rule: len(matches(tree, rules)) for rule, rules in RULES.items()} == expected
    assert {rule: len(matches(flat, rules)) for rule, rules in RULES.items()} == expected


def test_written_out_layer_norms_match_onnxscripts_and_rewrite_keeps_torchs_output() -> None:
    """On the written-out LayerNorm fixture amanda finds onnxscript's counts; grouping the
    LayerNorms and GELUs puts one group in each block's norm and act module, and the model still
    computes torch's output."""
    tree = amanda.load(f"{LAYER_NORMS}.onnx")
    flat = amanda.load(f"{LAYER_NORMS}.onnx", hierarchy=False)
    expected = dict(zip(RULES, LAYER_NORMS_ONNXSCRIPT, strict=True))
    assert {rule: len(matches(tree, rules)) for rule, rules in RULES.items()} == expected
    assert {rule: len(matches(flat, rules)) for rule, rules in RULES.items()} == expected
    out = amanda.rewrite(tree, RULES["layer_norm"] + RULES["erf_gelu"])
    groups = {p[:-1] for p in out.select("$..[?own_attrs.metadata.rewritten_by]").paths}
    assert groups == {(f"blocks.{i}", part) for i in range(3) for part in ("norm", "act")}
    data = np.load(f"{LAYER_NORMS}.npz")
    (y,) = amanda.Session(out).run(["y"], {"x": data["x"]})
    np.testing.assert_allclose(y, data["y"], rtol=1e-5, atol=1e-6)
