"""Name maps: where each output of the source graph lives in the mapped graph.

A mapping renames values: ``dense/Relu:activations`` becomes ``dense/Relu:Y``, a Placeholder's
``output`` becomes an input port of the graph. ``NameMap`` records every output port of every op
a rule touched, from its source endpoint to its target endpoint (None when the value no longer
exists, as for a MatMul fused into a Gemm); outputs of untouched ops keep their endpoint.
Endpoints are full paths from the root; ``Endpoint(SELF, x)`` is the root's input port ``x`` and
``Endpoint(path, x)`` the port ``x`` of the nested container at ``path``.

>>> from amanda.containers import Endpoint
>>> names = NameMap({Endpoint(("r",), "activations"): Endpoint(("r",), "Y")})
>>> names.resolve(Endpoint(("r",), "activations")), names.resolve(Endpoint(("x",), "y"))
(Endpoint('r', 'Y'), Endpoint('x', 'y'))
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from amanda.containers.edge import Endpoint
from amanda.errors import MappingError

__all__ = ["NameMap"]


class NameMap(Mapping[Endpoint, "Endpoint | None"]):
    """Source endpoint -> target endpoint (or None) for every output a mapping touched.

    ``source`` (the container that was mapped) lets ``resolve`` read ``"op/path:port"`` strings.
    """

    __slots__ = ("_data", "source")

    def __init__(self, data: Mapping[Endpoint, Endpoint | None] | None = None,
                 source: Any = None) -> None:
        self._data = dict(data or {})
        self.source = source

    def __getitem__(self, key: Any) -> Endpoint | None:
        return self._data[self._key(key)]

    def __iter__(self) -> Iterator[Endpoint]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"NameMap({len(self._data)} endpoints)"

    def _key(self, key: Any) -> Endpoint:
        end = Endpoint.of(key)
        if isinstance(end.op, str) and self.source is not None:
            from amanda.containers.invariants import resolve_path

            resolved = resolve_path(self.source, end.op)
            if resolved is not None:
                return Endpoint(resolved, end.port)
        if isinstance(end.op, str):
            return Endpoint((end.op,), end.port)
        return end

    def resolve(self, key: Any) -> Endpoint:
        """The target endpoint of a source endpoint (itself when no rule touched it).

        Raises ``MappingError`` when the mapping removed the value.
        """
        end = self._key(key)
        if end not in self._data:
            return end
        found = self._data[end]
        if found is None:
            raise MappingError.at(str(end), "a value the mapped graph still has",
                                  "a value the mapping removed (fused or dropped)")
        return found

    def then(self, later: NameMap) -> NameMap:
        """The map of this mapping followed by ``later`` (composition)."""
        data: dict[Endpoint, Endpoint | None] = {}
        for key, value in self._data.items():
            data[key] = value if value is None else later._data.get(value, value)
        for key, value in later._data.items():
            data.setdefault(key, value)
        return NameMap(data, self.source)
