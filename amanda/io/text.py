"""YAML and JSON text <-> containers, with safe loaders only.

Text is read by ``amanda.safe_load`` (bounded depth and alias expansion, plain data only). Bad
documents raise ``FormatError`` with the path of the bad field and, for YAML (and JSON, which
YAML reads too), its line and column.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from amanda.containers.arguments import expect_file, expect_type, shown
from amanda.containers.container import Container
from amanda.containers.edge import Edge, Port
from amanda.errors import ArgumentError, FormatError
from amanda.io.document import DocPath, from_document, to_document
from amanda.safe_load import compose_yaml, gc_paused, load_text, load_yaml_tree

__all__ = ["SafeDumper", "dump", "dumps", "load", "loads"]

# libyaml's C dumper when present, the *safe* variant; reading goes through amanda.safe_load
SafeDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_FOLD = 76  # base64 characters a line, as MIME writes them


class _Folded(str):
    """Base64 text to write as a literal block of short lines."""

    __slots__ = ()


class _Dumper(SafeDumper):  # type: ignore[misc, valid-type]
    """The safe dumper, writing array and bytes payloads as literal blocks of short lines.

    One long base64 line is valid YAML and still loads, but no editor or diff copes with it;
    the reader joins the lines again (base64 ignores the breaks).
    """


def _represent_dict(dumper: Any, data: dict) -> yaml.Node:
    if "__ndarray__" in data or "__bytes__" in data:
        data = _fold_payload(data)
    return dumper.represent_dict(data)


def _fold_payload(data: dict) -> dict:
    spec = data.get("__ndarray__")
    if isinstance(spec, dict) and isinstance(spec.get("data"), str):
        return {**data, "__ndarray__": {**spec, "data": _Folded(spec["data"])}}
    if isinstance(data.get("__bytes__"), str):
        return {**data, "__bytes__": _Folded(data["__bytes__"])}
    return data


def _represent_folded(dumper: Any, text: _Folded) -> yaml.Node:
    if len(text) <= _FOLD:
        return dumper.represent_str(str(text))
    lines = "\n".join(text[i : i + _FOLD] for i in range(0, len(text), _FOLD))
    return dumper.represent_scalar("tag:yaml.org,2002:str", lines, style="|")


_Dumper.add_representer(dict, _represent_dict)
_Dumper.add_representer(_Folded, _represent_folded)

_FORMATS = ("yaml", "json")


def _check_format(format: Any, formats: tuple[str, ...] = _FORMATS) -> None:
    if format.__class__ is not str or format not in formats:
        raise FormatError(f"expected a format among {formats}, found {shown(format)}",
                          expected=" or ".join(formats), found=shown(format))


def loads(text: str | bytes, format: str = "yaml") -> Any:
    """Build a container (or edge, or port) from YAML or JSON text.

    >>> g = loads("op: {name: f, input_ports: [{name: x}], output_ports: [{name: m}]}")
    >>> g.name, g.input_names
    ('f', ('x',))
    """
    _check_format(format)
    expect_type(text, (str, bytes), "text", "YAML or JSON text (str or bytes)")
    try:
        with gc_paused():  # building containers allocates as much as parsing
            data, node = _parse(text, format)
            try:
                built = from_document(data)
            except FormatError as exc:
                del data  # what was built of it is garbage now: free it before locating
                located = _located(exc, text, node)
                del node  # as the frames below, which hold the half-built document: the collector
                if located is not exc:  # resumes as the error leaves, and would walk them all
                    exc.__traceback__ = None
                raise located from exc.__cause__
            del data, node  # freed before the collector resumes, so its next pass need not walk them
            return built
    except RecursionError:
        raise FormatError(
            "the document nests containers too deeply to build", expected="less nesting"
        ) from None


def _parse(text: str | bytes, format: str) -> tuple[Any, yaml.Node | None]:
    """The document's plain data, and for YAML the node tree it was built from."""
    try:
        if format == "json":
            return load_text(text, format), None
        return load_yaml_tree(text)
    except UnicodeDecodeError as exc:
        raise FormatError(f"the document is not UTF-8 text: {exc.reason}") from None


def _located(exc: FormatError, text: str | bytes, node: yaml.Node | None) -> FormatError:
    """The same error with the line and column of its field, read from the YAML node tree
    (composed here only for JSON, whose reader keeps no marks)."""
    path = exc.path if isinstance(exc.path, tuple) else None
    if path is None or exc.line is not None:
        return exc
    if node is None:
        try:
            node = compose_yaml(text)
        except FormatError:
            return exc
    mark = _mark_of(node, path)
    if mark is None:
        return exc
    return FormatError(
        str(exc), path=path, expected=exc.expected, found=exc.found, line=mark[0], column=mark[1]
    )


def _mark_of(node: yaml.Node | None, path: DocPath) -> tuple[int, int] | None:
    """Line and column (1-based) of the deepest node of ``path`` present in the tree."""
    found = node
    for part in path:
        if isinstance(node, yaml.MappingNode):
            match = [(k, v) for k, v in node.value if getattr(k, "value", None) == str(part)]
            if not match:
                break
            found, node = match[0]  # the key: where a reader looks for the field
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(part, int)
            and 0 <= part < len(node.value)
        ):
            node = found = node.value[part]
        else:
            break
    if found is None:
        return None
    return found.start_mark.line + 1, found.start_mark.column + 1


