"""Surgery on real models exported from torch: each arrives as its module tree, so a block is
one container to query, wrap or take out.

The models are the small GPT-2 and ViT (random weights) that tests/fixtures/onnx/hierarchy
carries, with torch's own outputs for the same changes made in torch, so every step below is
checked against torch.
"""

from pathlib import Path

import numpy as np

import amanda
from amanda import SELF, Container, op

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "onnx" / "hierarchy"


def show(container: Container, depth: int = 3, indent: str = "  ") -> None:
    """Print the module containers down to ``depth`` levels, with their types and op counts."""
    for child in container.children:
        if child.children:
            print(f"{indent}{child.name} [{child.type}] ({sum(1 for _ in child)} ops)")
            if depth > 1:
                show(child, depth - 1, indent + "  ")


def _inner(block: Container) -> Container:
    """``block`` renamed ``inner``, its torch qualified name following it (torch's ``x.inner``)."""
    inner = block.with_name("inner")
    scope = block.attrs.get("scope")
    return inner.with_attrs(scope=f"{scope}.inner") if scope else inner


def wrapped(block: Container, kind: str, added: list[Container], edges: list) -> Container:
    """``block`` inside a new container of the same name and ports (as torch wraps a module)."""
    inner = _inner(block)
    wiring = [((SELF, p), (("inner",), p)) for p in block.input_names]
    wiring += [((("inner",), p), (SELF, p)) for p in block.output_names[1:]]
    return Container(kind, block.name, inputs=block.inputs, outputs=block.outputs,
                     children=[inner, *added], edges=wiring + edges)


def skip(block: Container) -> Container:
    """``inner(x) + x``: torch's ``Skip``."""
    x, y = block.input_names[0], block.output_names[0]
    return wrapped(block, "Skip", [op("Add", "skip", ["A", "B"], ["C"])],
                    [((("inner",), y), (("skip",), "A")), ((SELF, x), (("skip",), "B")), ((("skip",), "C"), (SELF, y))])


def dropped(block: Container) -> Container:
    """The block replaced by an identity (torch's ``nn.Identity``), with the same ports."""
    x, y = block.input_names[0], block.output_names[0]
    return Container("Identity", block.name, inputs=block.inputs, outputs=block.outputs[:1],
                     children=[op("Identity", "identity", ["input"], ["output"])],
                     edges=[((SELF, x), (("identity",), "input")), ((("identity",), "output"), (SELF, y))])


def lora(block: Container, a: np.ndarray, b: np.ndarray, scale: float = 0.5) -> Container:
    """``inner(x) + scale * (x @ a) @ b``: torch's ``LoRA`` adapter beside a projection. The
    exporter may have merged the reshapes around the projection into it, so the adapter reads
    the block's input as rows of ``a``'s width and gives its result the output's shape."""
    x, y = block.input_names[0], block.output_names[0]

    def weight(name: str, value: np.ndarray) -> Container:
        return op("Constant", name, outputs=["output"], attrs={"value": value, "initializer": True})

    added = [weight("lora_a", a), weight("lora_b", b), weight("lora_scale", np.float32(scale)),
             weight("rows", np.array([-1, a.shape[0]], np.int64)),
             op("Reshape", "flat", ["data", "shape"], ["reshaped"]), op("MatMul", "down", ["A", "B"], ["Y"]),
             op("MatMul", "up", ["A", "B"], ["Y"]), op("Mul", "scaled", ["A", "B"], ["C"]),
             op("Shape", "out_shape", ["data"], ["shape"]), op("Reshape", "shaped", ["data", "shape"], ["reshaped"]),
             op("Add", "sum", ["A", "B"], ["C"])]
    edges = [((SELF, x), (("flat",), "data")), ((("rows",), "output"), (("flat",), "shape")),
             ((("flat",), "reshaped"), (("down",), "A")), ((("lora_a",), "output"), (("down",), "B")),
             ((("down",), "Y"), (("up",), "A")), ((("lora_b",), "output"), (("up",), "B")),
             ((("up",), "Y"), (("scaled",), "A")), ((("lora_scale",), "output"), (("scaled",), "B")),
             ((("inner",), y), (("out_shape",), "data")), ((("scaled",), "C"), (("shaped",), "data")),
             ((("out_shape",), "shape"), (("shaped",), "shape")),
             ((("inner",), y), (("sum",), "A")), ((("shaped",), "reshaped"), (("sum",), "B")),
             ((("sum",), "C"), (SELF, y))]
    return wrapped(block, "LoRA", added, edges)


def main() -> None:
    torch_says = dict(np.load(FIXTURES / "gpt2.npz"))
    feeds = {"input_ids": torch_says["input.input_ids"], "attention_mask": torch_says["input.attention_mask"]}
    gpt2 = amanda.load(FIXTURES / "gpt2.dynamo.onnx")  # torch.onnx.export(..., dynamo=True)
    print(f"GPT-2 [{gpt2.type}], {sum(1 for _ in gpt2)} ops:")
    show(gpt2)

    # query: the blocks, the projections of block 1, the LayerNorms inside blocks
    print("blocks:", gpt2.select("$..[?type == 'GPT2Block']").paths)
    print("block 1 projections:", gpt2.select("$.transformer.'h.1'.attn[?type == 'Conv1D']").paths)
    print("LayerNorms in blocks:", len(gpt2.select("$..[?type == 'GPT2Block']..[?type == 'LayerNorm']").paths))

    # edit: a LoRA adapter beside every attention projection (a query feeding a replace)
    projections = gpt2.select("$..[?type == 'GPT2Attention'][?type == 'Conv1D']")
    adapted = amanda.replace(gpt2, projections, lambda block: lora(
        block, torch_says[f"lora.{block.attrs['scope']}.a"], torch_says[f"lora.{block.attrs['scope']}.b"]))
    (logits,) = amanda.Session(adapted).run(["logits"], feeds)
    print("LoRA on", len(projections.paths), "projections; max difference from torch:",
          float(np.abs(logits - torch_says["lora.output.logits"]).max()))
    assert np.allclose(logits, torch_says["lora.output.logits"], atol=1e-5)
    assert adapted.descendant(("transformer", "h.0", "ln_1")) is gpt2.descendant(("transformer", "h.0", "ln_1"))

    # edit: a skip connection around a ViT block
    vit_says = dict(np.load(FIXTURES / "vit.npz"))
    vit = amanda.load(FIXTURES / "vit.torchscript.onnx")  # dynamo=False: TorchScript's scope names
    skipped = amanda.replace(vit, ("blocks", "1"), skip)
    (vit_logits,) = amanda.Session(skipped).run(["logits"], {"pixels": vit_says["input.pixels"]})
    assert np.allclose(vit_logits, vit_says["skip_blocks.1.output.logits"], atol=1e-5)
    print("ViT with a skip connection around blocks.1 matches torch")

    # compose: the first two GPT-2 blocks as a feature extractor, saved as ONNX
    first, second = (amanda.extract(gpt2, ("transformer", name)) for name in ("h.0", "h.1"))
    hidden = amanda.Input("hidden", "float32", (2, 6, 32))
    mask = amanda.Input("mask", "bool", (2, 1, 6, 6))
    extractor = amanda.model([hidden, mask], {"features": second(*first(hidden, mask))}, name="features")
    amanda.dump(extractor, "features.onnx")
    print("feature extractor:", [c.name for c in extractor.children], "->", amanda.load("features.onnx").output_names)


if __name__ == "__main__":
    main()
