"""The three uses of the module tree on real models (the torch fixtures): block-level queries,
non-destructive edits around blocks checked against torch doing the same change, and a block
taken out of one model and composed into another."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import amanda  # noqa: E402
from amanda import Container  # noqa: E402
from amanda.io.onnx import to_onnx  # noqa: E402
from tests.fixtures.onnx import hierarchy_models as fx  # noqa: E402

# the edits are the example's recipes (examples/real_model_surgery.py), checked here against
# torch making the same change in tools/export_hierarchy_fixtures.py
_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "real_model_surgery.py"
_spec = importlib.util.spec_from_file_location("real_model_surgery", _EXAMPLE)
surgery = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(surgery)  # type: ignore[union-attr]
skip, dropped, lora = surgery.skip, surgery.dropped, surgery.lora


def _modules_of_class(model: str, short: str) -> list[str]:
    return [name for name, cls in fx.info(model)["modules"] if cls.rsplit(".", 1)[-1] == short]


def _paths(model: str, names: list[str]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(fx.relative_names(model, name)) for name in names)


def test_block_queries_on_gpt2() -> None:
    """``$..[?type=='GPT2Block']`` is exactly the model's blocks; block 1's attention
    projections are reached by position; the LayerNorms inside blocks are every LayerNorm but
    the final one (torch's module list says which is which)."""
    gpt2 = amanda.load(fx.path("gpt2", "dynamo"))
    blocks = _modules_of_class("gpt2", "GPT2Block")
    assert gpt2.select("$..[?type == 'GPT2Block']").paths == _paths("gpt2", blocks)
    projections = [n for n in _modules_of_class("gpt2", "Conv1D") if n.startswith("transformer.h.1.attn.")]
    assert gpt2.select("$.transformer.'h.1'.attn[?type == 'Conv1D']").paths == _paths("gpt2", projections)
    norms = [n for n in _modules_of_class("gpt2", "LayerNorm") if any(n.startswith(b + ".") for b in blocks)]
    assert gpt2.select("$..[?type == 'GPT2Block']..[?type == 'LayerNorm']").paths == _paths("gpt2", norms)
    assert len(norms) < len(_modules_of_class("gpt2", "LayerNorm"))  # ln_f is outside the blocks


def test_layernorms_inside_bert_attention() -> None:
    """BERT's attention blocks hold one LayerNorm each (in their output sublayer)."""
    bert = amanda.load(fx.path("bert", "dynamo"))
    attention = _modules_of_class("bert", "BertAttention")
    norms = [n for n in _modules_of_class("bert", "LayerNorm") if any(n.startswith(a + ".") for a in attention)]
    assert len(norms) == len(attention) == 2
    assert bert.select("$..[?type == 'BertAttention']..[?type == 'LayerNorm']").paths == _paths("bert", norms)


def test_torchscript_blocks_are_reached_by_scope() -> None:
    """TorchScript records no classes: its blocks are found by their qualified names."""
    gpt2 = amanda.load(fx.path("gpt2", "torchscript"))
    found = gpt2.select("$..[?attrs.scope == 'transformer.h.1.attn.c_attn']").paths
    assert found[0] == ("transformer", "h.1", "attn", "c_attn")


# -- edits, each the change torch made in tools/export_hierarchy_fixtures.py ----------------------


def _check_against_torch(edited: Container, model: str, key: str) -> None:
    got = amanda.Session(edited).run(fx.info(model)["outputs"], fx.feeds(model))
    for ours, theirs in zip(got, fx.expected(model, f"{key}.output."), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    proto = to_onnx(edited)  # the edited tree exports and onnxruntime agrees
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for ours, theirs in zip(session.run(fx.info(model)["outputs"], fx.feeds(model)), fx.expected(model, f"{key}.output."),
                            strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", fx.KINDS)
def test_a_skip_connection_around_a_vit_block(kind: str) -> None:
    """``blocks.1`` wrapped as ``blocks.1(x) + x`` computes what torch's wrapped model does; the
    original model is untouched and shares every other block."""
    vit = amanda.load(fx.path("vit", kind))
    edited = amanda.replace(vit, ("blocks", "1"), skip)
    _check_against_torch(edited, "vit", "skip_blocks.1")
    assert edited.descendant(("blocks", "1")).type == "Skip"
    assert edited.descendant(("blocks", "0")) is vit.descendant(("blocks", "0"))
    kept = zip(edited.descendant(("blocks", "1", "inner")).children, vit.descendant(("blocks", "1")).children)
    assert all(a is b for a, b in kept)  # the wrapped block's contents are the same objects
    np.testing.assert_allclose(amanda.Session(vit).run(["logits"], fx.feeds("vit"))[0], fx.expected("vit")[0],
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", fx.KINDS)
def test_a_dropped_resnet_block(kind: str) -> None:
    """``layer2.1`` replaced by an identity computes what torch's model without it does."""
    resnet = amanda.load(fx.path("resnet", kind))
    edited = amanda.replace(resnet, ("layer2", "1"), dropped)
    _check_against_torch(edited, "resnet", "drop_layer2.1")


@pytest.mark.parametrize("kind", fx.KINDS)
def test_lora_beside_every_attention_projection(kind: str) -> None:
    """A query selects every attention projection (by class for the dynamo export, by scope
    for TorchScript's) and one replace() adds an adapter beside each, with the weights torch
    used; the result computes torch's adapted logits."""
    gpt2 = amanda.load(fx.path("gpt2", kind))
    selector = ("$..[?type == 'GPT2Attention'][?type == 'Conv1D']" if kind == "dynamo"
                else "$..attn[?name == 'c_attn' || name == 'c_proj']")
    projections = gpt2.select(selector)
    assert len(projections.paths) == 4
    weights = fx.arrays("gpt2")

    def adapter(block: Container) -> Container:
        scope = block.attrs["scope"]
        return lora(block, weights[f"lora.{scope}.a"], weights[f"lora.{scope}.b"], 0.5)

    edited = amanda.replace(gpt2, projections, adapter)
    assert edited.select("$..[?type == 'LoRA']").paths == projections.paths
    _check_against_torch(edited, "gpt2", "lora")


# -- composition ------------------------------------------------------------------------------


def _value(model: Container, name: str) -> np.ndarray:
    """The value of that name as the whole model computes it on the fixture's inputs."""
    ops = amanda.flatten(model).ops.items()
    source = next(amanda.Endpoint(path, port.name) for path, leaf in ops for port in leaf.outputs
                  if port.attrs.get("onnx_name") == name)
    return amanda.Session(model).run([source], fx.feeds("gpt2"))[0]


@pytest.mark.parametrize("kind", fx.KINDS)
def test_two_gpt2_blocks_as_a_feature_extractor(kind: str, tmp_path) -> None:
    """The first two blocks, taken out with ``extract`` (the constants they share come along)
    and chained into a new model by the op builder, compute torch's output of block 1 from
    torch's input of block 0; the new model exports and onnxruntime agrees."""
    gpt2 = amanda.load(fx.path("gpt2", kind))
    first, second = (amanda.extract(gpt2, ("transformer", name)) for name in ("h.0", "h.1"))
    assert len(first.inputs) == 2  # the hidden state and the attention mask; no constants
    hidden = amanda.Input("hidden", "float32", (2, 6, 32))
    mask = amanda.Input("mask", "bool", (2, 1, 6, 6))
    out = first(hidden, mask)
    features = second(*out) if isinstance(out, tuple) else second(out, mask)
    extractor = amanda.model([hidden, mask], {"features": features}, name="features")
    feeds = {"hidden": fx.arrays("gpt2")["blocks.h.0.input"], "mask": _value(gpt2, first.input_names[1])}
    want = fx.arrays("gpt2")["blocks.h.1.output"]
    np.testing.assert_allclose(amanda.Session(extractor).run(["features"], feeds)[0], want, rtol=1e-4, atol=1e-5)
    amanda.dump(extractor, tmp_path / "features.onnx")
    session = ort.InferenceSession(str(tmp_path / "features.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(["features"], feeds)[0], want, rtol=1e-4, atol=1e-5)
    again = amanda.load(tmp_path / "features.onnx")
    assert [c.name for c in again.children] == ["h.0", "h.1"]
    assert again.child("h.0").attrs == extractor.child("h.0").attrs
