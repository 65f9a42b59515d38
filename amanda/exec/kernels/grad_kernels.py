"""Kernels of the ``amanda/train`` namespace: fused optimiser steps.

An Adam step written with ONNX ops is about fifteen elementwise ops per weight; for small
models the executor's per-op cost dominates, so the optimisers use one ``AdamStep`` op per
weight (its new value and moments, assigned by ``Assign`` ops as before). It follows
torch.optim.Adam's arithmetic, with ``decoupled`` for AdamW's weight decay. An optional sixth
input ``lr`` (a scalar: a learning-rate schedule's value this step) replaces the ``lr`` attribute.
A scalar (0-d) weight is stepped as a one-element vector.

>>> import numpy as np
>>> w, g = np.ones(2, np.float32), np.array([1.0, -1.0], np.float32)
>>> new, m, v = adam_step({"lr": 0.1}, w, g, np.zeros(2, np.float32), np.zeros(2, np.float32), np.float32(1))
>>> [round(float(x), 4) for x in new], [round(float(x), 4) for x in m]
([0.9, 1.1], [0.1, -0.1])
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.exec.kernels.registry import kernel

__all__ = ["TRAIN", "adam_arithmetic", "adam_step"]

TRAIN = "amanda/train"


@kernel("AdamStep", family=TRAIN)
def adam_step(attrs: Mapping[str, Any], w: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray,
              step: np.ndarray, rate: np.ndarray | None = None) -> tuple:
    """``(weight, m, v)`` after one Adam step at step count ``step`` (already counted), at the
    rate ``rate`` when given, else the ``lr`` attribute."""
    shape = np.shape(w)
    if not shape:  # a scalar weight: numpy would give scalars, which cannot be written into
        w1, g1, m1, v1 = (np.reshape(a, (1,)) for a in (w, g, m, v))
        made = adam_arithmetic(attrs, w1, g1, m1, v1, step, rate)
        return tuple(a.reshape(shape) for a in made)
    return adam_arithmetic(attrs, w, g, m, v, step, rate)


def adam_arithmetic(attrs: Mapping[str, Any], w: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray,
                    step: np.ndarray, rate: np.ndarray | None = None, in_place: bool = False) -> tuple:
    """:func:`adam_step` on arrays of at least one dimension; ``in_place`` writes the new
    weight and moments into ``w``, ``m`` and ``v`` (writeable, of one dtype) by the same
    operations in the same order, so both give the same bits."""
    lr = float(attrs.get("lr", 1e-3)) if rate is None else float(rate)
    b1, b2 = float(attrs.get("beta1", 0.9)), float(attrs.get("beta2", 0.999))
    eps, decay = float(attrs.get("eps", 1e-8)), float(attrs.get("weight_decay", 0.0))
    t = float(step)
    dtype = w.dtype.type
    if decay and int(attrs.get("decoupled", 0)):
        w = np.multiply(w, dtype(1 - lr * decay), out=w if in_place else None)
    elif decay:
        g = g + w * dtype(decay)
    m_new = np.multiply(m, dtype(b1), out=m if in_place else None)
    scratch = g * dtype(1 - b1)
    m_new += scratch
    v_new = np.multiply(v, dtype(b2), out=v if in_place else None)
    np.multiply(g, g, out=scratch)
    scratch *= dtype(1 - b2)
    v_new += scratch
    np.sqrt(v_new, out=scratch)
    scratch /= dtype(math.sqrt(1 - b2 ** t))
    scratch += dtype(eps)
    np.divide(m_new, scratch, out=scratch)
    scratch *= dtype(lr / (1 - b1 ** t))
    return np.subtract(w, scratch, out=w if in_place else scratch), m_new, v_new
