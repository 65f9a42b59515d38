"""Export small real models from torch, with both of torch's ONNX exporters, into
tests/fixtures/onnx/hierarchy/, once, so that CI checks the hierarchical import without torch.

    pip install torch torchvision transformers timm onnxscript   # CPU builds are enough
    python tools/export_hierarchy_fixtures.py

For each model ``<name>`` the script writes

- ``<name>.dynamo.onnx`` (``torch.onnx.export(..., dynamo=True)``, the torch.export-based exporter,
  which records ``pkg.torch.onnx.name_scopes`` and ``pkg.torch.onnx.class_hierarchy`` per node)
  and ``<name>.torchscript.onnx`` (``dynamo=False``, which names nodes by scope path);
- ``<name>.json``: the input names, dtypes and shapes, the output names, torch's
  ``named_modules()`` with each module's full class path, the modules that ran (forward hooks),
  every parameter and buffer name with its owner, and the tied ones;
- ``<name>.npz``: the inputs and torch's eager outputs, and for the models point 5 of issue 27
  edits, torch's outputs after the same edit (and the adapter weights the edit adds).

Every model is built from a tiny config with random weights and a fixed seed (widths of 8 to 32),
so the whole directory stays well under a few MB. Nothing here is imported by amanda or its tests.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "onnx" / "hierarchy"
LORA_RANK = 4
LORA_SCALE = 0.5


# -- the models -------------------------------------------------------------------------------


class Inner(torch.nn.Module):
    """A block whose activation is called twice (one module, two calls)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(width, width)
        self.act = torch.nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.lin(x)) + self.act(x)


class Nested(torch.nn.Module):
    """Hand-written nesting: Conv then BatchNorm (which the exporters fold into one Conv), a
    ModuleList of blocks, a Sequential inside a Sequential (``seq.0.0``: a child scope named like
    its parent), one Linear registered under two names, and a parameter of the root itself."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.blocks = torch.nn.ModuleList([Inner(8), Inner(8)])
        self.seq = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()),
                                       torch.nn.Linear(8, 8))
        self.shared = torch.nn.Linear(8, 8)
        self.alias = self.shared  # named_modules() lists it once, as ``shared``
        self.head = torch.nn.Linear(8, 2)
        self.scale = torch.nn.Parameter(torch.tensor(1.5))

    def forward(self, img: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        pooled = self.bn(self.conv(img)).mean(dim=(2, 3))  # [n, 4]
        for block in self.blocks:
            x = block(x)
        x = self.seq(x)
        x = self.alias(self.shared(x))
        return self.head(x) * self.scale + pooled[:, :2]


def _gpt2() -> torch.nn.Module:
    import transformers

    class TinyGPT2(transformers.GPT2LMHeadModel):
        """GPT2LMHeadModel returning only its logits, for a mask given as an input."""

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
            return super().forward(input_ids=input_ids, attention_mask=attention_mask).logits

    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_inner=64, vocab_size=64,
                                     n_positions=16, use_cache=False, bos_token_id=0, eos_token_id=0)
    return TinyGPT2(config)


def _bert() -> torch.nn.Module:
    import transformers

    class TinyBert(transformers.BertModel):
        """BertModel returning its last hidden state and pooled output."""

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple:  # type: ignore[override]
            out = super().forward(input_ids=input_ids, attention_mask=attention_mask)
            return out.last_hidden_state, out.pooler_output

    config = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=64, max_position_embeddings=16,
                                     type_vocab_size=2)
    return TinyBert(config)


def _resnet() -> torch.nn.Module:
    from timm.models.resnet import BasicBlock, ResNet

    return ResNet(BasicBlock, [1, 2, 1, 1], channels=(8, 8, 16, 16), stem_width=8, num_classes=10,
                  zero_init_last=False)


def _vit() -> torch.nn.Module:
    from timm.models.vision_transformer import VisionTransformer

    return VisionTransformer(img_size=16, patch_size=8, embed_dim=32, depth=2, num_heads=2,
                             mlp_ratio=2.0, num_classes=10)


def _mobilenet() -> torch.nn.Module:
    from torchvision.models import mobilenet_v3_small

    return mobilenet_v3_small(width_mult=0.25, num_classes=10)


def _tokens(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 64, (2, 6), generator=generator)
    mask = torch.ones(2, 6, dtype=torch.int64)
    mask[1, 4:] = 0  # the second sequence is padded
    return {"input_ids": ids, "attention_mask": mask}


def _image(seed: int, size: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {"pixels": torch.randn(1, 3, size, size, generator=generator)}


def _nested_inputs(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {"img": torch.randn(2, 3, 6, 6, generator=generator), "x": torch.randn(2, 8, generator=generator)}


# name -> (builder, inputs, output names)
MODELS: dict[str, tuple[Callable[[], torch.nn.Module], Callable[[], dict], list[str]]] = {
    "nested": (Nested, lambda: _nested_inputs(3), ["y"]),
    "gpt2": (_gpt2, lambda: _tokens(4), ["logits"]),
    "bert": (_bert, lambda: _tokens(5), ["last_hidden_state", "pooler_output"]),
    "resnet": (_resnet, lambda: _image(6, 32), ["logits"]),
    "vit": (_vit, lambda: _image(7, 16), ["logits"]),
    "mobilenet": (_mobilenet, lambda: _image(8, 32), ["logits"]),
}


# -- recording what torch knows ---------------------------------------------------------------


def _class_path(module: torch.nn.Module) -> str:
    kind = type(module)
    return f"{kind.__module__}.{kind.__qualname__}"


def _randomize(model: torch.nn.Module, generator: torch.Generator) -> None:
    """Make the weights look trained: every parameter gets a little noise (a fresh model's norms
    are all ones and zeros, and the dynamo exporter's optimizer would merge those equal tensors
    into one shared initializer), and every BatchNorm running statistics that are not the
    identity, so that folding a BatchNorm into its Conv changes the numbers."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.02)
    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            n = module.num_features
            module.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
            module.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
            if module.affine:
                module.weight.data.copy_(torch.rand(n, generator=generator) + 0.5)
                module.bias.data.copy_(torch.randn(n, generator=generator) * 0.1)


