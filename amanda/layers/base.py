"""What every layer shares: argument checks, constants, activations, and assembling a layer
container from the builder's values (one computation, or one per phase).

A layer's ops are named inside it (``matmul``, ``kernel`` …), so the same code builds the same
paths; its weights have uids of their own, until :func:`amanda.layers.init.seeded` keys them by path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from amanda.build import Input, Value, model, ops
from amanda.build.builder import DEFAULT_NAMESPACE
from amanda.containers.arguments import brief, shown
from amanda.containers.container import Container
from amanda.containers.edge import CONTROL, SELF, Edge, Endpoint, Port
from amanda.errors import ArgumentError, suggest
from amanda.layers.init import drawn, layer_seed, weight_value

__all__ = ["ACTIVATIONS", "activate", "assemble", "assemble_phased", "const", "first", "flag", "float_input",
           "positive", "sizes"]


def positive(layer: str, field: str, value: Any, zero: bool = False) -> int:
    """``value`` as an int > 0 (>= 0 with ``zero``), else an ArgumentError at ``layer/field``."""
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool) and (value >= 0 if zero else value > 0)
    if not ok:
        raise ArgumentError.at((layer, field), "a non-negative int" if zero else "a positive int", brief(value))
    return int(value)


def sizes(layer: str, field: str, value: Any, dims: int, zero: bool = False) -> tuple[int, ...]:
    """One int per spatial dimension: an int is repeated, a sequence must have ``dims`` entries."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != dims:
            raise ArgumentError.at((layer, field), f"{dims} sizes (one per spatial dimension)", brief(value))
        return tuple(positive(layer, field, v, zero) for v in value)
    return (positive(layer, field, value, zero),) * dims


def flag(layer: str, field: str, value: Any) -> bool:
    """``value`` if it is True or False, else an ArgumentError at ``layer/field``."""
    if value is True or value is False or isinstance(value, np.bool_):
        return bool(value)
    raise ArgumentError.at((layer, field), "True or False", shown(value))


def probability(layer: str, field: str, value: Any) -> float:
    """``value`` as a float in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) or not 0 <= value < 1:
        raise ArgumentError.at((layer, field), "a number in [0, 1)", brief(value))
    return float(value)


def first(outputs: Value | tuple[Value, ...]) -> Value:
    """An op's first output, the op keeping only that output (ONNX's optional extra outputs,
    such as MaxPool's indices or inference-mode BatchNormalization's statistics, are left out)."""
    if isinstance(outputs, Value):
        return outputs
    value = outputs[0]
    call = value.producer
    assert call is not None  # an op's output
    call.op = call.op.evolve(outputs=[call.op.outputs[0]])
    return value


def const(name: str, value: Any) -> Value:
    """A named Constant (not a weight) as a Value: shapes, axes, scalars."""
    array = np.asarray(value)
    op = Container("Constant", name, inputs=(), outputs=["output"], attrs={"value": array, "namespace": DEFAULT_NAMESPACE,
                                                            "initializer": True})
    return weight_value(op)


def float_input(name: str = "x") -> Value:
    """A layer's input: float32 of any shape (the types come from what it is applied to)."""
    return Input(name, "float32")


def _gelu(x: Value, name: str) -> Value:
    # exact GELU, 0.5 x (1 + erf(x / sqrt 2)): opset 17 has no Gelu op
    scaled = ops.Mul(x, const(f"{name}_rsqrt2", np.float32(1 / np.sqrt(2))), name=f"{name}_scale")
    erf = ops.Add(ops.Erf(scaled, name=f"{name}_erf"), const(f"{name}_one", np.float32(1)), name=f"{name}_add")
    return ops.Mul(ops.Mul(x, erf, name=f"{name}_mul"), const(f"{name}_half", np.float32(0.5)), name=name)


def _silu(x: Value, name: str) -> Value:
    return ops.Mul(x, ops.Sigmoid(x, name=f"{name}_sigmoid"), name=name)


#: activation functions by name, each ``fn(value, op_name) -> value``
ACTIVATIONS: dict[str, Callable[[Value, str], Value]] = {
    "relu": lambda x, n: ops.Relu(x, name=n),
    "gelu": _gelu,
    "sigmoid": lambda x, n: ops.Sigmoid(x, name=n),
    "tanh": lambda x, n: ops.Tanh(x, name=n),
    "softmax": lambda x, n: ops.Softmax(x, axis=-1, name=n),
    "log_softmax": lambda x, n: ops.LogSoftmax(x, axis=-1, name=n),
    "leaky_relu": lambda x, n: ops.LeakyRelu(x, alpha=0.01, name=n),
    "elu": lambda x, n: ops.Elu(x, name=n),
    "selu": lambda x, n: ops.Selu(x, name=n),
    "softplus": lambda x, n: ops.Softplus(x, name=n),
    "silu": _silu,
}


def activate(layer: str, x: Value, activation: str | None, name: str = "activation") -> Value:
    """``x`` through the named activation (None: unchanged)."""
    if activation is None:
        return x
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise ArgumentError.at((layer, "activation"), f"None or one of {sorted(ACTIVATIONS)}", shown(activation),
                               suggest(activation, ACTIVATIONS))
    return ACTIVATIONS[activation](x, name)


def assemble(type_: str, name: str, inputs: list[Value], outputs: Value | Mapping[str, Value],
             attrs: Mapping[str, Any], seed: int | None) -> Container:
    """The layer container: the ops between ``inputs`` and ``outputs`` (one Value is output
    ``y``), hyper-parameters in its attributes, weights with uids of their own, drawn from
    ``seed`` (None: from this layer instance) and their paths (:func:`~amanda.layers.init.drawn`)."""
    if not isinstance(name, str) or not name or "/" in name:
        raise ArgumentError.at((type_, "name"), "a non-empty layer name without '/'", brief(name))
    outs = {"y": outputs} if isinstance(outputs, Value) else outputs
    seed = layer_seed(type_, seed)
    built = model(inputs, outs, name=name, type=type_, attrs=dict(attrs))
    return drawn(built, seed, prefix=(name,))


def assemble_phased(type_: str, name: str, x: Value, by_phase: Mapping[str, Value], updates: Sequence[Value],
                    attrs: Mapping[str, Any], seed: int | None) -> Container:
    """A layer with one output ``y`` per phase (edges tagged with the phase) and a ``train``
    control port that the ``updates`` (ops run for their effects in training) link to."""
    outs = {f"y_{phase}": value for phase, value in by_phase.items()}
    outs.update({f"update_{i}": value for i, value in enumerate(updates)})
    built = assemble(type_, name, [x], outs, attrs, seed)
    edges: list[Edge] = []
    for edge in built.edges:
        port = edge.dst.port
        if edge.dst.op != SELF or not isinstance(port, str):
            edges.append(edge)
        elif port.startswith("y_"):
            edges.append(Edge(edge.src, Endpoint(SELF, "y"), attrs={"phase": port[2:]}))
        elif port.startswith("update_"):
            edges.append(Edge(Endpoint(edge.src.op, CONTROL), Endpoint(SELF, "train"), attrs={"phase": "train"}))
        else:
            edges.append(edge)
    first = next(p for p in built.outputs if p.name.startswith("y_"))
    return Container(built.type, built.name, inputs=built.inputs, outputs=[Port("y", attrs=first.attrs)], children=built.children,
                     edges=edges,
                     tombstones=(), attrs=built.attrs, uid=built.uid, controls=["train"])
