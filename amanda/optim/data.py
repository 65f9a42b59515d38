"""Data for :func:`amanda.optim.fit`: feeds from numpy arrays or an iterable of batches, the
validation split, and the batches of an epoch.

``x`` is an array (fed to the model's first input, ``y`` to its second), a mapping of input
names to arrays of one length, or an iterable of batches (each a mapping, or an ``(x, y)``
pair read as above). The validation split takes the *last* ``fraction`` of the rows, before
any shuffling, as Keras does.

>>> import numpy as np
>>> train, held = split({"x": np.arange(10)}, 0.2)
>>> train["x"].tolist(), held["x"].tolist()
([0, 1, 2, 3, 4, 5, 6, 7], [8, 9])
>>> [b["x"].tolist() for b in batches({"x": np.arange(5)}, np.arange(5), 2)]
[[0, 1], [2, 3], [4]]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from amanda.containers import Container
from amanda.containers.arguments import shown
from amanda.errors import ArgumentError, suggest

__all__ = ["batches", "feeds_of", "split"]


def _named(model: Container, x: Any, y: Any, where: str) -> dict[str, Any]:
    names = model.input_names
    if isinstance(x, Mapping):
        out = dict(x)
        for name in out:
            if name not in names:
                raise ArgumentError.at((where, name), f"an input of {model.name}: {list(names)}", repr(name),
                                       suggest(str(name), names))
        if y is not None:
            raise ArgumentError.at(where, "y=None when x is a mapping (put the labels in it)", "y given")
        return out
    if not names:
        raise ArgumentError.at(model.name, "a model with inputs", "none")
    out = {names[0]: x}
    if y is not None:
        if len(names) < 2:
            raise ArgumentError.at(where, f"no y: {model.name} has one input", "y given")
        out[names[1]] = y
    return out


def _array(value: Any, where: str, name: str) -> np.ndarray:
    """``value`` (fed to input ``name``) as an array; an ArgumentError at ``where/name`` for one
    numpy cannot make (a ragged list, an object that is no array)."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError):
        array = None
    if array is None or array.dtype == object:
        raise ArgumentError.at((where, name), "an array (rows are samples)", shown(value))
    return array


def feeds_of(model: Container, x: Any, y: Any = None, where: str = "x") -> dict[str, np.ndarray] | list[Any]:
    """The feeds as arrays of one length (a dict), or an iterable of batches as given (read
    again with ``iter()`` each epoch, so a list rather than a generator)."""
    if isinstance(x, np.ndarray) or isinstance(x, Mapping):
        feeds = {k: _array(v, where, k) for k, v in _named(model, x, y, where).items()}
        lengths = {k: (len(v) if v.ndim else None) for k, v in feeds.items()}
        if len(set(lengths.values())) != 1 or None in lengths.values():
            raise ArgumentError.at(where, "arrays of one length (rows are samples)", repr(lengths))
        return feeds
    if isinstance(x, Iterable) and not isinstance(x, (str, bytes)):
        if y is not None:
            raise ArgumentError.at(where, "y=None when x is an iterable of batches", "y given")
        return x  # type: ignore[return-value]
    raise ArgumentError.at(where, "a numpy array, a mapping of input names to arrays, or an iterable of batches",
                           type(x).__name__)


def batch_feeds(model: Container, item: Any, where: str) -> dict[str, Any]:
    """One batch of an iterable as feeds: a mapping, or an ``(x, y)`` pair."""
    if isinstance(item, tuple) and len(item) == 2:
        return _named(model, item[0], item[1], where)
    if isinstance(item, (Mapping, np.ndarray)):
        return _named(model, item, None, where)
    raise ArgumentError.at(where, "batches that are mappings of feeds or (x, y) pairs", type(item).__name__)


def rows(feeds: Mapping[str, np.ndarray]) -> int:
    """The number of samples of array feeds."""
    return len(next(iter(feeds.values())))


def split(feeds: Mapping[str, np.ndarray], fraction: float) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(train, validation)``: the validation part is the last ``fraction`` of the rows."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 < fraction < 1.0:
        raise ArgumentError.at("validation_split", "a number in (0, 1)", shown(fraction))
    at = int(rows(feeds) * (1.0 - fraction))
    if at == 0 or at == rows(feeds):
        raise ArgumentError.at("validation_split", f"a fraction leaving rows on both sides of {rows(feeds)}",
                               repr(fraction))
    return {k: v[:at] for k, v in feeds.items()}, {k: v[at:] for k, v in feeds.items()}


def batches(feeds: Mapping[str, np.ndarray], order: np.ndarray, size: int) -> Iterator[dict[str, np.ndarray]]:
    """The feeds of consecutive runs of ``size`` rows of ``order`` (the last one may be shorter)."""
    for start in range(0, len(order), size):
        index = order[start:start + size]
        yield {k: v[index] for k, v in feeds.items()}