def _ran_modules(model: torch.nn.Module, inputs: dict) -> list[str]:
    """The qualified names of the modules whose forward ran, in first-call order."""
    names = {id(m): n for n, m in model.named_modules()}
    ran: list[str] = []
    hooks = [m.register_forward_pre_hook(lambda mod, args: ran.append(names[id(mod)]))
             for m in model.modules()]
    with torch.no_grad():
        model(*inputs.values())
    for hook in hooks:
        hook.remove()
    return list(dict.fromkeys(ran))


def _owners(model: torch.nn.Module) -> dict:
    """Every parameter and buffer (with its duplicates, for tied weights) by qualified name."""
    tensors: dict[str, list[str]] = {}
    for kind, items in (("parameter", model.named_parameters(remove_duplicate=False)),
                        ("buffer", model.named_buffers(remove_duplicate=False))):
        for name, tensor in items:
            tensors.setdefault(f"{kind}:{id(tensor)}", []).append(name)
    return {"tensors": [names[0] for names in tensors.values()],
            "tied": [names for names in tensors.values() if len(names) > 1]}


def _outputs(model: torch.nn.Module, inputs: dict, names: list[str]) -> dict[str, np.ndarray]:
    with torch.no_grad():
        result = model(*inputs.values())
    result = result if isinstance(result, tuple) else (result,)
    return {f"output.{n}": r.numpy() for n, r in zip(names, result, strict=True)}


# -- the edits of issue 27, point 5, done in torch ------------------------------------------------


class Skip(torch.nn.Module):
    """``inner(x) + x``: a skip connection around a block."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) + x


class LoRA(torch.nn.Module):
    """``inner(x) + scale * (x @ a) @ b`` beside a projection."""

    def __init__(self, inner: torch.nn.Module, a: torch.Tensor, b: torch.Tensor) -> None:
        super().__init__()
        self.inner, self.a, self.b = inner, a, b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) + LORA_SCALE * ((x @ self.a) @ self.b)


def _edits(name: str, model: torch.nn.Module, inputs: dict, outputs: list[str]) -> dict[str, np.ndarray]:
    """torch's outputs after the edits the tests make on the imported model."""
    import copy

    found: dict[str, np.ndarray] = {}
    if name == "resnet":  # drop the second block of the second stage (it keeps the shape)
        dropped = copy.deepcopy(model)
        dropped.layer2[1] = torch.nn.Identity()
        found |= {f"drop_layer2.1.{k}": v for k, v in _outputs(dropped, inputs, outputs).items()}
    if name == "vit":  # a skip connection around the second transformer block
        skipped = copy.deepcopy(model)
        skipped.blocks[1] = Skip(skipped.blocks[1])
        found |= {f"skip_blocks.1.{k}": v for k, v in _outputs(skipped, inputs, outputs).items()}
    if name == "gpt2":
        found |= _gpt2_edits(model, inputs, outputs)
    return found


