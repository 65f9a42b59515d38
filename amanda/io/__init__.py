"""Serialization: YAML/JSON documents (docs/format.md), and ONNX (the ``onnx`` extra)."""

from typing import Any

from amanda.containers import Container
from amanda.engines import install
from amanda.io.document import from_document, to_document
from amanda.io.text import dump, dumps, load, loads

__all__ = ["dump", "dumps", "from_document", "load", "loads", "to_document"]


def _ops_to_onnx(container: Container) -> Any:
    """``container`` as an ONNX model (unchecked) whose ops are written as themselves: an op's
    effective attributes include its enclosing function call's marker, but a part of a
    partitioned model runs the call's ops themselves, so none is written as a call."""
    from amanda.io.onnx.calls import FUNCTION_ATTR
    from amanda.io.onnx.export import to_onnx

    children = [ch.without_attrs(FUNCTION_ATTR) if FUNCTION_ATTR in ch.attrs else ch for ch in container.children]
    return to_onnx(container.evolve(children=children), check=False)


def _onnx_domain(namespace: str) -> tuple[str, int] | None:
    """The (ONNX domain, opset) of an amanda namespace, or None when it is not ONNX's."""
    from amanda.io.onnx.ports import domain_of_namespace

    return domain_of_namespace(namespace)


install("dumps", dumps)
install("loads", loads)
install("to_onnx", _ops_to_onnx)  # the onnx package is imported only when a part is exported
install("onnx_domain", _onnx_domain)
