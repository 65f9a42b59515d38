"""Selection: the immutable answer of a query, ``(path, container)`` pairs in document order.

>>> import amanda
>>> from amanda.containers import Container, op
>>> g = Container("G", "g", children=[Container("B", "b", children=[op("Dot", "d")]), op("Dot", "e")])
>>> hits = amanda.query.select(g, "$..[?type == 'Dot']")
>>> hits.paths
(('b', 'd'), ('e',))
>>> amanda.query.select(g, "$.*").select("$.d").paths
(('b', 'd'),)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from amanda.containers.records import Path
from amanda.errors import PathError, QueryError

if TYPE_CHECKING:
    from amanda.containers.container import Container
    from amanda.query.evaluate import Hits
    from amanda.query.indexes import NodeTable

__all__ = ["Selection"]

_set = object.__setattr__


class Selection:
    """``(path, container)`` pairs in document order; immutable.

    ``paths`` are tuples of path segments from the root queried (``root``);
    ``containers`` the selected containers. A Selection can be handed to transforms
    that take paths (``amanda.replace``, ``amanda.fuse``, ``amanda.with_attrs``), and
    queried further with :meth:`select`.
    """

    __slots__ = ("_containers", "_hits", "_paths", "_table")
    _table: NodeTable
    _hits: Hits
    _paths: tuple[Path, ...] | None
    _containers: tuple[Container, ...] | None

    def __init__(self, t: NodeTable, hits: Hits) -> None:
        _set(self, "_table", t)
        _set(self, "_hits", hits)
        _set(self, "_paths", None)
        _set(self, "_containers", None)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"Selection is immutable: cannot set {key!r}")

    def _materialise(self) -> None:
        paths, containers = self._hits.materialise(self._table)
        _set(self, "_containers", containers)
        _set(self, "_paths", paths)

    @property
    def root(self) -> Container:
        """The container the query ran on."""
        return self._table.root

    @property
    def paths(self) -> tuple[Path, ...]:
        """The selected paths (tuples of names from the root), in document order."""
        if self._paths is None:
            self._materialise()
        return self._paths  # type: ignore[return-value]

    @property
    def containers(self) -> tuple[Container, ...]:
        """The selected containers, in document order."""
        if self._containers is None:
            self._materialise()
        return self._containers  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self._hits)

    def __bool__(self) -> bool:
        return len(self._hits) > 0

    def __iter__(self) -> Iterator[tuple[Path, Container]]:
        return zip(self.paths, self.containers)

    def __getitem__(self, index: int) -> tuple[Path, Container]:
        """The ``(path, container)`` pair at ``index`` (a slice gives a pair of tuples).

        A non-integer index raises QueryError; one out of range PathError.
        """
        if isinstance(index, bool) or not isinstance(index, (int, slice)):
            raise QueryError(f"a Selection is indexed by an int or a slice, found {type(index).__name__}",
                             expected="an int or a slice", found=repr(index))
        if isinstance(index, int) and not -len(self) <= index < len(self):
            raise PathError(f"the selection has {len(self)} nodes; there is no index {index}",
                            expected=f"an index in [{-len(self)}, {len(self)})", found=str(index))
        return self.paths[index], self.containers[index]

    def __contains__(self, path: object) -> bool:
        return path in self.paths

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Selection):
            return NotImplemented
        return self.paths == other.paths and all(a is b or a == b for a, b in zip(self.containers, other.containers))

    def __hash__(self) -> int:
        return hash(self.paths)

    def __repr__(self) -> str:
        shown = ", ".join("/".join(map(str, p)) or "$" for p in self.paths[:5])
        more = f", … {len(self) - 5} more" if len(self) > 5 else ""
        return f"Selection([{shown}{more}])"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's display: one line per selected path with its type."""
        lines = [f"Selection of {len(self)} in {self.root.name}"]
        for path, node in list(self)[:50]:
            lines.append(f"  {'/'.join(path) or '<root>'}: {node.type}")
        if len(self) > 50:
            lines.append(f"  … {len(self) - 50} more")
        printer.text("\n".join(lines))

    def _repr_svg_(self) -> str | None:
        """A notebook's drawing of the queried model with the selection highlighted."""
        from amanda.engines import engine

        return engine("notebook_svg")(self.root, highlight=self)  # type: ignore[no-any-return]

    def select(self, selector: str) -> Selection:
        """Continue the query from every selected node (``$`` stands for them; it may be
        left out, as in ``sel.select("..[?is_op]")``). Paths and views stay those of the
        original root: attributes are still inherited from above the selected nodes.

        >>> from amanda.containers import Container, op
        >>> g = Container("G", "g", children=[Container("B", "b", children=[op("Dot", "d")])])
        >>> from amanda.query import select
        >>> select(g, "$.b").select("..[?is_op]").paths
        (('b', 'd'),)
        """
        from amanda.query import compile_selector

        compiled = compile_selector(selector, relative=True)  # raises QueryError for a non-string
        positions: Sequence[int] = self._hits.positions
        return Selection(self._table, compiled.run(self._table, positions))
