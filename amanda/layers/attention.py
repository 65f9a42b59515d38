"""Multi-head self-attention and a transformer encoder block over ``[batch, sequence, d_model]``.

>>> import amanda, numpy as np
>>> block = TransformerEncoder(16, 4, 32)
>>> [c.name for c in block.children if not c.is_op]
['attention', 'norm1', 'ffn1', 'ffn2', 'norm2']
>>> with amanda.Session(block) as session:
...     session.run(["y"], {"x": np.ones((2, 5, 16), np.float32)})[0].shape
(2, 5, 16)
"""

from __future__ import annotations

import numpy as np

from amanda.build import Value, ops
from amanda.containers.container import Container
from amanda.errors import ArgumentError
from amanda.layers.base import assemble, const, float_input, positive
from amanda.layers.core import Dense
from amanda.layers.init import Weights
from amanda.layers.norm import LayerNorm

__all__ = ["MultiHeadAttention", "TransformerEncoder"]


def _projection(w: Weights, x: Value, d: int, label: str, init: str) -> Value:
    kernel = w.add(f"{label}_kernel", (d, d), init, (d, d))
    bias = w.add(f"{label}_bias", (d,), "zeros", (d, d))
    return ops.Add(ops.MatMul(x, kernel, name=f"{label}_matmul"), bias, name=f"{label}_add")


def MultiHeadAttention(d_model: int, num_heads: int, *, init: str = "glorot_uniform",  # noqa: N802
                       name: str = "attention", seed: int | None = None) -> Container:
    """Scaled dot-product self-attention with ``num_heads`` heads of ``d_model / num_heads``
    features: ``softmax(q kᵀ / sqrt(d_head)) v`` per head, heads concatenated and projected."""
    d, h = positive("MultiHeadAttention", "d_model", d_model), positive("MultiHeadAttention", "num_heads", num_heads)
    if d % h:
        raise ArgumentError.at(("MultiHeadAttention", "num_heads"), f"a divisor of d_model ({d})", str(h))
    head = d // h
    x = float_input()
    w = Weights()
    split = const("split_shape", np.array([0, 0, h, head], np.int64))

    def heads(label: str, perm: list[int]) -> Value:
        projected = ops.Reshape(_projection(w, x, d, label, init), split, name=f"{label}_split")
        return ops.Transpose(projected, perm=perm, name=f"{label}_heads")

    q, k, v = heads("query", [0, 2, 1, 3]), heads("key", [0, 2, 3, 1]), heads("value", [0, 2, 1, 3])
    scores = ops.Mul(ops.MatMul(q, k, name="scores"), const("scale", np.float32(1 / np.sqrt(head))),
                     name="scaled")
    weights = ops.Softmax(scores, axis=-1, name="softmax")
    mixed = ops.Transpose(ops.MatMul(weights, v, name="mix"), perm=[0, 2, 1, 3], name="merge_heads")
    merged = ops.Reshape(mixed, const("merge_shape", np.array([0, 0, d], np.int64)), name="merge")
    y = _projection(w, merged, d, "output", init)
    return assemble("MultiHeadAttention", name, [x], y, {"d_model": d, "num_heads": h, "init": init, "weights": w.specs}, seed)


def TransformerEncoder(d_model: int, num_heads: int, d_ff: int, *, activation: str = "relu",  # noqa: N802
                       epsilon: float = 1e-5, name: str = "encoder", seed: int | None = None) -> Container:
    """A post-norm encoder block: ``y = norm1(x + attention(x))``, then
    ``norm2(y + ffn2(activation(ffn1(y))))``."""
    d, f = positive("TransformerEncoder", "d_model", d_model), positive("TransformerEncoder", "d_ff", d_ff)
    x = float_input()
    attended = MultiHeadAttention(d, num_heads)(x)
    y = LayerNorm(d, epsilon=epsilon, name="norm1")(ops.Add(x, attended, name="residual1"))
    hidden = Dense(f, d, name="ffn2")(Dense(d, f, activation=activation, name="ffn1")(y))
    out = LayerNorm(d, epsilon=epsilon, name="norm2")(ops.Add(y, hidden, name="residual2"))
    attrs = {"d_model": d, "num_heads": int(num_heads), "d_ff": f, "activation": activation, "epsilon": float(epsilon)}
    return assemble("TransformerEncoder", name, [x], out, attrs, seed)
