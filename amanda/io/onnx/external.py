"""ONNX external data: tensors whose bytes lie in files beside the model, read lazily.

Loading (:func:`reading_external`): a tensor whose ``data_location`` is ``EXTERNAL`` becomes a
:class:`~amanda.containers.lazy.LazyTensor` naming its file, offset, dtype and shape; no weight
byte is read, only the file's size and time are taken. Its location is resolved inside the
model's folder only: an absolute location, one that leaves the folder (``..``, or a symlink
pointing outside it), a file that is missing or not a regular file, or an offset and length past
the file's end raise ``FormatError`` naming the tensor. Packed 4- and 2-bit types, which numpy
cannot view in place, and every tensor on a big-endian machine are read at once instead.

Saving (:func:`writing_external`, used by ``dump_onnx``): while a dump runs, a lazy tensor is
written as a reference to where it already lies rather than as its bytes
(``amanda.io.onnx.dump`` then decides how the new model reaches that file).

>>> import os, tempfile, numpy as np, onnx
>>> from onnx import numpy_helper
>>> folder = tempfile.mkdtemp()
>>> _ = open(os.path.join(folder, "w.bin"), "wb").write(np.arange(4, dtype=np.float32).tobytes())
>>> tensor = numpy_helper.from_array(np.zeros(4, np.float32), "w")
>>> tensor.ClearField("raw_data"); tensor.data_location = onnx.TensorProto.EXTERNAL
>>> _ = tensor.external_data.add(key="location", value="w.bin")
>>> with reading_external(folder, "m.onnx"):
...     lazy = external_tensor(tensor, "m.onnx: ")
>>> lazy.shape, lazy.array().tolist()
((4,), [0.0, 1.0, 2.0, 3.0])
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import numpy as np

from amanda.containers.lazy import FileStamp, LazyTensor, lazy_of, stamp_of
from amanda.containers.values import dtype_text, freeze_array
from amanda.errors import FormatError

__all__ = ["ExternalReader", "References", "external_reference", "external_tensor", "reading_external",
           "referencing", "writing_external"]


_PACKED = frozenset({"INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2"})  # two or four values a byte


def _viewable_types() -> dict[int, np.dtype]:
    """ONNX element types numpy views in place: one element per item of a fixed size."""
    from onnx import TensorProto, helper

    found: dict[int, np.dtype] = {}
    for name, number in TensorProto.DataType.items():
        if name in ("UNDEFINED", "STRING") or name in _PACKED:
            continue
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(number))
        except (KeyError, ValueError, TypeError):
            continue
        if dtype.kind in "biufc" and dtype.itemsize:
            dtype_text(dtype)  # only dtypes containers can hold
            found[number] = dtype.newbyteorder("<")
    return found


class _Types:
    viewable: dict[int, np.dtype] | None = None
    numbers: dict[np.dtype, int] | None = None


def viewable_types() -> dict[int, np.dtype]:
    """ONNX element type -> the little-endian dtype a lazy tensor views its bytes as."""
    if _Types.viewable is None:
        _Types.viewable = _viewable_types()
        _Types.numbers = {dtype: number for number, dtype in _Types.viewable.items()}
    return _Types.viewable


class ExternalReader:
    """Resolves the external tensors of the model in ``folder`` (``source`` names it in
    messages); ``lazy=False`` reads each tensor into memory at once instead."""

    def __init__(self, folder: str | os.PathLike, source: str, *, lazy: bool = True) -> None:
        self._given, self._folder = folder, ""  # resolved when a first tensor needs it
        self.source, self.lazy = source, lazy
        self.stamps: dict[str, FileStamp] = {}  # location -> the stamp of the file it names

    @property
    def folder(self) -> str:
        """The model's folder, every link in its path resolved (a model without external data
        never asks: resolving is a system call per path component)."""
        if not self._folder:
            self._folder = os.path.realpath(self._given)
        return self._folder

    def fail(self, tensor: Any, location: str, why: str, found: str = "") -> FormatError:
        return FormatError(
            f"{self.source}: tensor {tensor.name!r} keeps its data in external file {location!r}, {why}",
            path=tensor.name,
            expected=f"a readable file inside {self.folder} holding the tensor's bytes",
            found=found or why,
        )

    def _file(self, tensor: Any, location: str) -> FileStamp:
        stamp = self.stamps.get(location)
        if stamp is None:
            stamp = self.stamps[location] = self._resolve(tensor, location)
        return stamp

    def _resolve(self, tensor: Any, location: str) -> FileStamp:
        if not location or os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in location[:3]:
            raise self.fail(tensor, location, "which is an absolute path; a location is relative to the model's folder")
        real = os.path.realpath(os.path.join(self.folder, location))
        if os.path.commonpath([real, self.folder]) != self.folder:
            raise self.fail(tensor, location, f"which lies outside the model's folder ({real})")
        try:
            stamp = stamp_of(real)
        except OSError as exc:
            raise self.fail(tensor, location, f"which cannot be read: {exc.strerror}") from None
        if not os.path.isfile(real):
            raise self.fail(tensor, location, "which is not a regular file")
        return stamp

    def _range(self, tensor: Any, location: str, entries: dict[str, str], stamp: FileStamp) -> tuple[int, int | None]:
        """The offset and length (None when not given) the entries name, checked against the file."""
        try:
            offset = int(entries.get("offset", "0"))
            length = int(entries["length"]) if "length" in entries else None
        except ValueError:
            raise self.fail(tensor, location, "with an offset or length that is not an integer",
                            f"offset {entries.get('offset')!r}, length {entries.get('length')!r}") from None
        if offset < 0 or (length is not None and length < 0):
            raise self.fail(tensor, location, f"at a negative offset or length ({offset}, {length})")
        if offset + (length or 0) > stamp.size:
            raise self.fail(tensor, location, f"but {length} bytes at offset {offset} run past the file's "
                            f"end ({stamp.size} bytes)")
        return offset, length

    def tensor(self, tensor: Any, where: str = "") -> Any:
        """The lazy tensor (or, for what numpy cannot view, the array) ``tensor`` stores externally."""
        entries = {e.key: e.value for e in tensor.external_data}
        location = entries.get("location", "")
        stamp = self._file(tensor, location)
        dims = tuple(map(int, tensor.dims))
        dtype = viewable_types().get(tensor.data_type)
        if dtype is None or sys.byteorder != "little":
            return self._read(tensor, location, stamp, entries, where)
        size = math.prod(dims) * dtype.itemsize
        offset, length = self._range(tensor, location, entries, stamp)
        if length is not None and length != size:
            raise self.fail(tensor, location, f"with length {length}, but its dims and type take {size} bytes")
        if offset + size > stamp.size:
            raise self.fail(tensor, location, f"but its {size} bytes at offset {offset} run past the "
                            f"file's end ({stamp.size} bytes)")
        lazy = LazyTensor(stamp, offset, dtype.newbyteorder("="), dims, name=tensor.name)
        return lazy if self.lazy else freeze_array(lazy.array())

    def _read(self, tensor: Any, location: str, stamp: FileStamp, entries: dict[str, str], where: str) -> Any:
        """Packed types (and big-endian machines): the bytes read into a copy of the tensor."""
        from amanda.io.onnx.values import tensor_to_array

        offset, length = self._range(tensor, location, entries, stamp)
        with open(stamp.path, "rb") as file:
            file.seek(offset)
            data = file.read(-1 if length is None else length)
        inline = type(tensor)()
        inline.CopyFrom(tensor)
        inline.ClearField("external_data")
        inline.data_location = 0
        inline.raw_data = data
        return tensor_to_array(inline, where)


_READER: ContextVar[ExternalReader | None] = ContextVar("amanda_external_reader", default=None)


@contextlib.contextmanager
def reading_external(folder: str | os.PathLike, source: str, *, lazy: bool = True) -> Iterator[ExternalReader]:
    """Within the block, ONNX tensors kept in external files beside the model in ``folder`` are
    read as lazy tensors (see the module docstring); ``lazy=False`` reads them at once."""
    token = _READER.set(ExternalReader(folder, source, lazy=lazy))
    try:
        yield _READER.get()  # type: ignore[misc]
    finally:
        _READER.reset(token)


def external_tensor(tensor: Any, where: str = "") -> Any:
    """The value of a tensor whose data is external: lazy inside :func:`reading_external`, else a
    ``FormatError`` saying the data was not loaded."""
    reader = _READER.get()
    if reader is None:
        raise FormatError(
            f"{where}tensor {tensor.name!r} keeps its data in an external file that was not "
            "loaded; load the model from its file (amanda.load) so the data is read",
            path=tensor.name,
            expected="loaded tensor data",
            found="external data",
        )
    return reader.tensor(tensor, where)


# -- writing ---------------------------------------------------------------------------------


class References:
    """The lazy tensors a dump writes as references, by the file they lie in."""

    def __init__(self) -> None:
        self.files: dict[str, FileStamp] = {}  # absolute path -> stamp

    def reference(self, lazy: LazyTensor, name: str) -> Any:
        """A TensorProto pointing at ``lazy``'s bytes (its location is the file's absolute path
        until the dump says where the new model finds it), or None for a type ONNX cannot hold."""
        from onnx import TensorProto

        viewable_types()
        number = _Types.numbers.get(lazy.dtype.newbyteorder("<")) if _Types.numbers else None  # type: ignore[union-attr]
        if number is None:
            return None
        lazy.check()
        self.files[lazy.file.path] = lazy.file
        tensor = TensorProto(name=name, data_type=number, dims=lazy.shape, data_location=TensorProto.EXTERNAL)
        for key, value in (("location", lazy.file.path), ("offset", str(lazy.offset)), ("length", str(lazy.nbytes))):
            tensor.external_data.add(key=key, value=value)
        return tensor


_WRITER: ContextVar[References | None] = ContextVar("amanda_external_writer", default=None)


@contextlib.contextmanager
def writing_external() -> Iterator[References]:
    """Within the block, ONNX export writes lazy tensors as references to their files."""
    token = _WRITER.set(References())
    try:
        yield _WRITER.get()  # type: ignore[misc]
    finally:
        _WRITER.reset(token)


def referencing() -> bool:
    """Whether the export under way holds references to external files (which ONNX's checker
    can only check from the written model's folder)."""
    writer = _WRITER.get()
    return writer is not None and bool(writer.files)


def external_reference(array: np.ndarray, name: str) -> Any:
    """The reference tensor for a lazy ``array`` while a dump runs, else None (write its bytes)."""
    writer = _WRITER.get()
    if writer is None:
        return None
    lazy = lazy_of(array)
    return None if lazy is None else writer.reference(lazy, name)
