"""Weights saved to one ``.npz`` and paired back by uid or by path.

Pairing by uid (the default) finds each array's op after the model was wrapped, edited or
consolidated, because transforms keep uids; it pairs with nothing in a model built again
from code, whose uids are new. Pairing by path (``by="path"``) finds each array's op at the
same path below the top: it serves a model built again, and fails once the model was
wrapped (its paths gain a prefix).

The file's keys are ``"<uid>::<attribute>"``; the entry ``__amanda_paths__`` lists each key
with the paths it was saved from (as JSON). It is read with ``allow_pickle=False``.

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
import tokenize
import zipfile
import zlib
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from amanda.containers.checks import expect_container, expect_file, expect_type, shown
from amanda.containers.container import Container
from amanda.containers.traverse import walk
from amanda.containers.update import replace
from amanda.errors import ArgumentError, FormatError, format_path

__all__ = ["LoadedWeights", "load_weights", "save_weights"]

_SEP = "::"
_PATHS = "__amanda_paths__"
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
    every path each array was found at, for :func:`load_weights` ``by="path"``.
    """
    expect_container(container, "container")
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


def _read(path: str) -> tuple[dict[str, np.ndarray], dict[str, list[tuple[str, ...]]] | None]:
    """The file's arrays, and each key's saved paths (None for a file without them)."""
    try:
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):  # a .npy file loads as one array
            raise ValueError("a .npy array, not an .npz archive")
        with archive:
            stored = {key: archive[key] for key in archive.files}
    except (OSError, ValueError, EOFError, KeyError, SyntaxError, NotImplementedError, tokenize.TokenError,
            zipfile.BadZipFile, zlib.error) as exc:  # numpy parses headers with Python's tokenizer; zip
        # refuses compression methods it lacks with NotImplementedError
        raise FormatError(f"cannot read weights from {path!r}: {exc or type(exc).__name__}",
                          path=path, expected="an .npz archive written by save_weights",
                          found=type(exc).__name__) from None
    for key, value in stored.items():
        if not isinstance(value, np.ndarray):  # a member not stored as .npy reads as raw bytes
            raise FormatError(f"cannot read weights from {path!r}: member {key!r} is not a .npy array",
                              path=path, expected="an .npz archive written by save_weights",
                              found=type(value).__name__)
    index = stored.pop(_PATHS, None)
    if index is None:
        return stored, None
    try:
        paths: dict[str, list[tuple[str, ...]]] = {}
        for key, text in index.reshape(-1, 2).tolist():
            entry = json.loads(text)
            if not isinstance(entry, list) or not all(isinstance(p, str) for p in entry):
                raise ValueError(text)
            paths.setdefault(key, []).append(tuple(entry))
    except (ValueError, TypeError) as exc:
        raise FormatError(f"cannot read weights from {path!r}: a malformed {_PATHS} entry ({exc})",
                          path=path, expected="rows of (key, JSON list of names)", found=str(exc)) from None
    return stored, paths


def _entries(stored: dict, paths: dict | None, by: str, source: str) -> list[tuple[Any, str, str, np.ndarray]]:
    """``(label, attribute, shown key, array)`` for each array of the file and each place it goes."""
    out = []
    for key, array in stored.items():
        uid, _, attr = key.rpartition(_SEP)
        if by == "uid":
            out.append((uid, attr, key, array))
            continue
        if paths is None:
            raise FormatError(f"cannot pair weights from {source!r} by path: the file records no paths",
                              path=source, expected=f"an {_PATHS} entry", found="none",
                              ) from None
        for place in paths.get(key, ()):
            out.append((place, attr, f"{format_path(place)}{_SEP}{attr}", array))
    return out


def load_weights(container: Container, path: str | Path, *, by: str = "uid", add_missing: bool = False) -> LoadedWeights:
    """A new container with the file's arrays put back on the ops they pair with.

    ``by="uid"`` (default) pairs each array with every node of the same uid (a reused layer
    gets it in each place), ``by="path"`` with the node at the same path. Only attributes
    that already hold an array are replaced, unless ``add_missing=True`` lets arrays be added
    as attributes a node lacks; a value that is not an array is never replaced. Nothing is
    loaded where dtype or shape differ. Loaded arrays are read-only.
    """
    expect_container(container, "container")
    source = _file(path)
    if by.__class__ is not str or by not in _BY:
        raise ArgumentError.at("by", f"one of {list(_BY)}", shown(by))
    expect_type(add_missing, bool, "add_missing", "True or False")
    stored, paths = _read(source)
    targets: dict[Any, list[tuple[tuple[str, ...], Container]]] = {}
    current: dict[str, str] = {}  # the model's array attributes: shown key -> shown key
    for node_path, node, _ in walk(container):
        label = node.uid if by == "uid" else node_path
        targets.setdefault(label, []).append((node_path, node))
        shown_label = node.uid if by == "uid" else format_path(node_path)
        for key, value in node.attrs.items():
            if isinstance(value, np.ndarray):
                current[f"{shown_label}{_SEP}{key}"] = key
    updates: dict[tuple[str, ...], dict[str, Any]] = {}
    unmatched, mismatched, loaded = set(), set(), set()
    for label, attr, key, array in _entries(stored, paths, by, source):
        for node_path, node in targets.get(label, ()):
            old = node.attrs.get(attr)
            if not isinstance(old, np.ndarray) and (old is not None or not add_missing):
                unmatched.add(key)
            elif old is not None and (old.dtype != array.dtype or old.shape != array.shape):
                mismatched.add(key)
            else:
                updates.setdefault(node_path, {})[attr] = array
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