def _gpt2_edits(model: torch.nn.Module, inputs: dict, outputs: list[str]) -> dict[str, np.ndarray]:
    import copy

    found: dict[str, np.ndarray] = {}
    generator = torch.Generator().manual_seed(9)
    adapted = copy.deepcopy(model)
    for i, block in enumerate(adapted.transformer.h):
        for proj in ("c_attn", "c_proj"):
            inner = getattr(block.attn, proj)
            n_in, n_out = inner.weight.shape  # transformers' Conv1D keeps weight as [in, out]
            a = torch.randn(n_in, LORA_RANK, generator=generator) * 0.3
            b = torch.randn(LORA_RANK, n_out, generator=generator) * 0.3
            found[f"lora.transformer.h.{i}.attn.{proj}.a"] = a.numpy()
            found[f"lora.transformer.h.{i}.attn.{proj}.b"] = b.numpy()
            setattr(block.attn, proj, LoRA(inner, a, b))
    found |= {f"lora.{k}": v for k, v in _outputs(adapted, inputs, outputs).items()}
    # the first two blocks as a feature extractor: what goes into h.0 and comes out of h.1
    seen: dict[str, torch.Tensor] = {}

    def block_input(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        seen.setdefault("in", args[0] if args else kwargs["hidden_states"])

    def block_output(module: torch.nn.Module, args: tuple, out: object) -> None:
        seen.setdefault("out", out[0] if isinstance(out, tuple) else out)  # type: ignore[arg-type]

    h = model.transformer.h
    hooks = [h[0].register_forward_pre_hook(block_input, with_kwargs=True),
             h[1].register_forward_hook(block_output)]
    with torch.no_grad():
        model(*inputs.values())
    for hook in hooks:
        hook.remove()
    found["blocks.h.0.input"] = seen["in"].numpy()
    found["blocks.h.1.output"] = seen["out"].numpy()
    return found


# -- exporting --------------------------------------------------------------------------------


def export(name: str) -> None:
    """Build, record and export one model with both exporters."""
    builder, make_inputs, outputs = MODELS[name]
    torch.manual_seed(sum(map(ord, name)))
    model = builder().eval()
    _randomize(model, torch.Generator().manual_seed(11))
    inputs = make_inputs()
    args = tuple(inputs.values())
    input_names = list(inputs)
    arrays = {f"input.{k}": v.numpy() for k, v in inputs.items()}
    arrays |= _outputs(model, inputs, outputs)
    arrays |= _edits(name, model, inputs, outputs)
    info = {
        "inputs": {k: {"dtype": str(v.dtype).removeprefix("torch."), "shape": list(v.shape)}
                   for k, v in inputs.items()},
        "outputs": outputs,
        "modules": [[n, _class_path(m)] for n, m in model.named_modules()],
        "ran": _ran_modules(model, inputs),
        **_owners(model),
        "torch": torch.__version__,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, args, dynamo=True, input_names=input_names,
                                    output_names=outputs, verbose=False)
        program.save(str(OUT / f"{name}.dynamo.onnx"))
        torch.onnx.export(model, args, str(OUT / f"{name}.torchscript.onnx"), dynamo=False,
                          opset_version=17, input_names=input_names, output_names=outputs)
    np.savez_compressed(OUT / f"{name}.npz", **arrays)
    (OUT / f"{name}.json").write_text(json.dumps(info, indent=1) + "\n")


def main() -> None:
    """Export every fixture model."""
    OUT.mkdir(parents=True, exist_ok=True)
    for name in MODELS:
        export(name)
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {len(list(OUT.iterdir()))} files, {total / 1e6:.2f} MB, to {OUT}")


if __name__ == "__main__":
    main()
