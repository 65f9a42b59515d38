"""Large models for the drawing tests and ``benchmarks/bench_render.py``: a flat graph whose op
names carry scope paths, as a TorchScript export writes them (``/blocks/blocks.3/attn/MatMul``),
with weights named as torch names parameters (``blocks.3.attn.qkv.weight``), and the same
network nested as containers, one per module."""

from __future__ import annotations

from typing import Any

from amanda import Container, op

# one transformer-like block: (module path inside the block, op types in order)
_BLOCK = (
    ("norm1", ("ReduceMean", "Sub", "Mul", "ReduceMean", "Add", "Sqrt", "Div", "Mul", "Add")),
    ("attn/qkv", ("MatMul", "Add")),
    ("attn", ("Reshape", "Transpose", "Split", "MatMul", "Mul", "Softmax", "MatMul", "Transpose", "Reshape")),
    ("attn/proj", ("MatMul", "Add")),
    ("", ("Residual",)),
    ("norm2", ("ReduceMean", "Sub", "Mul", "ReduceMean", "Add", "Sqrt", "Div", "Mul", "Add")),
    ("mlp/fc1", ("MatMul", "Add")),
    ("mlp/act", ("Div", "Erf", "Add", "Mul", "Mul")),
    ("mlp/fc2", ("MatMul", "Add")),
    ("", ("Residual",)),
)
_WEIGHTS = ("attn/qkv", "attn/proj", "mlp/fc1", "mlp/fc2")
_KINDS = {"attn": "Attention", "mlp": "Mlp", "qkv": "Linear", "proj": "Linear", "fc1": "Linear",
          "fc2": "Linear", "act": "GELU", "norm1": "LayerNorm", "norm2": "LayerNorm"}


def _block_ops(prefix: str) -> list[tuple[str, str, str]]:
    """``(scope, op type, own name)`` of one block's 46 ops, in order (a weight before the
    MatMul that reads it)."""
    ops = []
    seen: dict[tuple[str, str], int] = {}  # an exporter numbers repeated names in a scope: Add, Add_1
    for scope, types in _BLOCK:
        if scope in _WEIGHTS:
            ops.append((f"{prefix}/{scope}", "Constant", f"{scope.replace('/', '.')}.weight"))
        for op_type in types:
            base = "Add" if op_type == "Residual" else op_type
            k = seen[(scope, base)] = seen.get((scope, base), -1) + 1
            ops.append((f"{prefix}/{scope}".rstrip("/"), op_type, base if k == 0 else f"{base}_{k}"))
    return ops


def _chained(kind: str, name: str, children: list[Container], attrs: dict | None = None,
             stream: str | None = None) -> Container:
    """``children`` chained through their first data port; a weight (no inputs) feeds the next
    MatMul, and a residual ``Add`` (its second port named ``skip``) also takes the value that
    entered the residual branch: the previous residual Add's output, else the output of the
    child named ``stream``, else the level's input."""
    edges: list[Any] = []
    prev = branch = f"{name}:x"
    weights: list[str] = []
    for child in children:
        if not child.inputs:
            weights.append(child.name)
            continue
        edges.append((prev, f"{child.name}:{child.inputs[0].name}"))
        if child.type == "MatMul" and weights:
            edges.append((f"{weights.pop(0)}:y", f"{child.name}:b"))
        prev = f"{child.name}:{child.outputs[0].name}"
        if child.name == stream:
            branch = prev
        if len(child.inputs) > 1 and child.inputs[1].name == "skip":
            edges.append((branch, f"{child.name}:skip"))
            branch = prev
    edges.append((prev, f"{name}:y"))
    return Container(kind, name, inputs=["x"], outputs=["y"], children=children, edges=edges, attrs=attrs or {})


def _leaf(op_type: str, name: str) -> Container:
    if op_type == "Constant":
        return op("Constant", name, [], ["y"])
    if op_type == "Residual":
        return op("Add", name, ["x", "skip"], ["y"])
    return op(op_type, name, ["a", "b"] if op_type == "MatMul" else ["x"], ["y"])


def flat_scoped(blocks: int) -> Container:
    """A flat graph of ``blocks`` blocks of 46 ops each and 5 more: each op named
    by its scope path (``/blocks/blocks.3/attn/qkv/MatMul``), each weight by its parameter
    name (``blocks.3.attn.qkv.weight``), all siblings at one level."""
    children = [_leaf("Conv", "/patch_embed/proj/Conv"), _leaf("Flatten", "/patch_embed/Flatten")]
    for b in range(blocks):
        for scope, op_type, own in _block_ops(f"/blocks/blocks.{b}"):
            if op_type == "Constant":
                children.append(_leaf("Constant", f"blocks.{b}.{own}"))
            else:
                children.append(_leaf(op_type, f"{scope}/{own}"))
    children += [_leaf("ReduceMean", "/head/ReduceMean"), _leaf("Gemm", "/head/fc/Gemm"), _leaf("Identity", "Identity_0")]
    return _chained("Graph", "vit", children, {"namespace": "amanda/onnx/17"}, stream="/patch_embed/Flatten")


def nested_scoped(blocks: int) -> Container:
    """The network of :func:`flat_scoped` as nested containers, one per module (``blocks`` /
    ``blocks.3`` / ``attn`` / ``qkv``), each op in the container of its innermost module."""

    def module(kind: str, name: str, items: list[tuple[tuple[str, ...], str, str]]) -> Container:
        children: list[Container] = []
        groups: dict[str, list] = {}
        order: list[tuple[str, Any]] = []
        for scope, op_type, own in items:
            if not scope:
                order.append(("op", _leaf(op_type, own)))
                continue
            if scope[0] not in groups:
                groups[scope[0]] = []
                order.append(("module", scope[0]))
            groups[scope[0]].append((scope[1:], op_type, own))
        for what, value in order:
            children.append(value if what == "op" else module(_KINDS.get(value, "Block"), value, groups[value]))
        return _chained(kind, name, children)

    items: list[tuple[tuple[str, ...], str, str]] = []
    for b in range(blocks):
        for scope, op_type, own in _block_ops(f"blocks/blocks.{b}"):
            items.append((tuple(scope.split("/")), op_type, own.rsplit(".", 1)[-1] if op_type == "Constant" else own))
    top = module("Blocks", "blocks", [(s[1:], t, o) for s, t, o in items])
    stem = _chained("PatchEmbed", "patch_embed", [_leaf("Conv", "Conv"), _leaf("Flatten", "Flatten")])
    head = _chained("Head", "head", [_leaf("ReduceMean", "ReduceMean"), _leaf("Gemm", "Gemm")])
    return _chained("Graph", "vit", [stem, top, head, _leaf("Identity", "Identity_0")], {"namespace": "amanda/onnx/17"})
