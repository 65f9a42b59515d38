"""Names for the values that travel between modules: type aliases for paths and edge keys,
and the small records the effective view is built from.

A *path* is the tuple of child names from a container down to a descendant (``()`` is the
container itself); a *port key* is a path and a port name or index; an *edge key* is the
``(src, dst)`` pair of endpoints that identifies an edge for tombstones (``Edge.key``); a
*lifted key* is an edge key with both ends made full paths from one root, as tombstones of
different levels are compared.

>>> j = Junction(("block",), "x", "in")
>>> j.path, j.port, j.side
(('block',), 'x', 'in')
>>> path, port, side = j  # still a tuple where speed matters
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Union

if TYPE_CHECKING:
    from amanda.containers.edge import Endpoint

__all__ = ["EdgeKey", "Junction", "LiftedKey", "Path", "PortKey", "PortRef"]

Path = tuple[str, ...]
PortRef = Union[str, int]  # noqa: UP007  # a port name, an index, or -1 (CONTROL)
PortKey = tuple[Path, PortRef]
EdgeKey = tuple["Endpoint", "Endpoint"]
LiftedKey = tuple[Path, PortRef, Path, PortRef]


class Junction(NamedTuple):
    """A boundary port of a nested container that edges pass through on their way between
    leaf ops: the container's ``path``, the ``port`` and its ``side`` as the flow sees it
    (``"in"``: entering the container, ``"out"``: leaving it, ``"ctl"``: a named control port)."""

    path: Path
    port: PortRef
    side: str
