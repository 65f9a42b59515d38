"""Weights paired by uid (docs/challenges.md, C7): arrays saved from one model find their ops in
another after wrapping, editing or consolidation, because transforms keep uids.

The file is one ``.npz`` whose keys are ``"<uid>::<attribute>"``; it is read with
``allow_pickle=False``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from amanda.containers.container import Container
from amanda.containers.traverse import walk
from amanda.containers.update import replace
from amanda.errors import FormatError

__all__ = ["LoadedWeights", "load_weights", "save_weights"]

_SEP = "::"


class LoadedWeights(NamedTuple):
    """What ``load_weights`` returns: the new container and what did not pair up."""

    container: Container
    unmatched: tuple[str, ...]  # keys in the file whose uid or attribute the model lacks
    missing: tuple[str, ...]  # array attributes of the model the file did not have
    mismatched: tuple[str, ...]  # keys whose dtype or shape differs from the model's array


def _arrays(container: Container) -> dict[str, tuple[tuple[str, ...], np.ndarray]]:
    found: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}
    for path, node, _ in walk(container):
        for key, value in node.attrs.items():
            if isinstance(value, np.ndarray):
                found.setdefault(f"{node.uid}{_SEP}{key}", (path, value))
    return found


def save_weights(container: Container, path: str | Path) -> list[str]:
    """Write every array attribute to one ``.npz`` keyed by uid and attribute; the keys written.

    A container reused in several places (same uid) is written once.
    """
    arrays = {key: value for key, (_, value) in _arrays(container).items()}
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)  # type: ignore[arg-type]  # numpy's stub types the keywords as allow_pickle
    return sorted(arrays)


def _setter(attrs: dict[str, Any]) -> Any:
    def put(node: Container) -> Container:
        return node.with_attrs(**attrs)

    return put


def load_weights(container: Container, path: str | Path) -> LoadedWeights:
    """A new container with the file's arrays put back wherever the uid matches.

    Every node with a matching uid gets the array (a reused layer gets it in each place).
    Loaded arrays are read-only. Nothing is loaded where dtype or shape differ.
    """
    try:
        with np.load(path, allow_pickle=False) as archive:
            stored = {key: archive[key] for key in archive.files}
    except (OSError, ValueError) as exc:
        raise FormatError(f"cannot read weights from {str(path)!r}: {exc}", path=str(path)) from None
    targets: dict[str, list[tuple[tuple[str, ...], Container]]] = {}
    current = {}
    for node_path, node, _ in walk(container):
        targets.setdefault(node.uid, []).append((node_path, node))
        for key, value in node.attrs.items():
            if isinstance(value, np.ndarray):
                current[f"{node.uid}{_SEP}{key}"] = value
    updates: dict[tuple[str, ...], dict[str, Any]] = {}
    unmatched, mismatched = [], []
    for key, array in stored.items():
        uid, _, attr = key.rpartition(_SEP)
        if uid not in targets:
            unmatched.append(key)
            continue
        old = current.get(key)
        if old is not None and (old.dtype != array.dtype or old.shape != array.shape):
            mismatched.append(key)
            continue
        for node_path, _node in targets[uid]:
            updates.setdefault(node_path, {})[attr] = array
    result = container
    for node_path, attrs in sorted(updates.items(), key=lambda item: -len(item[0])):
        result = replace(result, [node_path] if node_path else (), _setter(attrs))
    missing = sorted(set(current) - set(stored))
    return LoadedWeights(result, tuple(sorted(unmatched)), tuple(missing), tuple(sorted(mismatched)))
