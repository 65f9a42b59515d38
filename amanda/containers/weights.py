"""Weights saved to one ``.npz`` and paired back by uid or by path.

Pairing by uid (the default) finds each array's op after the model was wrapped, edited or
consolidated, because transforms keep uids; it pairs with nothing in a model built again
from code, whose uids are new. Pairing by path (``by="path"``) finds each array's op at the
same path below the top: it serves a model built again, and fails once the model was
wrapped (its paths gain a prefix).

The file's keys are ``"<uid>::<attribute>"``; the entry ``__amanda_paths__`` lists each key
with the paths it was saved from (as JSON). No pickle is ever read. Loading is bounded: the
headers of all arrays are read first (:mod:`amanda.containers.npz`), and an array is
decompressed only when it is loaded: when its dtype and shape are those of the array it replaces
(so a load costs what the model's own arrays do, however compressed the file), or, added with
``add_missing=True``, when it holds at most :data:`MAX_ADDED_BYTES`. The paths index is read
only to pair by path, up to :data:`MAX_INDEX_BYTES`. Past a limit, or where a header does not
match its member's size, ``load_weights`` raises a ``FormatError``.

>>> import os, tempfile, numpy as np
>>> from amanda.containers.compose import chain
>>> from amanda.containers.container import op
>>> def build():  # the same code run again makes new uids
...     return chain(op("Dense", "d", ["x"], ["y"], {"kernel": np.zeros(2, np.float32)}), name="net")
>>> trained = build().child("d").with_attrs(kernel=np.ones(2, np.float32))
>>> file = os.path.join(tempfile.mkdtemp(), "w.npz")
>>> save_weights(chain(trained, name="net"), file)[0].endswith("::kernel")
True
>>> load_weights(build(), file).unmatched != ()
True
>>> loaded = load_weights(build(), file, by="path")
>>> loaded.container.child("d").attrs["kernel"].tolist(), loaded.unmatched
([1.0, 1.0], ())
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from amanda.containers.arguments import expect_container, expect_file, expect_type, shown
from amanda.containers.container import Container
from amanda.containers.npz import Archive
from amanda.containers.traverse import walk
from amanda.containers.uids import refuse_uid_clashes
from amanda.containers.update import replace
from amanda.errors import ArgumentError, FormatError, format_path
from amanda.safe_load import load_text

__all__ = ["LoadedWeights", "load_weights", "save_weights"]

_SEP = "::"
_PATHS = "__amanda_paths__"
#: the most bytes an array added with ``add_missing=True`` may decompress to
MAX_ADDED_BYTES = 1 << 30
#: the most bytes the paths index (``__amanda_paths__``) may decompress to
MAX_INDEX_BYTES = 1 << 28
_BY = ("uid", "path")


class LoadedWeights(NamedTuple):
    """What ``load_weights`` returns: the new container and what did not pair up.

    Entries read ``"<uid>::<attribute>"`` when pairing by uid, ``"<path>::<attribute>"`` by path.
    """

    container: Container
    unmatched: tuple[str, ...]  # file entries with no op, or whose op has no array attribute of that name
    missing: tuple[str, ...]  # array attributes of the model the file did not have
    mismatched: tuple[str, ...]  # entries whose dtype or shape differs from the model's array


def _arrays(container: Container) -> dict[str, tuple[list[tuple[str, ...]], np.ndarray]]:
    found: dict[str, tuple[list[tuple[str, ...]], np.ndarray]] = {}
    for path, node, _ in walk(container):
        for key, value in node.attrs.items():
            if isinstance(value, np.ndarray):
                found.setdefault(f"{node.uid}{_SEP}{key}", ([], value))[0].append(path)
    return found


def _file(path: Any) -> str:
    return os.fspath(expect_file(path))


def save_weights(container: Container, path: str | Path) -> list[str]:
    """Write every array attribute to one ``.npz`` keyed by uid and attribute; the keys written.

    A container reused in several places (same uid) is written once; the file also records
    every path each array was found at, for :func:`load_weights` ``by="path"``. A model in which
    two nodes of other content share a uid (:mod:`amanda.containers.uids`) is refused with an
    ``InvariantError`` naming both paths, as one of their arrays would be lost.
    """
    expect_container(container, "container")
    refuse_uid_clashes(container, "save_weights")  # one array per uid: a clash would lose one
    target = _file(path)
    found = _arrays(container)
    arrays: dict[str, Any] = {key: value for key, (_, value) in found.items()}
    rows = [(key, json.dumps(list(p))) for key, (paths, _) in found.items() for p in paths]
    arrays[_PATHS] = np.array(rows, dtype=str).reshape(len(rows), 2)
    try:
        with open(target, "wb") as handle:
            np.savez(handle, **arrays)
    except OSError as exc:
        raise FormatError(f"cannot write {target!r}: {exc.strerror or exc}", path=target) from None
    return sorted(found)


def _paths(archive: Archive) -> dict[str, list[tuple[str, ...]]] | None:
    """Each key's saved paths (None for a file without them)."""
    if _PATHS not in archive.members:
        return None
    index = archive.read(_PATHS, MAX_INDEX_BYTES)
    try:
        if index.dtype.kind != "U":
            raise ValueError(f"strings, not {index.dtype}")
        paths: dict[str, list[tuple[str, ...]]] = {}
        for key, text in index.reshape(-1, 2).tolist():
            entry = load_text(text, "json")  # plain data under the depth guard
            if not isinstance(entry, list) or not all(isinstance(p, str) for p in entry):
                raise ValueError(text)
            paths.setdefault(key, []).append(tuple(entry))
    except (ValueError, TypeError, FormatError) as exc:
        raise FormatError(f"cannot read weights from {archive.shown!r}: a malformed {_PATHS} entry ({exc})",
                          path=archive.shown, expected="rows of (key, JSON list of names)", found=str(exc)) from None
    return paths


