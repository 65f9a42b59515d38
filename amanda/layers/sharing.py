"""Shared weights, made on purpose and shown: :func:`tie` and :func:`shared`.

Every layer instance has weights of its own. A weight is shared only when asked: by applying
one layer object twice (its second place is renamed ``dense_1`` and holds the same weights), or
by :func:`tie`, which puts one weight in other places. A shared weight is one uid at several
paths, with the same content in each; :func:`shared` lists them, and a session, an optimiser
and a weights file each hold it once.

>>> import amanda
>>> from amanda import layers
>>> dense = layers.Dense(3, 3, name="d")
>>> x = amanda.Input("x", "float32", (1, 3))
>>> twice = amanda.model([x], {"y": dense(dense(x))}, name="twice")
>>> [["/".join(p) for p in paths] for paths in shared(twice).values()]
[['d/kernel', 'd_1/kernel'], ['d/bias', 'd_1/bias']]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from amanda.containers.arguments import expect_container
from amanda.containers.container import Container
from amanda.containers.records import Path
from amanda.containers.uids import uid_places
from amanda.containers.update import replace, target_paths
from amanda.errors import ArgumentError, format_path

__all__ = ["shared", "tie"]


def _weight(model: Container, path: Path) -> Container:
    node = model.descendant(path)
    if not node.is_op or not isinstance(node.attrs.get("value"), np.ndarray):
        raise ArgumentError.at(format_path(path), "a weight (an op holding an array `value`)",
                               f"{node.type} {'container' if node.children else 'op'} without an array value")
    return node


def _one(model: Container, where: Any, label: str) -> Path:
    paths = target_paths(model, where)
    if len(paths) != 1:
        raise ArgumentError.at(label, "the path of one weight", f"{len(paths)} paths: {[format_path(p) for p in paths]}")
    return tuple(paths[0])


def tie(model: Container, source: Any, *targets: Any) -> Container:
    """``model`` with the weight at each of ``targets`` replaced by the weight at ``source``
    (same uid and value, each keeping its own name): one weight, trained, saved and loaded once.
    Paths are tuples or ``/``-joined strings; each target must have the source's type, dtype and
    shape. Tie before training (:func:`amanda.optim.minimize`), as weights are variables after.

    >>> import amanda, numpy as np
    >>> from amanda import layers
    >>> net = tie(layers.Dense(4, 4) >> layers.Dense(4, 4), "dense/kernel", "dense_1/kernel")
    >>> a, b = (net.descendant((n, "kernel")) for n in ("dense", "dense_1"))
    >>> a.uid == b.uid and np.array_equal(a.attrs["value"], b.attrs["value"])
    True
    """
    expect_container(model, "model")
    src_path = _one(model, source, "source")
    src = _weight(model, src_path)
    paths = [_one(model, t, f"targets[{i}]") for i, t in enumerate(targets)]
    value = src.attrs["value"]
    for path in paths:
        node = _weight(model, path)
        theirs = node.attrs["value"]
        if node.type != src.type or theirs.shape != value.shape or theirs.dtype != value.dtype \
                or node.output_names != src.output_names:
            raise ArgumentError.at(format_path(path), f"a weight like `{format_path(src_path)}` "
                                   f"({src.type} {value.dtype}{list(value.shape)})",
                                   f"{node.type} {theirs.dtype}{list(theirs.shape)}")
    return replace(model, paths, lambda node: src.with_name(str(node.name))) if paths else model


def shared(model: Container) -> dict[str, tuple[Path, ...]]:
    """Each weight (an op holding an array ``value``) placed at more than one path, by uid, with
    its paths in document order: the weights ``model`` shares."""
    expect_container(model, "model")
    found = {}
    for uid, paths in uid_places(model).items():
        if len(paths) > 1 and isinstance(model.descendant(paths[0]).attrs.get("value"), np.ndarray) \
                and model.descendant(paths[0]).is_op:
            found[uid] = paths
    return found
