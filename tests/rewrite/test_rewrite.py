"""``amanda.rewrite`` on hierarchical models: matches inside every block of an imported model and
across container boundaries, each grouped into a fused container that keeps its ops, marked
with its rule, computing what torch computed, and undone by ``unfuse``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import amanda
from amanda import Container, op
from amanda.namespaces.attr_types import value_key
from amanda.rewrite import ANY, Rule, matches, rewrite
from amanda.rewrite.library import tanh_gelu
from tests.fixtures.onnx import hierarchy_models as fx
from tests.strategies import check_invariants, containers, dataflow, snapshot


def erf_gelu(op, x):  # noqa: ANN001, ANN201 - a pattern function: the builder and one variable
    return op.Mul(op.Mul(x, op.Add(op.Erf(op.Div(x, 2 ** 0.5)), 1.0)), 0.5)


GELU = Rule("gelu", erf_gelu, lambda op, x: op.Gelu(x))


@pytest.mark.parametrize(("model", "blocks"), [("bert", ("encoder", "layer.{}", "intermediate", "intermediate_act_fn")),
                                               ("vit", ("blocks", "{}", "mlp", "act"))])
def test_erf_gelu_in_every_mlp_block_becomes_a_marked_group(model: str, blocks: tuple) -> None:
    """In the TorchScript exports of BERT and ViT, the erf GELU inside each of the two MLP
    blocks' activation modules is found and grouped there (the selector lists exactly those
    groups), and the rewritten model still computes torch's outputs."""
    tree = amanda.load(fx.path(model, "torchscript"))
    out = rewrite(tree, GELU)
    groups = out.select("$..[?own_attrs.metadata.rewritten_by=='gelu']")
    expected = {tuple(part.format(i) for part in blocks) + ("Gelu_0",) for i in range(2)}
    assert set(groups.paths) == expected
    assert all(out.descendant(p).type == "Gelu" and len(out.descendant(p).children) == 5 for p in groups.paths)
    got = amanda.Session(out).run(fx.info(model)["outputs"], fx.feeds(model))
    for ours, theirs in zip(got, fx.expected(model), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["torchscript", "dynamo"])
def test_tanh_gelu_in_every_gpt2_mlp_block_becomes_a_group(kind: str) -> None:
    """GPT-2's GELU (the tanh form) is grouped inside ``transformer/h.N/mlp/act`` of both
    exports, and the rewritten model still computes torch's logits."""
    tree = amanda.load(fx.path("gpt2", kind))
    out = rewrite(tree, Rule("gelu", tanh_gelu, lambda op, x: op.Gelu(x, approximate="tanh")))
    groups = out.select("$..[?own_attrs.metadata.rewritten_by=='gelu']").paths
    assert {p[:-1] for p in groups} == {("transformer", f"h.{i}", "mlp", "act") for i in range(2)}
    assert {out.descendant(p).attrs["approximate"] for p in groups} == {"tanh"}
    (logits,) = amanda.Session(out).run(fx.info("gpt2")["outputs"], fx.feeds("gpt2"))
    np.testing.assert_allclose(logits, fx.expected("gpt2")[0], rtol=1e-4, atol=1e-5)


def test_unfuse_puts_every_grouped_op_back() -> None:
    """Unfusing each group gives back the same leaf ops (same uids, types, ports and own
    attributes, plus the rule's ``metadata`` they inherited) and the same effective dataflow."""
    tree = amanda.load(fx.path("bert", "torchscript"))
    out = rewrite(tree, GELU)
    for path in out.select("$..[?own_attrs.metadata.rewritten_by=='gelu']").paths:
        out = amanda.unfuse(out, path)
    assert dataflow(out) == dataflow(tree)
    before, after = amanda.flatten(tree).ops, amanda.flatten(out).ops
    assert set(before) == set(after)  # document order may differ: a group sits where its first op was
    for path, node in before.items():
        again = after[path]
        assert (again.uid, again.type, again.inputs, again.outputs) == (node.uid, node.type, node.inputs, node.outputs)
        own = {k: value_key(v) for k, v in again.attrs.items() if k != "metadata" or k in node.attrs}
        assert own == {k: value_key(v) for k, v in node.attrs.items()}


def _nested_silu() -> Container:
    """Sigmoid inside a block, the Mul reading it outside: a SiLU that spans a container boundary."""
    block = Container("Block", "b", inputs=["x"], outputs=["y"], children=[op("Sigmoid", "s", ["X"], ["Y"])],
                      edges=[("b:x", "s:X"), ("s:Y", "b:y")])
    return Container(None, "g", inputs=["x"], outputs=["y"], children=[block, op("Mul", "m", ["A", "B"], ["C"])],
                     edges=[("g:x", "b:x"), ("g:x", "m:A"), ("b:y", "m:B"), ("m:C", "g:y")],
                     attrs={"namespace": "amanda/onnx/17"})


def test_a_match_across_a_container_boundary_is_found_and_left_in_place() -> None:
    """matches() follows the value through the block's port (paths in two containers);
    rewrite() leaves such a match as it is rather than pull an op out of its module."""
    silu = Rule("silu", lambda op, x: op.Mul(x, op.Sigmoid(x)), lambda op, x: op.Swish(x))
    found = matches(_nested_silu(), silu)
    assert [m.keys for m in found] == [[("m",), ("b", "s")]]
    assert rewrite(_nested_silu(), silu) == _nested_silu()


def test_matches_are_disjoint_and_earlier_rules_win() -> None:
    """An op taken by a match of an earlier rule is not matched again by a later one."""
    tree = amanda.load(fx.path("bert", "torchscript"))
    erf_only = Rule("erf", lambda op, x: op.Erf(x))
    assert len(matches(tree, [GELU, erf_only])) == 2
    assert len(matches(tree, [erf_only, GELU])) == 2 and all(m.rule is erf_only for m in matches(tree, [erf_only, GELU]))


# patterns over the op types the random containers use (no namespace: types unchecked)
RANDOM_RULES = [
    Rule("relu_add", lambda op, a, b: op.Relu(op.Add(a, b)), namespace=None),
    Rule("matmul_any", lambda op, a: op.MatMul(a, ANY), lambda op, a: op.Dense(a, _ports=(("A",), ("Y",))), namespace=None),
    Rule("relu", lambda op, a: op.Relu(a), namespace=None),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(containers(max_ops=8))
def test_rewrite_leaves_its_input_alone_and_keeps_invariants_and_dataflow(model: Container) -> None:
    """On random nested containers (control edges, tombstones, attributes) rewrite never changes
    its input, returns a container whose every node passes the constructor's checks, and keeps
    the effective dataflow among leaf ops; each match is grouped exactly once."""
    before = snapshot(model)
    out = rewrite(model, RANDOM_RULES)
    assert snapshot(model) == before
    check_invariants(out)
    assert dataflow(out) == dataflow(model)
    grouped = out.select("$..[?own_attrs.metadata.rewritten_by]").paths
    same_parent = [m for m in matches(model, RANDOM_RULES) if len({k[:-1] for k in m.keys}) == 1]
    assert len(grouped) == len(same_parent)
