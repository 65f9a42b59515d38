"""Dense, Embedding, Flatten, Reshape, Dropout and the activations.

Every layer has one input ``x`` (``ids`` for Embedding) and one output ``y``, so layers chain:

>>> import amanda, numpy as np
>>> net = Dense(4, 8, activation="relu", name="hidden") >> Dense(8, 2, name="out")
>>> net.child("hidden").type, dict(net.child("hidden").attrs)["units"]
('Dense', 8)
>>> with amanda.Session(net) as session:
...     session.run(["y"], {"x": np.ones((3, 4), np.float32)})[0].shape
(3, 2)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from amanda.build import Input, ops
from amanda.containers.arguments import brief, shown
from amanda.containers.container import Container
from amanda.errors import ArgumentError
from amanda.layers.base import (
    ACTIVATIONS,
    activate,
    assemble,
    assemble_phased,
    const,
    first,
    flag,
    float_input,
    positive,
    probability,
)
from amanda.layers.init import Weights
from amanda.namespaces.schema import suggest

__all__ = ["Activation", "Dense", "Dropout", "Embedding", "Flatten", "Reshape", "elu", "gelu", "leaky_relu",
           "log_softmax", "relu", "selu", "sigmoid", "silu", "softmax", "softplus", "tanh"]


def Dense(in_features: int, units: int, *, activation: str | None = None, use_bias: bool = True,  # noqa: N802
          init: str = "glorot_uniform", name: str = "dense", seed: int | None = None) -> Container:
    """``y = activation(x @ kernel + bias)`` over the last axis; ``kernel`` is
    ``[in_features, units]`` (Glorot-uniform unless ``init`` says otherwise), ``bias`` zeros."""
    fan_in, units = positive("Dense", "in_features", in_features), positive("Dense", "units", units)
    x = float_input()
    w = Weights()
    bias = flag("Dense", "use_bias", use_bias)
    y = ops.MatMul(x, w.add("kernel", (fan_in, units), init, (fan_in, units)), name="matmul")
    if bias:
        y = ops.Add(y, w.add("bias", (units,), "zeros", (fan_in, units)), name="add")
    y = activate("Dense", y, activation)
    return assemble("Dense", name, [x], y, {"in_features": fan_in, "units": units, "use_bias": bias,
                                             "activation": activation, "init": init, "weights": w.specs}, seed)


def Embedding(num_embeddings: int, dim: int, *, init: str = "normal", name: str = "embedding",  # noqa: N802
              seed: int | None = None) -> Container:
    """Rows of a ``[num_embeddings, dim]`` table picked by the int64 input ``ids``."""
    rows, dim = positive("Embedding", "num_embeddings", num_embeddings), positive("Embedding", "dim", dim)
    ids = Input("ids", "int64")
    w = Weights()
    y = ops.Gather(w.add("table", (rows, dim), init, (rows, dim)), ids, axis=0, name="gather")
    return assemble("Embedding", name, [ids], y, {"num_embeddings": rows, "dim": dim, "init": init,
                                                  "weights": w.specs}, seed)


def Flatten(axis: int = 1, *, name: str = "flatten") -> Container:  # noqa: N802
    """``x`` as a matrix: the axes before ``axis`` become rows, the rest columns."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise ArgumentError.at(("Flatten", "axis"), "an int", brief(axis))
    x = float_input()
    return assemble("Flatten", name, [x], ops.Flatten(x, axis=int(axis), name="flatten"), {"axis": int(axis)}, 0)


def Reshape(shape: Sequence[int], *, name: str = "reshape") -> Container:  # noqa: N802
    """Each sample reshaped to ``shape`` (the batch axis is kept; one entry may be -1)."""
    ok = isinstance(shape, Sequence) and not isinstance(shape, str) and all(
        isinstance(d, (int, np.integer)) and not isinstance(d, bool) and (d > 0 or d == -1) for d in shape)
    if not ok or list(shape).count(-1) > 1:
        raise ArgumentError.at(("Reshape", "shape"), "a sequence of positive sizes with at most one -1", brief(shape))
    x = float_input()
    target = const("shape", np.array([0, *shape], np.int64))  # 0: keep the batch size
    y = ops.Reshape(x, target, name="reshape")
    return assemble("Reshape", name, [x], y, {"shape": tuple(int(d) for d in shape)}, 0)


def Dropout(rate: float = 0.5, *, name: str = "dropout") -> Container:  # noqa: N802
    """In the ``train`` phase, zero each element with probability ``rate`` and scale the rest
    by ``1 / (1 - rate)``; in ``inference``, the identity."""
    ratio = probability("Dropout", "rate", rate)
    x = float_input()
    train = first(ops.Dropout(x, const("ratio", np.float32(ratio)), const("training_mode", np.bool_(True)),
                              name="drop"))
    infer = ops.Identity(x, name="identity")
    return assemble_phased("Dropout", name, x, {"train": train, "inference": infer}, [], {"rate": ratio}, 0)


def Activation(activation: str, *, name: str | None = None) -> Container:  # noqa: N802
    """The named activation (``relu``, ``gelu``, ``sigmoid``, ``tanh``, ``softmax`` over the last
    axis, ``leaky_relu`` (slope 0.01), ``elu``, ``selu``, ``softplus``, ``silu``, ``log_softmax``)."""
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise ArgumentError.at(("Activation", "activation"), f"one of {sorted(ACTIVATIONS)}", shown(activation),
                               suggest(activation, ACTIVATIONS))
    x = float_input()
    label = activation if name is None else name
    return assemble("Activation", label, [x], activate("Activation", x, activation, "apply"),
                    {"activation": activation}, 0)


def _named(kind: str) -> Any:
    def layer(*, name: str | None = None) -> Container:
        return Activation(kind, name=name)

    layer.__name__ = layer.__qualname__ = kind
    layer.__doc__ = f"The ``{kind}`` activation as a layer: ``Activation({kind!r})``."
    return layer


relu = _named("relu")
gelu = _named("gelu")
sigmoid = _named("sigmoid")
tanh = _named("tanh")
softmax = _named("softmax")
log_softmax = _named("log_softmax")
leaky_relu = _named("leaky_relu")
elu = _named("elu")
selu = _named("selu")
softplus = _named("softplus")
silu = _named("silu")
