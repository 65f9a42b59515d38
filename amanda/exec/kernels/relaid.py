"""Copies of a model's weights in the layout a kernel reads, made once per read-only array.

A model's weights are read-only constants that every run passes again, so a kernel that wants
them transposed or packed (the conv layouts of ``conv_last.py``, Gemm's transposed product) keeps
its copy instead of making it on each run. The copy lives as long as the weight array does.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from amanda.containers.lazy import is_mapped

__all__ = ["RELAID", "relaid", "relaid_if_seen"]

# (id(weight), layout) -> (weak reference to the weight, its relaid copy)
RELAID: dict[tuple[int, Any], tuple[Any, np.ndarray]] = {}
# (id(array), layout) -> weak reference: read-only arrays relaid_if_seen has met once
_SEEN: dict[tuple[int, Any], Any] = {}


def relaid(w: np.ndarray, layout: Any, make: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``make(w)``, kept for a read-only ``w`` (until it is freed) under ``(id(w), layout)``;
    a writeable ``w`` may change between calls, so its copy is made afresh each time.

    >>> w = np.arange(6.0).reshape(2, 3)
    >>> w.flags.writeable = False
    >>> relaid(w, "T", lambda w: np.ascontiguousarray(w.T)) is relaid(w, "T", lambda w: w.T.copy())
    True
    """
    key = (id(w), layout)
    hit = RELAID.get(key)
    if hit is not None and hit[0]() is w:
        return hit[1]
    copy = make(w)
    if not w.flags.writeable:
        RELAID[key] = (weakref.ref(w), copy)
        weakref.finalize(w, RELAID.pop, key, None)
    return copy


def _forget(key: tuple[int, Any], _: Any) -> None:
    _SEEN.pop(key, None)


def relaid_if_seen(w: np.ndarray, layout: Any, make: Callable[[np.ndarray], np.ndarray]) -> np.ndarray | None:
    """Like :func:`relaid` for a copy a kernel can do without: None the first time a read-only
    ``w`` is met (and for a writeable one), the kept copy from the second time on.

    A model's constant weights come back on every run and get their copy from the second run;
    a variable's value is a new array after each update (a training step), which a copy per
    call would cost more than it saves, so it never gets one; nor does a weight read through
    the memory map of its file (a lazy weight), which the OS can page out as a copy could not.

    >>> w = np.arange(6.0).reshape(2, 3)
    >>> w.flags.writeable = False
    >>> relaid_if_seen(w, "doc", lambda w: w.T.copy()) is None
    True
    >>> relaid_if_seen(w, "doc", lambda w: w.T.copy()).shape
    (3, 2)
    """
    key = (id(w), layout)
    hit = RELAID.get(key)
    if hit is not None and hit[0]() is w:
        return hit[1]
    if w.flags.writeable or is_mapped(w):
        return None  # a weight mapped from its file: a kept copy would pin what the OS can page out
    seen = _SEEN.get(key)
    if seen is None or seen() is not w:
        _SEEN[key] = weakref.ref(w, partial(_forget, key))
        return None
    _SEEN.pop(key, None)  # not del: another thread may have met it at the same time
    return relaid(w, layout, make)