def _entries(archive: Archive, by: str) -> list[tuple[Any, str, str, str]]:
    """``(label, attribute, shown key, member key)`` for each array of the file and each place it goes."""
    out: list[tuple[Any, str, str, str]] = []
    paths = _paths(archive) if by == "path" else None
    for key in archive.members:
        if key == _PATHS:
            continue
        uid, _, attr = key.rpartition(_SEP)
        if by == "uid":
            out.append((uid, attr, key, key))
            continue
        if paths is None:
            raise FormatError(f"cannot pair weights from {archive.shown!r} by path: the file records no paths",
                              path=archive.shown, expected=f"an {_PATHS} entry", found="none",
                              ) from None
        for place in paths.get(key, ()):
            out.append((place, attr, f"{format_path(place)}{_SEP}{attr}", key))
    return out


def _targets(container: Container, by: str) -> tuple[dict[Any, list[tuple[tuple[str, ...], Container]]],
                                                    dict[str, str]]:
    """The nodes each label (uid or path) names, and the model's array attributes by shown key."""
    targets: dict[Any, list[tuple[tuple[str, ...], Container]]] = {}
    current: dict[str, str] = {}  # the model's array attributes: shown key -> shown key
    for node_path, node, _ in walk(container):
        label = node.uid if by == "uid" else node_path
        targets.setdefault(label, []).append((node_path, node))
        shown_label = node.uid if by == "uid" else format_path(node_path)
        for key, value in node.attrs.items():
            if isinstance(value, np.ndarray):
                current[f"{shown_label}{_SEP}{key}"] = key
    return targets, current


def _fit(old: Any, header: Any, add_missing: bool) -> str | None:
    """None when an array described by ``header`` may replace attribute value ``old`` (or be
    added where it is missing); else ``"unmatched"`` (not an array there) or ``"mismatched"``
    (dtype or shape differ)."""
    if not isinstance(old, np.ndarray) and (old is not None or not add_missing):
        return "unmatched"
    if old is not None and (old.dtype != header.dtype or old.shape != header.shape):
        return "mismatched"
    return None


def load_weights(container: Container, path: str | Path, *, by: str = "uid", add_missing: bool = False) -> LoadedWeights:
    """A new container with the file's arrays put back on the ops they pair with.

    ``by="uid"`` (default) pairs each array with every node of the same uid (a reused layer
    gets it in each place), ``by="path"`` with the node at the same path. Only attributes
    that already hold an array are replaced, unless ``add_missing=True`` lets arrays be added
    as attributes a node lacks; a value that is not an array is never replaced. Nothing is
    loaded where dtype or shape differ. Loaded arrays are read-only. Only the arrays loaded are
    decompressed (see the module's doc for the bounds); a file that is no ``.npz`` archive, a
    corrupt or truncated array, an object array, or an array past a bound is a ``FormatError``.
    """
    expect_container(container, "container")
    source = _file(path)
    if by.__class__ is not str or by not in _BY:
        raise ArgumentError.at("by", f"one of {list(_BY)}", shown(by))
    expect_type(add_missing, bool, "add_missing", "True or False")
    targets, current = _targets(container, by)
    updates: dict[tuple[str, ...], dict[str, Any]] = {}
    unmatched: set[str] = set()
    mismatched: set[str] = set()
    loaded: set[str] = set()
    with Archive(source) as archive:
        read: dict[str, np.ndarray] = {}
        for label, attr, key, member in _entries(archive, by):
            header = archive.members[member]
            for node_path, node in targets.get(label, ()):
                old = node.attrs.get(attr)
                fit = _fit(old, header, add_missing)
                if fit is not None:
                    (unmatched if fit == "unmatched" else mismatched).add(key)
                    continue
                if member not in read:  # decompressed once, and only now
                    read[member] = archive.read(member, None if old is not None else MAX_ADDED_BYTES)
                updates.setdefault(node_path, {})[attr] = read[member]
                loaded.add(key)
            if label not in targets:
                unmatched.add(key)
    result = container
    for node_path, attrs in sorted(updates.items(), key=lambda item: -len(item[0])):
        result = replace(result, [node_path] if node_path else (), _setter(attrs))
    missing = sorted(set(current) - loaded - mismatched)
    return LoadedWeights(result, tuple(sorted(unmatched)), tuple(missing), tuple(sorted(mismatched)))


def _setter(attrs: dict[str, Any]) -> Any:
    def put(node: Container) -> Container:
        return node.with_attrs(**attrs)

    return put
