"""Mutations of valid inputs: byte-level (flip, insert, delete, duplicate, truncate) and
structural (on parsed plain data: drop, duplicate, retype, rename, nest deeply, share by
alias, tag), each driven by a :class:`~tests.fuzz.harness.Source`."""

from __future__ import annotations

import copy
from typing import Any

from tests.fuzz.harness import Source

# bytes that mean something to YAML, JSON, selectors or expressions
SYNTAX = b"{}[]()-:,.'\"`\\$?*&!|>#%@=<~ \t\n\r\x00\xff0123456789"


def _span(src: Source, size: int) -> tuple[int, int]:
    start = src.integer(0, size)
    return start, min(size, start + src.integer(0, 16))


def mutate_bytes(src: Source, data: bytes, rounds: int = 4) -> bytes:
    """``data`` after 1..``rounds`` byte-level edits.

    >>> from tests.fuzz.harness import RandomSource
    >>> isinstance(mutate_bytes(RandomSource("x"), b"abc"), bytes)
    True
    """
    out = bytearray(data)
    for _ in range(src.integer(1, rounds)):
        kind = src.integer(0, 6)
        at = src.integer(0, len(out))
        if kind == 0 and out:  # flip one bit
            at = min(at, len(out) - 1)
            out[at] ^= 1 << src.integer(0, 7)
        elif kind == 1:  # insert syntax
            out[at:at] = bytes(src.choice(SYNTAX) for _ in range(src.integer(1, 4)))
        elif kind == 2:  # insert random bytes
            out[at:at] = src.data(8)
        elif kind == 3:  # delete a span
            a, b = _span(src, len(out))
            del out[a:b]
        elif kind == 4:  # duplicate a span
            a, b = _span(src, len(out))
            out[at:at] = out[a:b] * src.integer(1, 3)
        elif kind == 5:  # truncate
            del out[at:]
        else:  # overwrite a byte with syntax
            if out:
                out[min(at, len(out) - 1)] = src.choice(SYNTAX)
    return bytes(out)


def _slots(data: Any, limit: int = 400) -> list[tuple]:
    """Paths (keys and indexes) of up to ``limit`` nodes in nested dicts and lists, the root
    first; a shared or cyclic node is entered once."""
    found: list[tuple] = []
    seen: set[int] = set()
    stack: list[tuple[tuple, Any]] = [((), data)]
    while stack and len(found) < limit:
        path, node = stack.pop()
        found.append(path)
        if isinstance(node, (dict, list)) and id(node) not in seen:
            seen.add(id(node))
            items = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend(((*path, k), v) for k, v in list(items)[:limit][::-1])
    return found


def _get(data: Any, path: tuple) -> Any:
    for part in path:
        data = data[part]
    return data


def scalar(src: Source) -> Any:
    """A value of a random kind, odd ones included."""
    return src.choice([
        None, True, False, 0, -1, 1, 2**31, -(2**63), 2**64, 1e308, -0.0, float("nan"),
        float("inf"), "", "x", "-1", "$", "f:m", "a/b", ":", "::", "null", "\x00", "é", "0x10",
        [], {}, [None], {"": None}, {"name": None}, [[]], ["x", 1], {"op": "f", "port": -1},
        {"__ndarray__": {"dtype": "float32", "shape": [2], "data": "AAAAAA=="}},
        {"__ndarray__": {"dtype": "object", "shape": [1], "data": ""}},
        {"__ndarray__": {"dtype": "float32", "shape": [-1, 2**40], "data": "!!"}},
        {"__bytes__": "not base64!"}, {"__bytes__": 3},
    ])


def nest(src: Source, value: Any, depth: int) -> Any:
    """``value`` wrapped in ``depth`` lists or dicts."""
    kind = src.integer(0, 1)
    for _ in range(depth):
        value = [value] if kind == 0 else {"k": value}
    return value


def laughs(levels: int, width: int) -> Any:
    """A "billion laughs" list: each level shares the previous one ``width`` times."""
    value: Any = ["lol"]
    for _ in range(levels):
        value = [value] * width
    return value


def _replace(data: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    _get(data, path[:-1])[path[-1]] = value
    return data


def mutate_data(src: Source, data: Any, rounds: int = 3, aliases: bool = True) -> Any:
    """A mutated deep copy of plain data (dicts, lists, scalars); ``data`` is left alone.

    ``aliases``: also share subtrees, exponentially and in cycles (YAML can say so, JSON not).
    """
    data = copy.deepcopy(data)
    for _ in range(src.integer(1, rounds)):
        path = src.choice(_slots(data))
        node = _get(data, path)
        kind = src.integer(0, 8)
        if not aliases and kind in (5, 6, 7):
            kind = 1
        if kind == 0 and path:  # drop
            del _get(data, path[:-1])[path[-1]]
        elif kind == 1:  # retype
            data = _replace(data, path, scalar(src))
        elif kind == 2 and isinstance(node, list) and node:  # duplicate an item
            node.insert(src.integer(0, len(node)), copy.deepcopy(src.choice(node)))
        elif kind == 3 and isinstance(node, dict) and node:  # rename a key
            key = src.choice(list(node))
            node[src.choice(["name", "ops", "edges", "type", "attrs", "op", "port", "x", 0, ""])] = (
                node.pop(key)
            )
        elif kind == 4:  # nest deeply
            data = _replace(data, path, nest(src, node, src.choice([2, 30, 200])))
        elif kind == 5 and path:  # share a subtree by reference: YAML writes an alias
            data = _replace(data, path, _get(data, src.choice(_slots(data, 50))))
        elif kind == 6:  # exponential sharing
            data = _replace(data, path, laughs(src.integer(2, 12), src.integer(2, 10)))
        elif kind == 7 and isinstance(node, (dict, list)):  # a cycle (YAML can say `&a [*a]`)
            if isinstance(node, list):
                node.append(node)
            else:
                node["self"] = node
        elif kind == 8 and isinstance(node, list):  # many items
            node.extend([copy.deepcopy(node[0]) if node else None] * src.integer(10, 300))
    return data


# YAML tags: the safe loader must refuse the Python ones and may build odd types for the rest
TAGS = ["!!python/object/apply:os.system", "!!python/name:os.system", "!!binary", "!!set",
        "!!timestamp", "!!omap", "!!pairs", "!!float", "!!int", "!!str", "!!null", "!custom",
        "!<tag:yaml.org,2002:python/tuple>", "!!merge"]


def tag_yaml(src: Source, text: str) -> str:
    """``text`` with a YAML tag put before one value."""
    spots = [i + 1 for i, ch in enumerate(text) if ch in ":-[,"] or [0]
    at = src.choice(spots)
    return f"{text[:at]} {src.choice(TAGS)} {text[at:]}"


def deep_text(src: Source, text: str, json: bool = False) -> str:
    """``text`` with one value replaced by a flow list or mapping nested thousands deep
    (deeper than any recursive parser or builder allows)."""
    depth = src.choice([500, 1100, 6000, 25000])
    opening, closing = ("[", "]") if src.boolean() else ('{"k": ', "}")
    deep = opening * depth + "1" + closing * depth
    spots = [i + 1 for i, ch in enumerate(text) if ch == ":"] or [0]
    at = src.choice(spots)
    end = text.find("," if json else "\n", at)
    end = len(text) if end < 0 else end
    return f"{text[:at]} {deep}{text[end:]}"
