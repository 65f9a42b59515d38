"""Checkpoints of a training run: every session variable of a training container (the weights,
the optimiser's moments and step count, BatchNorm's running statistics) and a JSON document of
the run's position (epoch, batch, the shuffle generator's state, the history so far).

Each variable is saved under its state key (a weight's uid, or the variable op's uid) with the
paths, below the top, of the ``Variable`` ops that hold it. :func:`restore` puts the values back
as the variables' initial values, so a new :class:`~amanda.Session` starts where the saved one
stopped: first by key, then by path (a model built again from the same code gives the
optimiser's state new uids at the same paths). A variable whose key and paths are both gone,
or whose dtype or shape changed, is reported, never loaded. The file is one ``.npz`` read with
``allow_pickle=False``; its entry ``__amanda_checkpoint__`` holds the JSON.

>>> import numpy as np, amanda
>>> from amanda import Container
>>> v = Container("Variable", "v", outputs=["ref"], attrs={"value": np.zeros(2, np.float32),
...                                                         "namespace": "amanda/core"})
>>> top = Container("G", "g", children=[v])
>>> entries = snapshot(top, {v.uid: np.ones(2, np.float32)})
>>> restore(top, entries).container.child("v").attrs["value"].tolist()
[1.0, 1.0]
"""

from __future__ import annotations

import json
import os
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from amanda.containers import Container, replace, walk
from amanda.containers.arguments import expect_container, expect_file, expect_list, expect_mapping, expect_type, shown
from amanda.errors import ArgumentError, FormatError, format_path
from amanda.exec.state import state_key
from amanda.safe_load import load_text

__all__ = ["Entry", "Restored", "load_checkpoint", "restore", "save_checkpoint", "snapshot"]

_META = "__amanda_checkpoint__"
FORMAT = 1


class Entry(NamedTuple):
    """One saved variable: its state key, the paths of the ops holding it, its value."""

    key: str
    paths: tuple[tuple[str, ...], ...]
    value: np.ndarray


class Restored(NamedTuple):
    """What :func:`restore` returns: the container with the values as its variables' initial
    values, and what did not pair up (each shown as ``path`` or ``key``)."""

    container: Container
    restored: tuple[str, ...]  # variables of the container that got a value
    unmatched: tuple[str, ...]  # saved entries with no variable (a layer removed or renamed)
    missing: tuple[str, ...]  # variables of the container the checkpoint has nothing for
    mismatched: tuple[str, ...]  # pairs whose dtype or shape differ (left at their own value)

    def summary(self) -> str:
        """One line per kind of problem; '' when everything paired."""
        parts = [f"{what}: {', '.join(items)}" for what, items in
                 (("not in the model", self.unmatched), ("not in the checkpoint", self.missing),
                  ("dtype or shape differ", self.mismatched)) if items]
        return "; ".join(parts)


def _variables(model: Container) -> dict[str, list[tuple[tuple[str, ...], Container]]]:
    """State key -> ``(path, op)`` of each ``Variable`` op holding it."""
    found: dict[str, list[tuple[tuple[str, ...], Container]]] = {}
    for path, node, _ in walk(model):
        if node.type == "Variable" and not node.children:
            found.setdefault(state_key(node), []).append((tuple(path), node))
    return found


def _initial(node: Container) -> np.ndarray | None:
    value = node.attrs.get("value")
    if value is None and node.attrs.get("shape") is not None:
        return np.zeros(tuple(node.attrs["shape"]), np.dtype(node.attrs.get("dtype", "float32")))
    return None if value is None else np.asarray(value)


def snapshot(model: Container, state: Any = None) -> list[Entry]:
    """Every variable of ``model`` with its value in ``state`` (a Session, its ``state``, or
    None: the initial values)."""
    expect_container(model, "model")
    values = getattr(state, "state", state)
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise ArgumentError.at("state", "a Session, its state, or None", shown(state))
    out = []
    for key, places in _variables(model).items():
        value = values[key] if key in values else _initial(places[0][1])
        if value is not None:
            out.append(Entry(key, tuple(p for p, _ in places), np.asarray(value)))
    return out


def _fits(old: Container, value: np.ndarray) -> bool:
    mine = _initial(old)
    return mine is None or (mine.dtype == value.dtype and mine.shape == value.shape)


