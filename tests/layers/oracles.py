"""Plain-numpy computations the layer tests compare against, and a helper that runs one layer
(in amanda, and in onnxruntime on its export) on typed inputs."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

import amanda
from amanda import layers
from amanda.io.onnx import to_onnx


def run(layer: amanda.Container, x: np.ndarray, phase: str | None = None, fetch: tuple = ("y",)) -> list:
    """The layer's outputs for input ``x`` on the sequential interpreter."""
    with amanda.Session(layer, threads=1) as session:
        return session.run(list(fetch), {layer.input_names[0]: x}, phase=phase)


def typed(layer: amanda.Container, x: np.ndarray) -> amanda.Container:
    """``layer`` inside a model whose input has ``x``'s dtype and shape (what ONNX export needs)."""
    value = amanda.Input("x", str(x.dtype), x.shape)
    return amanda.model([value], {"y": layer(value)}, name="net")


def onnxruntime_run(layer: amanda.Container, x: np.ndarray) -> np.ndarray:
    """What onnxruntime computes for the layer's inference computation, exported."""
    import onnxruntime as ort

    proto = to_onnx(layers.freeze(typed(layer, x)))
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def same_pads(size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """ONNX SAME_UPPER padding (before, after) for one dimension."""
    out = -(-size // stride)
    total = max(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - size)
    return total // 2, total - total // 2


def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple, pads: list[tuple[int, int]],
         dilation: tuple, groups: int) -> np.ndarray:
    """A grouped, strided, dilated N-d convolution by explicit windows (float64)."""
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0), *pads])
    n, cin = x.shape[:2]
    cout, cg = w.shape[:2]
    kernel = w.shape[2:]
    spatial = x.shape[2:]
    out_shape = [(spatial[i] - (kernel[i] - 1) * dilation[i] - 1) // stride[i] + 1 for i in range(len(kernel))]
    y = np.zeros((n, cout, *out_shape))
    per_group = cout // groups
    for pos in itertools.product(*(range(s) for s in out_shape)):
        window = tuple(slice(pos[i] * stride[i], pos[i] * stride[i] + (kernel[i] - 1) * dilation[i] + 1, dilation[i])
                       for i in range(len(kernel)))
        for g in range(groups):
            patch = x[(slice(None), slice(g * cg, (g + 1) * cg), *window)]  # n, cg, *kernel
            ws = w[g * per_group:(g + 1) * per_group]  # per_group, cg, *kernel
            y[(slice(None), slice(g * per_group, (g + 1) * per_group), *pos)] = np.tensordot(
                patch, ws, axes=(list(range(1, patch.ndim)), list(range(1, ws.ndim))))
    if b is not None:
        y += b.reshape(1, -1, *[1] * len(kernel))
    return y


def pool(x: np.ndarray, kernel: tuple, stride: tuple, pads: list[tuple[int, int]], kind: str) -> np.ndarray:
    """Max or average pooling (padding not counted in the average)."""
    fill = -np.inf if kind == "max" else np.nan
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0), *pads], constant_values=fill)
    out_shape = [(x.shape[2 + i] - kernel[i]) // stride[i] + 1 for i in range(len(kernel))]
    y = np.zeros((*x.shape[:2], *out_shape))
    for pos in itertools.product(*(range(s) for s in out_shape)):
        window = x[(slice(None), slice(None), *(slice(p * s, p * s + k) for p, s, k in zip(pos, stride, kernel)))]
        flat = window.reshape(*x.shape[:2], -1)
        y[(slice(None), slice(None), *pos)] = flat.max(-1) if kind == "max" else np.nanmean(flat, -1)
    return y


def layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale + bias


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


ACTIVATIONS: dict[str, Any] = {
    "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "softmax": softmax,
    "log_softmax": lambda x: np.log(softmax(x)),
    "leaky_relu": lambda x: np.where(x > 0, x, 0.01 * x),
    "elu": lambda x: np.where(x > 0, x, np.exp(x) - 1),
    "selu": lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * (np.exp(x) - 1)),
    "softplus": lambda x: np.log1p(np.exp(x)),
    "silu": lambda x: x / (1 + np.exp(-x)),
}


def attention(x: np.ndarray, w: dict[str, np.ndarray], heads: int) -> np.ndarray:
    """Multi-head self-attention: q, k, v projections, per-head softmax(q kᵀ / sqrt(d)) v, output."""
    n, s, d = x.shape
    hd = d // heads

    def split(t: np.ndarray) -> np.ndarray:
        return t.reshape(n, s, heads, hd).transpose(0, 2, 1, 3)

    q, k, v = (split(x @ w[f"{p}_kernel"] + w[f"{p}_bias"]) for p in ("query", "key", "value"))
    scores = softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd))
    mixed = (scores @ v).transpose(0, 2, 1, 3).reshape(n, s, d)
    return mixed @ w["output_kernel"] + w["output_bias"]


def arrays(layer: amanda.Container) -> dict[str, np.ndarray]:
    """The layer's weights by name (its direct children's values)."""
    names = layer.attrs.get("weights") or {}
    return {c.name: np.asarray(c.attrs["value"]) for c in layer.children if c.name in names}
