"""Count the matches of the same rules with onnxscript's rewriter and with ``amanda.rewrite`` on
the real-model fixtures (tests/fixtures/onnx/hierarchy/) and on the written-out LayerNorms of
tests/fixtures/onnx/rewrite/ (the real models hold none), and print both side by side.

    PYTHONPATH=. /path/to/env-with-onnxscript/bin/python tools/compare_rewrite.py [--json]

The rules: erf-GELU (onnxscript's own ``ort_fusions.erfgelu`` rules, both associations),
tanh-GELU (``ort_fusions.gelu.GeluTanhFusion`` and the same written as GPT-2 exports it, with
the half taken first),
LayerNorm written out (onnxscript's ``rules.fusion._layer_norm.LayerNormFusion``, whose square
and normalisation alternatives amanda writes as four patterns) and MatMul+Add (the pattern of
``rules.common._matmul_add_to_gemm.MatMulAddToGemm`` without its rank-2 check, which needs
shapes onnxscript infers and amanda's guard would read). onnxscript matches the flat ONNX
graph, commuting operands; amanda matches the imported module tree, and the flat import too,
to show the hierarchy changes nothing. tests/rewrite/test_onnxscript_counts.py holds the
numbers this printed (onnxscript 0.7.2).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import onnx
import onnx_ir as ir
from onnxscript.rewriter import pattern
from onnxscript.rewriter.ort_fusions import erfgelu, gelu
from onnxscript.rewriter.rules.fusion import _layer_norm

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

ONNX = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "onnx"
MODELS = ("nested", "gpt2", "bert", "resnet", "vit", "mobilenet")
KINDS = ("torchscript", "dynamo")
# the real models of the hierarchy fixtures, and the written-out LayerNorms (tools/export_rewrite_fixture.py)
FIXTURES = {**{f"{m}.{k}": ONNX / "hierarchy" / f"{m}.{k}.onnx" for m in MODELS for k in KINDS},
            "layer_norms": ONNX / "rewrite" / "layer_norms.onnx"}


def _matmul_add_pattern(op, a, b, c):  # noqa: ANN001, ANN202 - onnxscript's pattern convention
    return op.Add(op.MatMul(a, b), c)


def _matmul_add_replacement(op, a, b, c):  # noqa: ANN001, ANN202
    return op.Gemm(a, b, c)


def _tanh_gelu_as_exported(op, x):  # noqa: ANN001, ANN202 - GPT-2's (0.5 * x) * (1 + tanh(...))
    inner = op.Tanh(op.Mul(op.Add(x, op.Mul(op.Pow(x, 3.0), 0.044715)), math.sqrt(2 / math.pi)))
    return op.Mul(op.Mul(x, 0.5), op.Add(inner, 1.0))


def _fast_gelu(op, x):  # noqa: ANN001, ANN202
    return op.FastGelu(x, _domain="com.microsoft")


ONNXSCRIPT = {
    "erf_gelu": [erfgelu.rule1, erfgelu.rule2],
    "tanh_gelu": [gelu.GeluTanhFusion.rule(), pattern.RewriteRule(_tanh_gelu_as_exported, _fast_gelu)],
    "layer_norm": [_layer_norm.LayerNormFusion.rule()],
    "matmul_add": [pattern.RewriteRule(_matmul_add_pattern, _matmul_add_replacement)],
}
AMANDA = {
    "erf_gelu": [Rule("erf_gelu", erf_gelu), Rule("erf_gelu_half_inside", erf_gelu_half_inside)],
    "tanh_gelu": [Rule("tanh_gelu", tanh_gelu), Rule("tanh_gelu_half_inside", tanh_gelu_half_inside)],
    "layer_norm": [Rule(p.__name__, p) for p in LAYER_NORM_PATTERNS],
    "matmul_add": [Rule("matmul_add", matmul_add)],
}


def onnxscript_count(path: Path, rules: list) -> int:
    """How many rewrites onnxscript's rule set makes on a fresh copy of the model."""
    model = ir.serde.deserialize_model(onnx.load(str(path)))
    return pattern.RewriteRuleSet(rules, commute=True).apply_to_model(model)


def counts() -> dict[str, dict[str, dict[str, int]]]:
    """``{fixture: {rule: {"onnxscript": n, "amanda": n, "amanda_flat": n}}}``."""
    found: dict[str, dict[str, dict[str, int]]] = {}
    for fixture, path in FIXTURES.items():
        tree, flat = amanda.load(path), amanda.load(path, hierarchy=False)
        found[fixture] = {
            rule: {"onnxscript": onnxscript_count(path, ONNXSCRIPT[rule]), "amanda": len(matches(tree, AMANDA[rule])),
                   "amanda_flat": len(matches(flat, AMANDA[rule]))} for rule in ONNXSCRIPT}
    return found


def main() -> None:
    """Print the table (or JSON with ``--json``)."""
    found = counts()
    if "--json" in sys.argv:
        print(json.dumps(found, indent=1))
        return
    print(f"{'fixture':24} {'rule':12} {'onnxscript':>10} {'amanda':>7} {'flat':>5}")
    for fixture, rules in found.items():
        for rule, n in rules.items():
            flag = "" if n["onnxscript"] == n["amanda"] == n["amanda_flat"] else "  DIFFERS"
            print(f"{fixture:24} {rule:12} {n['onnxscript']:>10} {n['amanda']:>7} {n['amanda_flat']:>5}{flag}")


if __name__ == "__main__":
    main()
