"""Namespaces <-> ONNX domains, and op port names <-> ONNX input and output positions.

A port is named after the schema's formal parameter at its position; the values of a variadic
parameter ``inputs`` are ports ``inputs_0``, ``inputs_1`` …; an op without a schema (a domain
amanda has no vocabulary for) has ports ``input_0`` … and ``output_0`` ….

>>> from amanda.namespaces import namespace
>>> concat = namespace("amanda/onnx/13").schema("Concat")
>>> port_names(concat.inputs, 3, "input")
('inputs_0', 'inputs_1', 'inputs_2')
>>> port_positions(concat.inputs, ["inputs_0", "inputs_1"], "input")
[0, 1]
>>> namespace_of_domain("com.example", 2), domain_of_namespace("amanda/onnx-ml/3")
('amanda/onnx/com.example/2', ('ai.onnx.ml', 3))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amanda.errors import SchemaError
from amanda.namespaces.name import NamespaceName

__all__ = [
    "Schemas",
    "domain_of_namespace",
    "namespace_of_domain",
    "port_names",
    "port_positions",
]

_CUSTOM = "amanda/onnx/"


def _vocabulary_domains() -> Any:
    from amanda.namespaces.onnx_vocab import onnx_domains

    return onnx_domains()


def namespace_of_domain(domain: str, version: int) -> str:
    """The amanda namespace of an ONNX opset import.

    The default domain gives ``amanda/onnx/<v>``, domains amanda has vocabularies for give the
    registry's names (``ai.onnx.ml`` -> ``amanda/onnx-ml/<v>``), any other domain
    ``amanda/onnx/<domain>/<v>``.
    """
    from amanda.namespaces.onnx_vocab import onnx_namespace_name

    if domain in ("", "ai.onnx"):
        return onnx_namespace_name("", version)
    if domain in _vocabulary_domains():
        return onnx_namespace_name(domain, version)
    return f"{_CUSTOM}{domain}/{version}"


def domain_of_namespace(name: str) -> tuple[str, int] | None:
    """The (ONNX domain, opset version) of an amanda namespace, or None if it is not ONNX's."""
    from amanda.namespaces.onnx_vocab import onnx_domain_of

    found = onnx_domain_of(name, _vocabulary_domains())
    if found is not None:
        return found
    parsed = NamespaceName.parse(name) if name.startswith(_CUSTOM) else None
    if parsed is not None and parsed.domain and parsed.opset is not None:
        return parsed.domain, parsed.opset
    return None


def _variadic(ports: Sequence[Any]) -> Any:
    return ports[-1] if ports and ports[-1].variadic else None


def port_names(ports: Sequence[Any] | None, count: int, prefix: str) -> tuple[str, ...]:
    """Names of ``count`` positional ports under the schema ports ``ports`` (None: no schema).

    Positions past the schema's ports (an op with too many values) are ``<prefix>_<i>``.
    """
    if ports is None:
        return tuple(f"{prefix}_{i}" for i in range(count))
    variadic = _variadic(ports)
    fixed = len(ports) - (variadic is not None)
    names = []
    for i in range(count):
        if i < fixed:
            names.append(ports[i].name)
        elif variadic is not None:
            names.append(f"{variadic.name}_{i - fixed}")
        else:
            names.append(f"{prefix}_{i}")
    taken: set[str] = set()
    for i, name in enumerate(names):  # a generated name may equal a formal one: keep them unique
        while name in taken:
            name = f"{name}_"
        names[i] = name
        taken.add(name)
    return tuple(names)


def _suffix(name: str, stem: str) -> int | None:
    if name.startswith(stem + "_"):
        tail = name[len(stem) + 1 :]
        if tail.isdigit():
            return int(tail)
    return None


def port_positions(ports: Sequence[Any] | None, names: Sequence[str], prefix: str) -> list[int]:
    """The ONNX position of each port name (the inverse of :func:`port_names`).

    Names the schema places (formal names, ``<variadic>_<k>``, ``<prefix>_<i>``) go where it
    says; when any name cannot be placed, every port keeps its declaration order.
    """
    positions: list[int] = []
    if ports is not None:
        variadic = _variadic(ports)
        fixed = len(ports) - (variadic is not None)
        index = {p.name: i for i, p in enumerate(ports[:fixed])}
        extra = 0
        for name in names:
            if name in index:
                positions.append(index[name])
            elif variadic is not None:
                # any other name is one more value of the variadic port, in declaration order
                k = _suffix(name, variadic.name)
                positions.append(fixed + (k if k is not None else extra))
                extra += 1
            else:
                k = _suffix(name, prefix)
                if k is None or k < fixed:
                    return list(range(len(names)))
                positions.append(k)
    else:
        for name in names:
            k = _suffix(name, prefix)
            if k is None:
                return list(range(len(names)))
            positions.append(k)
    if len(set(positions)) != len(positions):
        return list(range(len(names)))
    return positions


class Schemas:
    """Op schemas by (namespace, op type), looked up once per conversion.

    An unknown namespace or op type gives None: ops of domains amanda has no vocabulary for
    are converted with positional port names.
    """

    def __init__(self) -> None:
        self._namespaces: dict[str, Any] = {}
        self._schemas: dict[tuple[str | None, str | None], Any] = {}

    def get(self, namespace: str | None, op_type: str | None) -> Any:
        """The ``OpSchema`` of ``op_type`` in ``namespace``, or None."""
        key = (namespace, op_type)
        try:
            return self._schemas[key]
        except KeyError:
            pass
        found = None
        if namespace is not None and op_type is not None:
            ns = self._namespace(namespace)
            if ns is not None:
                try:
                    found = ns.schema(op_type)
                except SchemaError:
                    found = None
        self._schemas[key] = found
        return found

    def _namespace(self, name: str) -> Any:
        if name not in self._namespaces:
            from amanda.namespaces import namespace

            try:
                self._namespaces[name] = namespace(name)
            except SchemaError:
                self._namespaces[name] = None
        return self._namespaces[name]
