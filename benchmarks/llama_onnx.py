"""A Llama-shaped decoder as ONNX with external data, in the form torch's dynamo exporter gives.

Embedding, ``layers`` decoder blocks (RMSNorm, self-attention with q/k/v/o projections, rotary
positions and a causal mask, RMSNorm, gated SiLU MLP, residual adds), a final RMSNorm and the LM
head, with random weights written straight to ``model.onnx.data`` (never all in memory: the
7B shape is about 13.5 GB). Each node records its module tree as the dynamo exporter does, in
``metadata_props``: ``pkg.torch.onnx.name_scopes`` (qualified module names from the root down,
then the node's own name), ``pkg.torch.onnx.class_hierarchy`` and ``namespace``; initializers
are named after the parameters (``model.layers.0.self_attn.q_proj.weight``). Built with
onnx.helper alone (no torch). Linear weights are stored ``(in, out)``, as the exporter leaves
them after folding the transpose. Norms and softmax run in float32 (HF's Llama upcasts them).

    python benchmarks/llama_onnx.py OUT_DIR --size tiny|small|7b [--layers N --width D ...]

``--size 7b`` is Llama-2-7B's shape: 32 blocks, width 4096, 32 heads, MLP 11008, vocabulary
32000, float16.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

__all__ = ["SIZES", "LlamaShape", "write_llama"]

_CLASSES = {
    "": "transformers.models.llama.modeling_llama.LlamaForCausalLM",
    "model": "transformers.models.llama.modeling_llama.LlamaModel",
    "embed_tokens": "torch.nn.modules.sparse.Embedding",
    "layer": "transformers.models.llama.modeling_llama.LlamaDecoderLayer",
    "self_attn": "transformers.models.llama.modeling_llama.LlamaAttention",
    "mlp": "transformers.models.llama.modeling_llama.LlamaMLP",
    "norm": "transformers.models.llama.modeling_llama.LlamaRMSNorm",
    "proj": "torch.nn.modules.linear.Linear",
    "act_fn": "torch.nn.modules.activation.SiLU",
    "rotary_emb": "transformers.models.llama.modeling_llama.LlamaRotaryEmbedding",
}


@dataclass(frozen=True)
class LlamaShape:
    """The sizes of a Llama-shaped decoder."""

    layers: int = 2
    width: int = 64
    heads: int = 4
    ffn: int = 172
    vocab: int = 256
    positions: int = 128
    dtype: str = "float32"

    @property
    def head_dim(self) -> int:
        return self.width // self.heads

    def weight_bytes(self) -> int:
        """Bytes of the weights (embedding, blocks, norm, head) in ``dtype``."""
        block = 4 * self.width**2 + 3 * self.width * self.ffn + 2 * self.width
        count = 2 * self.vocab * self.width + self.layers * block + self.width
        return count * np.dtype(self.dtype).itemsize


SIZES = {
    "tiny": LlamaShape(),
    "small": LlamaShape(layers=4, width=256, heads=8, ffn=688, vocab=2048, positions=256),  # ~12 MB
    "7b": LlamaShape(layers=32, width=4096, heads=32, ffn=11008, vocab=32000, positions=4096, dtype="float16"),
}


class _Writer:
    """Nodes with dynamo-style names and metadata; initializers streamed to the data file."""

    def __init__(self, shape: LlamaShape, data: Path, seed: int) -> None:
        self.shape = shape
        self.elem = helper.np_dtype_to_tensor_dtype(np.dtype(shape.dtype))
        self.nodes: list = []
        self.inits: list = []
        self.stack: list[tuple[str, str]] = [("", _CLASSES[""])]
        self.count: dict[str, int] = {}
        self.rng = np.random.default_rng(seed)
        self.data_name = data.name
        self.file = open(data, "wb")  # noqa: SIM115 - closed by close()
        self.offset = 0

    def close(self) -> None:
        self.file.close()

    # -- the module tree -----------------------------------------------------------------

    def enter(self, name: str, kind: str) -> None:
        parent = self.stack[-1][0]
        self.stack.append((f"{parent}.{name}" if parent else name, _CLASSES[kind]))

    def leave(self) -> None:
        self.stack.pop()

    def scope(self) -> str:
        return self.stack[-1][0]

    # -- values --------------------------------------------------------------------------

    def _fresh(self, base: str) -> str:
        n = self.count.get(base, 0)
        self.count[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def node(self, op: str, inputs: list[str], target: str, outputs: int = 1, **attrs: object) -> list[str]:
        value = self._fresh(target.split(".")[1] if "." in target else op.lower())
        names = [value] if outputs == 1 else [f"{value}__{i}" for i in range(outputs)]
        node = helper.make_node(op, inputs, names, name=f"node_{names[0]}", **attrs)
        scopes = [name for name, _ in self.stack] + [value]
        classes = [cls for _, cls in self.stack] + [target]
        spaces = [f"{name}: {cls}" for name, cls in self.stack] + [f"{value}: {target}"]
        helper.set_metadata_props(node, {
            "namespace": "/".join(spaces),
            "pkg.torch.onnx.class_hierarchy": repr(classes),
            "pkg.torch.onnx.name_scopes": repr(scopes),
        })
        self.nodes.append(node)
        return names

    def one(self, op: str, inputs: list[str], target: str, **attrs: object) -> str:
        return self.node(op, inputs, target, **attrs)[0]

    def weight(self, name: str, dims: tuple[int, ...], scale: float, base: float = 0.0, dtype: str | None = None) -> str:
        """A parameter of random values ``base + scale * N(0, 1)``, written to the data file."""
        dtype = dtype or self.shape.dtype
        array = self.rng.standard_normal(dims, dtype=np.float32)
        array *= scale
        array += base
        return self.tensor(name, array.astype(dtype, copy=False))

    def tensor(self, name: str, array: np.ndarray) -> str:
        """An initializer holding ``array``, in the data file when it is large."""
        elem = helper.np_dtype_to_tensor_dtype(array.dtype)
        if array.nbytes < 1024:
            self.inits.append(helper.make_tensor(name, elem, array.shape, array.tobytes(), raw=True))
            return name
        align = 4096 if array.nbytes >= 1 << 16 else 64
        pad = -self.offset % align
        self.file.write(bytes(pad))
        self.offset += pad
        self.file.write(np.ascontiguousarray(array).tobytes())
        tensor = TensorProto(name=name, data_type=elem, dims=array.shape, data_location=TensorProto.EXTERNAL)
        for key, value in (("location", self.data_name), ("offset", str(self.offset)), ("length", str(array.nbytes))):
            tensor.external_data.add(key=key, value=value)
        self.offset += array.nbytes
        self.inits.append(tensor)
        return name

    def const(self, array: np.ndarray) -> str:
        return self.tensor(self._fresh("val"), np.asarray(array))


def _linear(w: _Writer, x: str, name: str, fan_in: int, fan_out: int) -> str:
    w.enter(name, "proj")
    weight = w.weight(f"{w.scope()}.weight", (fan_in, fan_out), 1 / math.sqrt(fan_in))
    out = w.one("MatMul", [x, weight], "aten.linear.default")
    w.leave()
    return out


def _rms_norm(w: _Writer, x: str, name: str, width: int, consts: dict[str, str]) -> str:
    w.enter(name, "norm")
    weight = w.weight(f"{w.scope()}.weight", (width,), 0.05, base=1.0)
    wide = w.one("Cast", [x], "prims.convert_element_type.default", to=TensorProto.FLOAT)
    square = w.one("Mul", [wide, wide], "aten.pow.Tensor_Scalar")
    mean = w.one("ReduceMean", [square, consts["last"]], "aten.mean.dim", keepdims=1)
    shifted = w.one("Add", [mean, consts["eps"]], "aten.add.Tensor")
    root = w.one("Sqrt", [shifted], "aten.rsqrt.default")
    inverse = w.one("Reciprocal", [root], "aten.rsqrt.default")
    scaled = w.one("Mul", [wide, inverse], "aten.mul.Tensor")
    narrow = w.one("Cast", [scaled], "prims.convert_element_type.default", to=w.elem)
    out = w.one("Mul", [weight, narrow], "aten.mul.Tensor")
    w.leave()
    return out


def _rotate(w: _Writer, x: str, cos: str, sin: str) -> str:
    halves = w.node("Split", [x], "aten.slice.Tensor", outputs=2, axis=-1, num_outputs=2)
    negated = w.one("Neg", [halves[1]], "aten.neg.default")
    rotated = w.one("Concat", [negated, halves[0]], "aten.cat.default", axis=-1)
    return w.one("Add", [w.one("Mul", [x, cos], "aten.mul.Tensor"), w.one("Mul", [rotated, sin], "aten.mul.Tensor")],
                 "aten.add.Tensor")


def _attention(w: _Writer, x: str, rope: tuple[str, str], mask: str, consts: dict[str, str]) -> str:
    s = w.shape
    w.enter("self_attn", "self_attn")
    heads = []
    for name in ("q_proj", "k_proj", "v_proj"):
        projected = _linear(w, x, name, s.width, s.width)
        split = w.one("Reshape", [projected, consts["heads"]], "aten.view.default")
        heads.append(w.one("Transpose", [split], "aten.transpose.int", perm=[0, 2, 1, 3]))
    q, k = (_rotate(w, t, *rope) for t in heads[:2])
    kt = w.one("Transpose", [k], "aten.transpose.int", perm=[0, 1, 3, 2])
    scores = w.one("Mul", [w.one("MatMul", [q, kt], "aten.matmul.default"), consts["scale"]], "aten.mul.Tensor")
    wide = w.one("Cast", [scores], "prims.convert_element_type.default", to=TensorProto.FLOAT)
    masked = w.one("Add", [wide, mask], "aten.add.Tensor")
    probs = w.one("Softmax", [masked], "aten._softmax.default", axis=-1)
    narrow = w.one("Cast", [probs], "prims.convert_element_type.default", to=w.elem)
    mixed = w.one("MatMul", [narrow, heads[2]], "aten.matmul.default")
    merged = w.one("Reshape", [w.one("Transpose", [mixed], "aten.transpose.int", perm=[0, 2, 1, 3]), consts["merge"]],
                   "aten.view.default")
    out = _linear(w, merged, "o_proj", s.width, s.width)
    w.leave()
    return out


def _mlp(w: _Writer, x: str) -> str:
    s = w.shape
    w.enter("mlp", "mlp")
    gate = _linear(w, x, "gate_proj", s.width, s.ffn)
    up = _linear(w, x, "up_proj", s.width, s.ffn)
    w.enter("act_fn", "act_fn")
    act = w.one("Mul", [gate, w.one("Sigmoid", [gate], "aten.silu.default")], "aten.silu.default")
    w.leave()
    out = _linear(w, w.one("Mul", [act, up], "aten.mul.Tensor"), "down_proj", s.ffn, s.width)
    w.leave()
    return out


def _block(w: _Writer, i: int, h: str, rope: tuple[str, str], mask: str, consts: dict[str, str]) -> str:
    w.enter(f"layers.{i}", "layer")
    normed = _rms_norm(w, h, "input_layernorm", w.shape.width, consts)
    h = w.one("Add", [h, _attention(w, normed, rope, mask, consts)], "aten.add.Tensor")
    normed = _rms_norm(w, h, "post_attention_layernorm", w.shape.width, consts)
    h = w.one("Add", [h, _mlp(w, normed)], "aten.add.Tensor")
    w.leave()
    return h


def _rotary_tables(w: _Writer) -> tuple[str, str]:
    s = w.shape
    inv = 1.0 / (10000.0 ** (np.arange(0, s.head_dim, 2, dtype=np.float64) / s.head_dim))
    angles = np.outer(np.arange(s.positions, dtype=np.float64), inv)
    angles = np.concatenate([angles, angles], axis=-1)
    w.enter("rotary_emb", "rotary_emb")
    cos = w.tensor("model.rotary_emb.cos_cached", np.cos(angles).astype(s.dtype))
    sin = w.tensor("model.rotary_emb.sin_cached", np.sin(angles).astype(s.dtype))
    w.leave()
    return cos, sin


def _graph(w: _Writer) -> tuple[list, list]:
    s = w.shape
    consts = {
        "last": w.const(np.array([-1], np.int64)),
        "eps": w.const(np.array(1e-5, np.float32)),
        "heads": w.const(np.array([0, 0, s.heads, s.head_dim], np.int64)),
        "merge": w.const(np.array([0, 0, s.width], np.int64)),
        "scale": w.const(np.array(1 / math.sqrt(s.head_dim), s.dtype)),
        "one": w.const(np.array(1, np.int64)),
        "axis1": w.const(np.array([1], np.int64)),
    }
    w.enter("model", "model")
    w.enter("embed_tokens", "embed_tokens")
    table = w.weight("model.embed_tokens.weight", (s.vocab, s.width), 1.0)
    h = w.one("Gather", [table, "input_ids"], "aten.embedding.default")
    w.leave()
    cos_table, sin_table = _rotary_tables(w)
    w.enter("rotary_emb", "rotary_emb")
    rope = tuple(w.one("Unsqueeze", [w.one("Gather", [t, "position_ids"], "aten.index.Tensor"), consts["axis1"]],
                       "aten.unsqueeze.default") for t in (cos_table, sin_table))
    w.leave()
    length = w.one("Shape", ["input_ids"], "aten.sym_size.int", start=1, end=2)
    square = w.one("Concat", [length, length], "aten.cat.default", axis=0)
    filled = w.one("ConstantOfShape", [square], "aten.full.default",
                   value=helper.make_tensor("value", TensorProto.FLOAT, [1], [-1e9]))
    mask = w.one("Trilu", [filled, consts["one"]], "aten.triu.default", upper=1)
    for i in range(s.layers):
        h = _block(w, i, h, rope, mask, consts)  # type: ignore[arg-type]
    h = _rms_norm(w, h, "norm", s.width, consts)
    w.leave()
    logits = _linear(w, h, "lm_head", s.width, s.vocab)
    w.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="node_logits"))
    return w.nodes, w.inits


def write_llama(folder: str | os.PathLike, shape: LlamaShape | str = "tiny", *, seed: int = 0,
                name: str = "model.onnx") -> Path:
    """Write the decoder of ``shape`` (a LlamaShape or a name in SIZES) to ``folder/name``, its
    weights to ``folder/name.data``; the model file's path."""
    shape = SIZES[shape] if isinstance(shape, str) else shape
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    w = _Writer(shape, folder / f"{name}.data", seed)
    try:
        nodes, inits = _graph(w)
    finally:
        w.close()
    elem = w.elem
    graph = helper.make_graph(
        nodes, "main_graph",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("logits", elem, ["batch", "sequence", shape.vocab])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10,
                              producer_name="pytorch", producer_version="2.9.0")
    path.write_bytes(model.SerializeToString())
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder")
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    for field in ("layers", "width", "heads", "ffn", "vocab", "positions"):
        parser.add_argument(f"--{field}", type=int)
    parser.add_argument("--dtype", choices=("float16", "float32"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    shape = replace(SIZES[args.size], **{k: v for k, v in vars(args).items()
                                         if k in LlamaShape.__dataclass_fields__ and v is not None})
    path = write_llama(args.folder, shape, seed=args.seed)
    print(f"{path}: {shape}, {shape.weight_bytes() / 1e9:.2f} GB of weights")


if __name__ == "__main__":
    main()
