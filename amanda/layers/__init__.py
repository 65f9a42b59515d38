"""Layers as functions returning containers (docs/layers.md): each container's ``type`` is the
layer's name, its attributes hold the hyper-parameters, and its weights are ``Constant``
initializers drawn from a numpy Generator. Every layer instance has weights (uids) of its own;
:func:`seeded` keys a whole model's weights by their paths, and weights are shared only on
purpose (one layer applied twice, :func:`tie`; listed by :func:`shared`).

Layers compose with ``chain``, ``named_merge``, ``a >> b`` and ``b(a)``, and apply to the op
builder's symbolic values (``Dense(784, 64)(x)`` is a Value).

>>> import amanda
>>> from amanda import layers
>>> mlp = layers.Dense(784, 64, activation="relu") >> layers.Dense(64, 10)
>>> [(c.name, c.type) for c in mlp.children]
[('dense', 'Dense'), ('dense_1', 'Dense')]
"""

from amanda.layers.attention import MultiHeadAttention, TransformerEncoder
from amanda.layers.base import ACTIVATIONS
from amanda.layers.conv import AvgPool, Conv, Conv1D, Conv2D, Conv3D, GlobalAvgPool, MaxPool
from amanda.layers.core import (
    Activation,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    Reshape,
    elu,
    gelu,
    leaky_relu,
    log_softmax,
    relu,
    selu,
    sigmoid,
    silu,
    softmax,
    softplus,
    tanh,
)
from amanda.layers.init import RULES, seeded
from amanda.layers.norm import BatchNorm, LayerNorm, freeze
from amanda.layers.sharing import shared, tie

__all__ = [
    "ACTIVATIONS",
    "Activation",
    "AvgPool",
    "BatchNorm",
    "Conv",
    "Conv1D",
    "Conv2D",
    "Conv3D",
    "Dense",
    "Dropout",
    "Embedding",
    "Flatten",
    "GlobalAvgPool",
    "LayerNorm",
    "MaxPool",
    "MultiHeadAttention",
    "RULES",
    "Reshape",
    "TransformerEncoder",
    "elu",
    "freeze",
    "gelu",
    "leaky_relu",
    "log_softmax",
    "relu",
    "seeded",
    "selu",
    "shared",
    "sigmoid",
    "silu",
    "softmax",
    "softplus",
    "tanh",
    "tie",
]