def _match(entries: list[Entry], variables: dict, by_path: dict) -> tuple[dict, set, list, list]:
    """Pair entries with variables: ``(uid -> value, state keys restored, entries that pair
    with nothing, entries whose value does not fit their variable)``."""
    saved = {e.key for e in entries}
    chosen: dict[str, np.ndarray] = {}  # uid of the Variable op -> its value
    done: set[str] = set()
    unmatched, mismatched = [], []
    for entry in entries:
        targets = [node for _, node in variables.get(entry.key, ())]
        if not targets:
            targets = [by_path[p][1] for p in entry.paths if p in by_path and by_path[p][0] not in saved]
        shown = format_path(entry.paths[0]) if entry.paths else entry.key
        if not targets:
            unmatched.append(shown)
        for node in targets:
            if _fits(node, entry.value):
                chosen[node.uid] = entry.value
                done.add(state_key(node))
            else:
                mismatched.append(f"{shown} ({entry.value.dtype}{list(entry.value.shape)})")
    return chosen, done, unmatched, mismatched


def restore(model: Container, entries: list[Entry]) -> Restored:
    """``model`` with each entry's value as the initial value of the variables it pairs with:
    the variables of the same state key, else (for an entry whose key ``model`` lacks) the
    variable at one of its saved paths, unless that variable has its own entry."""
    expect_container(model, "model")
    entries = expect_list(entries, "entries", "a list of checkpoint entries (from snapshot or load_checkpoint)")
    for i, entry in enumerate(entries):
        expect_type(entry, Entry, ("entries", i), "a checkpoint Entry (from snapshot or load_checkpoint)")
    variables = _variables(model)
    by_path = {p: (key, node) for key, places in variables.items() for p, node in places}
    chosen, done, unmatched, mismatched = _match(entries, variables, by_path)
    paths = [p for p, (_, node) in by_path.items() if node.uid in chosen]

    def put(node: Container) -> Container:
        value = np.array(chosen[node.uid], copy=True)
        value.setflags(write=False)
        return node.with_attrs(value=value)

    result = replace(model, paths, put) if paths else model
    missing = sorted(format_path(places[0][0]) for key, places in variables.items() if key not in done)
    return Restored(result, tuple(sorted(format_path(p) for p in paths)), tuple(unmatched), tuple(missing),
                    tuple(mismatched))


def save_checkpoint(path: str | Path, model: Container, session: Any = None,
                    meta: Mapping[str, Any] | None = None) -> list[str]:
    """Write ``model``'s variables (their values in ``session``) and ``meta`` (JSON) to one
    ``.npz`` at ``path``, atomically (a file beside it, then renamed); the state keys written."""
    expect_file(path)
    entries = snapshot(model, session)
    expect_mapping(meta, "meta", "a mapping of JSON values", optional=True)
    index = [{"key": e.key, "paths": [list(p) for p in e.paths]} for e in entries]
    try:
        text = json.dumps({"format": FORMAT, "variables": index, "meta": dict(meta or {})})
    except (TypeError, ValueError) as exc:
        raise ArgumentError.at("meta", "JSON-serialisable values", str(exc)) from None
    arrays: dict[str, Any] = {f"v{i}": e.value for i, e in enumerate(entries)}
    arrays[_META] = np.array(text)
    target = os.fspath(path)
    partial = f"{target}.partial"
    with open(partial, "wb") as handle:
        np.savez(handle, **arrays)
    os.replace(partial, target)
    return [e.key for e in entries]


def _bad(path: str, found: str) -> FormatError:
    return FormatError(f"cannot read a checkpoint from {path!r}: {found}", path=path,
                       expected="an .npz archive written by save_checkpoint", found=found)


def load_checkpoint(path: str | Path) -> tuple[list[Entry], dict[str, Any]]:
    """The entries and the ``meta`` document of a checkpoint written by :func:`save_checkpoint`."""
    source = os.fspath(expect_file(path))
    try:
        with np.load(source, allow_pickle=False) as archive:
            stored = {key: archive[key] for key in archive.files}
        doc = load_text(str(stored.pop(_META)), "json")  # plain data under the depth guard
        entries = [Entry(str(item["key"]), tuple(tuple(p) for p in item["paths"]), stored[f"v{i}"])
                   for i, item in enumerate(doc["variables"])]
    except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError, zipfile.BadZipFile,
            zlib.error, FormatError) as exc:
        raise _bad(source, f"{type(exc).__name__}: {exc}") from None
    if doc.get("format") != FORMAT or not isinstance(doc.get("meta"), dict):
        raise _bad(source, f"format {doc.get('format')!r}")
    return entries, doc["meta"]
