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
>>> dump_onnx(g, path)
>>> back = load_onnx(path)
>>> back.child("relu").uid == relu.uid, back.child("relu").outputs[0].attrs["onnx_name"]
(True, 'y')
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from amanda.containers.container import Container
from amanda.errors import FormatError
from amanda.io.onnx_export import DEFAULT_OPSET, MAX_IR_VERSION, PROTO_LIMIT, to_onnx
from amanda.io.onnx_import import MIN_IR_VERSION, check_model_header, from_onnx
from amanda.io.onnx_values import require_onnx

__all__ = [
    "DEFAULT_OPSET",
    "MAX_IR_VERSION",
    "MIN_IR_VERSION",
    "dump_onnx",
    "from_onnx",
    "load_onnx",
    "to_onnx",
]


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


def _load_external(model: Any, base: Path, source: str) -> None:
    from onnx.external_data_helper import load_external_data_for_model

    try:
        load_external_data_for_model(model, str(base))
    except Exception as exc:  # noqa: BLE001 - onnx raises OSError, ValidationError, ValueError …
        failed = _first_external(model)
        name = repr(failed.name) if failed is not None else "a tensor"
        location = (
            next((e.value for e in failed.external_data if e.key == "location"), "?")
            if failed
            else "?"
        )
        raise FormatError(
            f"{source}: tensor {name} keeps its data in external file {location!r}, which cannot be "
            f"read: {exc}",
            path=source,
            expected=f"readable external data in {base}",
            found=str(exc),
        ) from None


def _tensors(model: Any) -> Any:
    from onnx.external_data_helper import _get_all_tensors

    return _get_all_tensors(model)


def _first_external(model: Any) -> Any:
    from onnx import TensorProto

    return next((t for t in _tensors(model) if t.data_location == TensorProto.EXTERNAL), None)


def load_onnx(path: str | Path, *, load_external_data: bool = True, hierarchy: Any = "auto") -> Container:
    """Read an ONNX file (and the external data files it names) into a container.

    ``hierarchy``: whether an exported model's module tree is rebuilt as nested containers
    (see :func:`from_onnx`). Raises ``FormatError`` naming the file for an unreadable, corrupt
    or truncated file, an unsupported IR version, missing external data, or a graph that reads
    an undefined value.
    """
    require_onnx()
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise FormatError(f"cannot read {source!r}: {exc.strerror}", path=source) from None
    model = _parse(data, source)
    if load_external_data and _first_external(model) is not None:
        _load_external(model, Path(path).resolve().parent, source)
    return from_onnx(model, source=source, hierarchy=hierarchy)


def dump_onnx(
    container: Container,
    path: str | Path,
    *,
    external_data: bool | None = None,
    location: str | None = None,
    size_threshold: int = 1024,
) -> None:
    """Write ``container``'s effective view as an ONNX file the ONNX checker accepts.

    ``external_data``: True writes tensors of ``size_threshold`` bytes or more to the file
    ``location`` (default ``<file name>.data``, replaced if it exists) next to the model;
    None (the default) does so only when the model would pass protobuf's 2 GiB limit. A model
    the checker rejects raises ``FormatError`` naming the offending op, and no file is written.
    """
    onnx = require_onnx()
    model = to_onnx(container)
    target = Path(path)
    checked = model.ByteSize() <= PROTO_LIMIT  # to_onnx checked it in memory
    if external_data is None:
        external_data = not checked
    # a model too big to check in memory is checked as a file before it takes the target's name
    written = target if checked else target.with_name(target.name + ".partial")
    data_file = None
    try:
        if external_data:
            location = location or f"{target.name}.data"
            data_file = target.resolve().parent / location
            if data_file.exists():
                data_file.unlink()  # onnx appends to an existing data file
            onnx.save_model(
                model,
                str(written),
                save_as_external_data=True,
                all_tensors_to_one_file=True,
                location=location,
                size_threshold=size_threshold,
            )
        else:
            onnx.save_model(model, str(written))
    except (OSError, ValueError) as exc:
        raise FormatError(f"cannot write {str(path)!r}: {exc}", path=str(path)) from None
    if not checked:
        _check_file(written, data_file, str(path))
        written.replace(target)


def _check_file(written: Path, data_file: Path | None, shown: str) -> None:
    onnx = require_onnx()
    try:
        onnx.checker.check_model(str(written), full_check=True)
    except Exception as exc:  # noqa: BLE001 - ValidationError, InferenceError
        written.unlink(missing_ok=True)
        if data_file is not None:
            data_file.unlink(missing_ok=True)
        message = " ".join(str(exc).split())
        raise FormatError(
            f"{shown}: the model is rejected by the ONNX checker, so it is not written: {message}",
            path=shown,
            expected="a model the ONNX checker accepts",
            found=message,
        ) from None