def dumps(item: Container | Edge | Port, format: str = "yaml") -> str:
    """YAML or JSON text for a container (or edge, or port); ``loads`` reads it back equal.

    >>> from amanda.containers import op
    >>> loads(dumps(op("Relu", "r", ["x"], ["y"]))) == op("Relu", "r", ["x"], ["y"])
    True
    """
    _check_format(format)
    try:
        with gc_paused():  # the document is acyclic, and as large as the container
            return _write(to_document(item), format)
    except RecursionError:
        raise FormatError(
            "the container nests too deeply to write", expected="less nesting"
        ) from None
    except TypeError as exc:
        raise FormatError(f"cannot write the container: {exc}") from None


def _write(doc: dict, format: str) -> str:
    if format == "json":
        return json.dumps(doc, indent=1)
    return yaml.dump(
        doc,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=None,
        allow_unicode=True,
        width=100,
    )


_TENSORFLOW = ("pb", "pbtxt", "saved_model")  # GraphDef binary and text, a SavedModel folder


def _format_of(path: str | Path, format: str | None) -> str:
    expect_file(path)
    if format is not None:
        _check_format(format, (*_FORMATS, "onnx", *_TENSORFLOW))
        return format
    suffix = Path(path).suffix.lower()
    if suffix in (".yaml", ".yml"):
        return "yaml"
    if suffix == ".json":
        return "json"
    if suffix == ".onnx":
        return "onnx"
    if Path(path).name == "saved_model.pb":
        return "saved_model"
    if suffix in (".pb", ".pbtxt", ".pbtext"):
        return "pb" if suffix == ".pb" else "pbtxt"
    if Path(path).is_dir() and (Path(path) / "saved_model.pb").is_file():
        return "saved_model"
    raise FormatError(
        f"cannot tell the format of {str(path)!r} from its suffix",
        path=str(path),
        expected=".yaml, .yml, .json, .onnx, .pb, .pbtxt or a SavedModel folder",
        found=suffix or "no suffix",
    )


def load(path: str | Path, format: str | None = None, *, hierarchy: Any = "auto") -> Any:
    """Read a container from a file, by suffix: ``.yaml``/``.yml``, ``.json``, ``.onnx``, and
    TensorFlow's ``.pb``/``.pbtxt`` GraphDefs and SavedModel folders (``docs/tensorflow.md``).

    ``hierarchy`` (ONNX and TensorFlow): ``"auto"`` rebuilds an exported model's module tree
    (TensorFlow's name scopes) as nested containers where the file records it, ``False`` reads
    the flat graph (``docs/onnx.md``).
    """
    from amanda.io.onnx.hierarchy import check_hierarchy

    check_hierarchy(hierarchy)
    kind = _format_of(path, format)
    if kind == "onnx":
        from amanda.io.onnx import load_onnx

        return load_onnx(path, hierarchy=hierarchy)
    if kind in _TENSORFLOW:
        from amanda.io.tensorflow import load_graphdef, load_saved_model

        if kind == "saved_model":
            return load_saved_model(path, hierarchy=hierarchy)
        return load_graphdef(path, hierarchy=hierarchy)
    if hierarchy != "auto":
        raise ArgumentError.at("hierarchy", "'auto' for a YAML or JSON document (its nesting is written in it)",
                               repr(hierarchy))
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise FormatError(f"cannot read {str(path)!r}: {exc.strerror}", path=str(path)) from None
    try:
        return loads(data, kind)
    except FormatError as exc:
        message = str(exc).split(" (line ")[0]
        raise FormatError(
            f"{path}: {message}",
            path=exc.path,
            expected=exc.expected,
            found=exc.found,
            line=exc.line,
            column=exc.column,
        ) from exc


def dump(item: Container, path: str | Path, format: str | None = None, *, functions: str | None = None) -> Any:
    """Write a container to a file, by suffix: ``.yaml``/``.yml``, ``.json``, ``.onnx``, ``.pb``/
    ``.pbtxt`` (a TensorFlow GraphDef); for ONNX, return ``dump_onnx``'s report of what was
    written (None for the other formats).

    ``functions`` (ONNX only): ``"modules"`` writes each repeated module of a module tree as an
    ONNX model-local function (``docs/onnx.md``, "Module hierarchy"); None writes every op.
    """
    from amanda.io.onnx.module_functions import check_functions

    check_functions(functions)
    kind = _format_of(path, format)
    if kind == "onnx":
        from amanda.io.onnx import dump_onnx

        return dump_onnx(item, path, functions=functions)
    if functions is not None:
        raise ArgumentError.at("functions", "None for a format other than ONNX (it writes the tree as it is)",
                               repr(functions))
    if kind in ("pb", "pbtxt"):
        from amanda.io.tensorflow import dump_graphdef

        dump_graphdef(item, path)
        return None
    if kind == "saved_model":
        raise FormatError(f"cannot write a SavedModel ({str(path)!r}): write a GraphDef (.pb)",
                          path=str(path), expected=".pb or .pbtxt", found="a SavedModel folder")
    text = dumps(item, kind)
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise FormatError(f"cannot write {str(path)!r}: {exc.strerror or exc}", path=str(path)) from None
    return None
