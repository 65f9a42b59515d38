"""Attribute maps shared between the ops of one import whose attributes are the same bytes.

A model repeats few attribute sets many times (every ``Gemm`` of GPT-2 has the same
``alpha``/``beta``/``transB``; a 7,400-node encoder has 25 distinct sets for 3,600 ops that
carry attributes). The reader converts each distinct set once, keyed by the serialized
attributes and the schema that types them, and gives every op with the same set the same values
and, where the op adds nothing of its own, the same frozen map. What a shared map holds is
immutable (plain values, tuples, read-only arrays over immutable bytes), so sharing it is
invisible to every reader: equality and hashing are by value, as for any attribute map.

Sets holding graphs (If/Loop/Scan bodies, which see the values around their node) or of an
unset type are never shared, nor any set inside a function body (whose attribute references
take the call's values), nor one past :data:`MAX_SHARED_BYTES` (a large ``Constant`` tensor:
its bytes would be copied only to make the key). A set that fails to convert is not kept, so
the op that holds it raises, as without sharing.

>>> from onnx import helper
>>> cache = SharedAttributes()
>>> a = helper.make_node("Gemm", ["a", "b"], ["y"], transB=1)
>>> b = helper.make_node("Gemm", ["c", "d"], ["z"], transB=1)
>>> cache.key(a, None) == cache.key(b, None), cache.key(helper.make_node("If", ["c"], ["y"],
...     then_branch=helper.make_graph([], "t", [], [])), None)
(True, None)
"""

from __future__ import annotations

from typing import Any

from amanda.containers.arguments import INTERPRETED_ATTRS
from amanda.containers.values import freeze_attrs

__all__ = ["MAX_SHARED_BYTES", "SharedAttributes", "SharedEntry"]

MAX_SHARED_BYTES = 4096  # attribute sets larger than this (serialized) are converted per op
# FLOAT, INT, STRING, TENSOR, FLOATS, INTS, STRINGS, TENSORS: values that depend on the bytes alone
_INTERPRETED = frozenset(INTERPRETED_ATTRS)
_SHAREABLE_TYPES = frozenset({1, 2, 3, 4, 6, 7, 8, 9})


class SharedEntry:
    """One converted attribute set: its values and type hints (as the reader makes them for an
    op), whether it holds no attribute amanda interprets (``plain``: known without reading the
    frozen map's keys in Python) and, made when first asked for, their frozen map."""

    __slots__ = ("_frozen", "hints", "plain", "values")

    def __init__(self, values: dict[str, Any], hints: dict[str, str]) -> None:
        self.values, self.hints = values, hints
        self.plain = _INTERPRETED.isdisjoint(values)
        self._frozen: Any = None

    def frozen(self) -> Any:
        """The values as :func:`~amanda.containers.values.freeze_attrs` freezes them, made once."""
        if self._frozen is None:
            self._frozen = freeze_attrs(self.values)
        return self._frozen


class SharedAttributes:
    """The attribute sets one import has converted, by key (:meth:`key`)."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: dict[tuple, SharedEntry] = {}

    @staticmethod
    def key(node: Any, schema: Any) -> tuple | None:
        """The key of a ``NodeProto``'s attribute set under ``schema`` (the schema's identity
        and each attribute's bytes); None for a set that is not shared (see the module
        docstring)."""
        parts: list[Any] = [id(schema)]
        size = 0
        for attr in node.attribute:
            if attr.type not in _SHAREABLE_TYPES:
                return None
            data = attr.SerializeToString()
            size += len(data)
            if size > MAX_SHARED_BYTES:
                return None
            parts.append(data)
        return tuple(parts)

    def get(self, key: tuple | None) -> SharedEntry | None:
        """The entry of ``key``, or None (also for a key of None)."""
        return None if key is None else self.entries.get(key)

    def keep(self, key: tuple | None, values: dict[str, Any], hints: dict[str, str]) -> SharedEntry | None:
        """Keep a converted set under ``key`` (copies of ``values`` and ``hints``, which the
        caller goes on filling); None if the set is not shared."""
        if key is None:
            return None
        entry = self.entries[key] = SharedEntry(dict(values), dict(hints))
        return entry
