"""GraphDef files: ``.pb`` (binary) and ``.pbtxt`` (protobuf text format), read and written.

The top container is named by the file's stem (``dense.pb`` -> ``dense``), with ``_graph``
appended where a node or name scope at the top of the graph has that name already (amanda
forbids a child named like its parent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from amanda.containers.arguments import expect_file
from amanda.containers.container import Container
from amanda.errors import ArgumentError, FormatError
from amanda.io.onnx.hierarchy import check_hierarchy
from amanda.io.tensorflow.protos import message, parse, require_protobuf
from amanda.io.tensorflow.read_graph import from_graph_def
from amanda.io.tensorflow.write_graph import to_graph_def

__all__ = ["TEXT_SUFFIXES", "dump_graphdef", "graph_name", "load_graphdef", "read_bytes"]

TEXT_SUFFIXES = (".pbtxt", ".pbtext")


def read_bytes(path: Path) -> bytes:
    """The bytes of ``path``, or a FormatError that names it."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise FormatError(f"cannot read {str(path)!r}: {exc.strerror or exc}", path=str(path)) from None


def parse_text(text: bytes, source: str) -> Any:
    """A text-format ``GraphDef``, or a FormatError with the line and column of the fault."""
    require_protobuf()
    from google.protobuf import text_format

    graph = message("tensorflow.GraphDef")()
    try:
        text_format.Parse(text.decode("utf-8"), graph)
    except text_format.ParseError as exc:
        raise FormatError(f"{source}: not a text GraphDef: {exc}", path=source, expected="a text-format "
                          "tensorflow.GraphDef", found=type(exc).__name__, line=exc.GetLine(),
                          column=exc.GetColumn()) from None
    except UnicodeDecodeError as exc:
        raise FormatError(f"{source}: not UTF-8 text at byte {exc.start}", path=source,
                          expected="UTF-8 text", found="other bytes") from None
    return graph


def graph_name(stem: str, graph_def: Any) -> str:
    """``stem``, or ``stem + '_graph'`` where a top-level node or scope is named ``stem``.

    >>> gd = message("tensorflow.GraphDef")(); _ = gd.node.add(name="dense/MatMul", op="MatMul")
    >>> graph_name("dense", gd), graph_name("model", gd)
    ('dense_graph', 'model')
    """
    name = stem or "graph"
    tops = {node.name.split("/", 1)[0] for node in graph_def.node}
    while name in tops:
        name += "_graph"
    return name


def load_graphdef(path: str | Path, *, hierarchy: Any = True) -> Container:
    """Read a ``GraphDef`` file (``.pbtxt``/``.pbtext``: text format; anything else: binary)
    into a container in ``amanda/tensorflow/<version>`` (``docs/tensorflow.md``)."""
    check_hierarchy(hierarchy)
    path = Path(expect_file(path))
    data = read_bytes(path)
    source = str(path)
    graph = parse_text(data, source) if path.suffix.lower() in TEXT_SUFFIXES else parse("tensorflow.GraphDef", data, source)
    return from_graph_def(graph, graph_name(path.stem, graph), hierarchy=hierarchy, where=path.stem)


def dump_graphdef(graph: Container, path: str | Path) -> Path:
    """Write ``graph`` as a ``GraphDef`` (text format for ``.pbtxt``/``.pbtext``); the path."""
    if not isinstance(graph, Container):
        raise ArgumentError.at("graph", "a Container", type(graph).__name__)
    path = Path(expect_file(path))
    proto = to_graph_def(graph)
    try:
        if path.suffix.lower() in TEXT_SUFFIXES:
            from google.protobuf import text_format

            path.write_text(text_format.MessageToString(proto), encoding="utf-8")
        else:
            path.write_bytes(proto.SerializeToString(deterministic=True))
    except OSError as exc:
        raise FormatError(f"cannot write {str(path)!r}: {exc.strerror or exc}", path=str(path)) from None
    return path
