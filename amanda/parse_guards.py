"""Guards the one document loader (``amanda.safe_load``) leans on: the depth limit, a JSON
depth scan that no string can fool, and a pause of the cycle collector while parsing.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from amanda.errors import FormatError

__all__ = ["MAX_DEPTH", "check_json_depth", "gc_paused"]

MAX_DEPTH = 1000  # levels of lists and mappings in any document amanda reads

_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1


_STRUCTURE = b'[]{}"'
_NOT_STRUCTURE = bytes(sorted(set(range(256)) - set(_STRUCTURE)))


def check_json_depth(data: bytes) -> None:
    """Refuse JSON (UTF-8 bytes) whose lists and mappings nest deeper than ``MAX_DEPTH``.

    >>> check_json_depth(b"[" * 999 + b"]" * 999)
    >>> check_json_depth(b'"[[[",' * 2000)  # brackets in strings do not count
    """
    if data.count(b"[") + data.count(b"{") < MAX_DEPTH:
        return  # fewer brackets than the limit: no need to look closer
    # escapes go first (pairs of backslashes, then escaped quotes, as JSON reads them left
    # to right); then only brackets and quotes are kept, all in C
    plain = data.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in data else data
    marks = np.frombuffer(plain.translate(None, _NOT_STRUCTURE), dtype=np.uint8)
    quote = marks == ord('"')
    outside = np.cumsum(quote) % 2 == 0  # an even number of quotes so far
    steps = _STEP[marks[outside & ~quote]]
    if steps.size and int(np.cumsum(steps, dtype=np.int64).max()) >= MAX_DEPTH:
        _locate_json_depth(data)


def _locate_json_depth(data: bytes) -> None:
    """Raise the depth error at the first bracket past the limit (the error path only)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    where = np.flatnonzero(_STEP[raw])
    if b'"' in data:
        quotes = np.flatnonzero(raw == ord('"'))
        if b"\\" in data:
            quotes = quotes[~_escaped(raw, quotes)]
        where = where[np.searchsorted(quotes, where) % 2 == 0]  # outside strings
    depth = np.cumsum(_STEP[raw[where]], dtype=np.int64)
    at = int(where[np.flatnonzero(depth >= MAX_DEPTH)[0]])
    raise FormatError(f"the document nests deeper than the limit of {MAX_DEPTH} levels",
                      expected=f"at most {MAX_DEPTH} levels of lists and mappings",
                      found="deeper nesting", line=data.count(b"\n", 0, at) + 1,
                      column=at - data.rfind(b"\n", 0, at))


def _escaped(raw: np.ndarray, quotes: np.ndarray) -> np.ndarray:
    """Which quotes follow an odd run of backslashes."""
    slashes = np.flatnonzero(raw == ord("\\"))
    starts = np.ones(slashes.size, dtype=bool)
    starts[1:] = slashes[1:] != slashes[:-1] + 1
    first = np.maximum.accumulate(np.where(starts, np.arange(slashes.size), 0))
    run = np.arange(slashes.size) - first + 1  # length of the run ending at each backslash
    before = np.searchsorted(slashes, quotes) - 1
    touching = (before >= 0) & (slashes[np.maximum(before, 0)] == quotes - 1)
    return touching & (run[np.maximum(before, 0)] % 2 == 1)


_gc_lock = threading.Lock()
_gc_holders = 0
_gc_was_enabled = False


@contextmanager
def gc_paused(promote: bool = False) -> Iterator[None]:
    """Pause the cycle collector while building a large acyclic document, then restore it.

    Parsing allocates one object per node and nothing cyclic; the collector's passes over
    the growing heap took three quarters of the time of a YAML load. Reentrant and
    thread-safe: the state found by the first holder is restored by the last.

    ``promote`` (for a result that lives long, such as an imported model): the last holder
    moves the objects made meanwhile straight to the oldest generation (``gc.freeze`` then
    ``gc.unfreeze``, which only splices lists), so the first collection after the pause does
    not walk every one of them, and nor does each younger generation after it (a tenth of an
    ONNX import's time). Skipped while the program itself keeps objects frozen.

    >>> import gc
    >>> with gc_paused():
    ...     gc.isenabled()
    False
    """
    global _gc_holders, _gc_was_enabled
    with _gc_lock:
        if _gc_holders == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_was_enabled:
                if promote and gc.get_freeze_count() == 0:
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()


