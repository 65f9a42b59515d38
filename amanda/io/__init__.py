"""Serialization: YAML/JSON documents (docs/format.md), and ONNX (the ``onnx`` extra)."""

from amanda.io.document import from_document, to_document
from amanda.io.text import dump, dumps, load, loads

__all__ = ["dump", "dumps", "from_document", "load", "loads", "to_document"]
