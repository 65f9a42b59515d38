"""Building pyrsistent maps fast: the import makes one per op's attributes and per port.

>>> from pyrsistent import pmap
>>> map_of({"axis": 1}) == pmap({"axis": 1})
True
"""

from __future__ import annotations

from typing import Any

from pyrsistent import PMap, pvector

__all__ = ["map_of"]

_new_map = object.__new__
_pvector = pvector


def map_of(items: dict[str, Any], cls: type = PMap) -> Any:
    """``pmap(items)`` for a dict (or, with ``cls=ScalarMap``, its ScalarMap), built as
    pyrsistent builds it (same buckets, so the same iteration order and equality) in one pass:
    about half the time of ``pmap``, which the import pays for every op's attribute and port
    maps. The values are stored as given (freeze them first).

    >>> from pyrsistent import pmap
    >>> m = map_of({"a": 1, "b": (2,)})
    >>> m == pmap({"a": 1, "b": (2,)}), list(m.items()) == list(pmap({"a": 1, "b": (2,)}).items())
    (True, True)
    """
    size = 2 * len(items) or 8
    buckets: list[Any] = [None] * size
    for pair in items.items():
        index = hash(pair[0]) % size
        bucket = buckets[index]
        if bucket is None:
            buckets[index] = [pair]
        else:
            bucket.append(pair)
    made: Any = _new_map(cls)
    made._size = len(items)
    made._buckets = _pvector(buckets)
    return made

