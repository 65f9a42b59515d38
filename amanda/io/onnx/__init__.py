"""ONNX files and ``ModelProto`` objects <-> containers (needs the ``onnx`` extra).

``amanda.load("m.onnx")`` and ``amanda.dump(c, "m.onnx")`` call :func:`load_onnx` and
:func:`dump_onnx`; :func:`from_onnx` and :func:`to_onnx` convert protos in memory. The mapping
is described in ``docs/onnx.md``.

>>> import os, tempfile, amanda
>>> relu = amanda.op("Relu", "relu", inputs=["X"], outputs=["Y"])
>>> g = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs={"dtype": "float32", "shape": (2,)})],
...     outputs=[amanda.Port("y", attrs={"dtype": "float32", "shape": (2,)})], children=[relu],
...     edges=[("g:x", "relu:X"), ("relu:Y", "g:y")], attrs={"namespace": "amanda/onnx/17"})
>>> path = os.path.join(tempfile.mkdtemp(), "relu.onnx")
>>> dump_onnx(g, path).data is None  # a small model: one file, no external data
True
>>> back = load_onnx(path)
>>> back.child("relu").uid == relu.uid, back.child("relu").outputs[0].attrs["onnx_name"]
(True, 'y')
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from amanda.containers.container import Container
from amanda.errors import FormatError
from amanda.io.onnx.dump import DumpReport, write_external
from amanda.io.onnx.export import DEFAULT_OPSET, MAX_IR_VERSION, PROTO_LIMIT, to_onnx
from amanda.io.onnx.external import reading_external, writing_external
from amanda.io.onnx.importer import MIN_IR_VERSION, check_model_header, from_onnx
from amanda.io.onnx.module_functions import check_functions
from amanda.io.onnx.spans import stripped
from amanda.io.onnx.values import VIEWED_TYPES, require_onnx

__all__ = [
    "DEFAULT_OPSET",
    "DumpReport",
    "MAX_IR_VERSION",
    "MIN_IR_VERSION",
    "dump_onnx",
    "from_onnx",
    "load_onnx",
    "to_onnx",
]


_STRIP_FROM = 8 << 20  # files smaller than this are parsed whole: their weights copy about as fast as a walk


def _parse(data: bytes, source: str) -> Any:
    onnx = require_onnx()
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise FormatError(
            f"{source}: not a readable ONNX model (corrupt or truncated file): {exc}",
            path=source,
            expected="a serialized onnx.ModelProto",
            found=str(exc),
        ) from None
    # checked before external data is read: a file that only parses by chance stops here
    check_model_header(model, source)
    return model


class _ModelFolder(os.PathLike):
    """The folder of the model file at ``path`` once its links are resolved, worked out only
    when ``os.fspath`` asks (the external data reader asks when a first tensor needs it)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = path

    def __fspath__(self) -> str:
        return str(Path(self.path).resolve().parent)


def load_onnx(path: str | Path, *, load_external_data: bool = True, lazy: bool = True,
              hierarchy: Any = "auto") -> Container:
    """Read an ONNX file (and the external data files it names) into a container.

    Tensors kept in external data files stay there (``lazy``, the default): only their
    locations are read, and their values are memory-mapped when something reads them (see
    "Large models" in ``docs/onnx.md``); ``lazy=False`` reads them into memory at once.
    ``hierarchy``: whether an exported model's module tree is rebuilt as nested containers
    (see :func:`from_onnx`). Raises ``FormatError`` naming the file for an unreadable, corrupt
    or truncated file, an unsupported IR version, missing external data or data outside the
    model's folder, or a graph that reads an undefined value.
    """
    require_onnx()
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise FormatError(f"cannot read {source!r}: {exc.strerror}", path=source) from None
    model, spans = _parse_weights_apart(data, source)
    if load_external_data:  # entering costs nothing; walking the model for external tensors did
        with reading_external(_ModelFolder(path), source, lazy=lazy):
            return from_onnx(model, source=source, hierarchy=hierarchy, serialized=data, spans=spans)
    return from_onnx(model, source=source, hierarchy=hierarchy, serialized=data, spans=spans)


def _parse_weights_apart(data: bytes, source: str) -> tuple[Any, list[tuple[int, int]] | None]:
    """The model in ``data``, parsed without its weights' raw bytes where they are many (they are
    read as views of ``data`` at the spans returned; parsing would copy them all once more), or
    parsed whole (spans None): a small file, one the walk cannot follow, or one with functions
    (whose inlining rebuilds the graph)."""
    found = stripped(data, VIEWED_TYPES) if len(data) >= _STRIP_FROM else None
    if found is not None:
        try:
            model = _parse(found[0], source)
        except FormatError:
            model = None  # the whole file says what is wrong with it, below
        if model is not None and not model.functions:
            return model, found[1]
    return _parse(data, source), None


def dump_onnx(
    container: Container,
    path: str | Path,
    *,
    external_data: bool | None = None,
    location: str | None = None,
    size_threshold: int = 1024,
    link: bool = False,
    functions: str | None = None,
) -> DumpReport:
    """Write ``container``'s effective view as an ONNX file the ONNX checker accepts, and
    return a :class:`~amanda.io.onnx.dump.DumpReport` of what was written.

    ``external_data``: True writes tensors of ``size_threshold`` bytes or more to a data file
    next to the model (``location``, default ``<file name>.data``); None (the default) does so
    when the model holds weights still kept in data files (a model loaded with external data)
    or would pass protobuf's 2 GiB limit; False writes every tensor into the model file, reading
    such weights. Weights still in their files are not written again: a data file in the
    model's folder is referred to where it is; one elsewhere is cloned (where the file system
    shares blocks), hard-linked (``link=True``) or else copied, with a warning (see "Large
    models" in ``docs/onnx.md`` and ``amanda.io.onnx.dump``). Existing files are never written
    into. A model the checker rejects raises ``FormatError``, and no file is written.
    ``functions="modules"`` writes each repeated module of a module tree as an ONNX model-local
    function called once per instance (see "Module hierarchy" in ``docs/onnx.md``).
    """
    require_onnx()
    check_functions(functions)
    target = Path(path)
    if external_data is False:
        model = to_onnx(container, functions=functions)
        references = None
    else:
        with writing_external() as references:
            model = to_onnx(container, functions=functions)
    big = model.ByteSize() > PROTO_LIMIT  # to_onnx checked smaller ones in memory
    if references is not None and (external_data or references.files or big):
        return write_external(model, target, references, location=location, size_threshold=size_threshold,
                              link=link, infer=big)
    written = target.with_name(target.name + ".partial") if big else target
    try:
        data = model.SerializeToString()
        written.write_bytes(data)
    except (OSError, ValueError) as exc:
        raise FormatError(f"cannot write {str(path)!r}: {exc}", path=str(path)) from None
    if big:
        _check_file(written, str(path))
        written.replace(target)
    return DumpReport(str(target), None, len(data))


def _check_file(written: Path, shown: str) -> None:
    """Run ONNX's full check on a written model too big to check in memory; FormatError, with
    the file removed, if it is refused."""
    onnx = require_onnx()
    try:
        onnx.checker.check_model(str(written), full_check=True)
    except Exception as exc:  # noqa: BLE001 - ValidationError, InferenceError
        written.unlink(missing_ok=True)
        message = " ".join(str(exc).split())
        raise FormatError(
            f"{shown}: the model is rejected by the ONNX checker, so it is not written: {message}",
            path=shown,
            expected="a model the ONNX checker accepts",
            found=message,
        ) from None
