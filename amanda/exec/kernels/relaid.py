"""Copies of a model's weights in the layout a kernel reads, made once per read-only array.

A model's weights are read-only constants that every run passes again, so a kernel that wants
them transposed or packed (the conv layouts of ``conv_last.py``, Gemm's transposed product) keeps
its copy instead of making it on each run. The copy lives as long as the weight array does, or
until :func:`forget` says the array was written in place.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from amanda.containers.lazy import is_mapped

__all__ = ["RELAID", "forget", "mark_constant", "relaid", "relaid_if_constant"]

# (id(weight), layout) -> (weak reference to the weight, its relaid copy)
RELAID: dict[tuple[int, Any], tuple[Any, np.ndarray]] = {}
# id(weight) -> the layouts RELAID holds for it (forget)
_LAYOUTS: dict[int, set[Any]] = {}
# id(array) -> weak reference: read-only arrays plans hold as constants (mark_constant)
_CONSTANT: dict[int, Any] = {}


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
        _LAYOUTS.setdefault(key[0], set()).add(layout)
        weakref.finalize(w, _drop, key)
    return copy


def _drop(key: tuple[int, Any]) -> None:
    RELAID.pop(key, None)
    layouts = _LAYOUTS.get(key[0])
    if layouts is not None:
        layouts.discard(key[1])
        if not layouts:
            _LAYOUTS.pop(key[0], None)


def forget(w: np.ndarray) -> None:
    """Drop the copies kept for ``w``, whose values were just written in place (an optimiser's
    update of a stored weight nothing else refers to, :mod:`amanda.exec.update_in_place`).

    >>> w = np.ones(2)
    >>> w.flags.writeable = False
    >>> first = relaid(w, "doc", lambda w: w * 2)
    >>> forget(w)
    >>> relaid(w, "doc", lambda w: w * 2) is first
    False
    """
    for layout in _LAYOUTS.pop(id(w), ()):
        RELAID.pop((id(w), layout), None)


def _forget(key: int, _: Any) -> None:
    _CONSTANT.pop(key, None)


def mark_constant(w: Any) -> None:
    """Note that a plan holds the read-only array ``w`` as a constant (a folded ``Constant``'s
    value, passed again on every run): :func:`relaid_if_constant` keeps its copies from its
    first product on. A writeable array (or anything else) is not marked."""
    if isinstance(w, np.ndarray) and not w.flags.writeable and not is_mapped(w):
        key = id(w)
        _CONSTANT[key] = weakref.ref(w, partial(_forget, key))


def relaid_if_constant(w: np.ndarray, layout: Any, make: Callable[[np.ndarray], np.ndarray]) -> np.ndarray | None:
    """:func:`relaid` for an array a plan holds as a constant (:func:`mark_constant`), None for
    any other: a copy a kernel can do without.

    Which path a product takes depends only on its arguments, never on the calls before it, so
    a run gives the same bits as the run before (a copy made from an array's second meeting on
    gave its first product other last bits). A variable's value is a new array after each
    update (a training step), which a copy per call would cost more than it saves, so it
    never gets one; nor does a weight read through the memory map of its file (a lazy
    weight), which the OS can page out as a copy could not.

    >>> w = np.arange(6.0).reshape(2, 3)
    >>> w.flags.writeable = False
    >>> relaid_if_constant(w, "doc", lambda w: w.T.copy()) is None
    True
    >>> mark_constant(w)
    >>> relaid_if_constant(w, "doc", lambda w: w.T.copy()).shape
    (3, 2)
    """
    known = _CONSTANT.get(id(w))
    if known is None or known() is not w:
        return None
    return relaid(w, layout, make)
