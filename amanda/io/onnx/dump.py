"""Saving a model as ONNX with external data, writing only what is new.

``dump_onnx`` exports under :func:`~amanda.io.onnx.external.writing_external`, so a weight that
still lies in a data file (a lazy tensor of a loaded model) comes out as a reference to its bytes
there. :func:`write_external` then makes each such file reachable from the new model's folder,
and writes the rest:

- a data file inside the new model's folder (the folder of a model dumped beside the one it was
  loaded from) is referred to by its relative location; nothing is written for its tensors;
- a data file elsewhere is cloned into the new folder, under its own name (numbered when the name
  is taken), where the file system can share its blocks (a reflink: btrfs, XFS, ...): no byte is
  copied, and the clone is a file of its own;
- with ``link=True``, it gets a hard link there instead, where the file system allows (the same
  file system): no byte is copied. A hard link is the same file under a second name, which
  onnxruntime and amanda read, but ``onnx.load`` and ``onnx.checker`` refuse a data file with
  several links (as a possible hardlink attack), for the new model and for the original alike;
  so links are made only when asked for;
- otherwise the tensors the model uses are copied into the new data file (in the kernel, with
  ``copy_file_range`` where there is one), with a ``UserWarning`` saying so.

New and changed tensors of ``size_threshold`` bytes or more go to the new data file,
``<model file name>.data`` (``<name>.<n>.data`` when that name is a data file the model reads),
each at an offset aligned for memory mapping. No existing file is written into: new files are
written under temporary names and renamed into place, so a model loaded from a replaced file
refuses to read it (its stamp changed) rather than reading other bytes. What was written and
how each data file was reached is returned as a :class:`DumpReport`.
"""

from __future__ import annotations

import os
import uuid
import warnings
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from amanda.containers.lazy import FileStamp
from amanda.errors import FormatError
from amanda.io.onnx.external import References

__all__ = ["DumpReport", "write_external"]

_ALIGN_LARGE = 4096  # a page: onnxruntime and amanda map tensors at such offsets
_ALIGN_SMALL = 64
_LARGE = 1 << 16
_CHUNK = 1 << 24


class DumpReport(NamedTuple):
    """What ``dump_onnx`` wrote, and how the new model reaches the weights it did not write.

    ``model``: the model file; ``data``: the new data file (None when no tensor needed one);
    ``written``: the bytes written (model file and new data); ``referenced``: locations of data
    files the model reads where they are (inside its folder); ``linked``: ``(location, original,
    how)`` of data files elsewhere made reachable without copying, ``how`` being ``"clone"`` or
    ``"hard link"`` (one found from an earlier dump counts as made); ``copied``: ``(original,
    bytes)`` of data copied into the new data file.
    """

    model: str
    data: str | None
    written: int
    referenced: tuple[str, ...] = ()
    linked: tuple[tuple[str, str, str], ...] = ()
    copied: tuple[tuple[str, int], ...] = ()


def _tensors(model: Any) -> list[Any]:
    from onnx.external_data_helper import _get_all_tensors

    found = list(_get_all_tensors(model))
    for sparse in model.graph.sparse_initializer:
        found += [sparse.values, sparse.indices]
    return found


def _entries(tensor: Any) -> dict[str, str]:
    return {e.key: e.value for e in tensor.external_data}


def _set_external(tensor: Any, location: str, offset: int, length: int) -> None:
    from onnx import TensorProto

    tensor.ClearField("external_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        tensor.external_data.add(key=key, value=value)


def _inside(path: str, folder: str) -> bool:
    return os.path.commonpath([path, folder]) == folder


def _temporary(name: str) -> str:
    """A fresh hidden name beside ``name`` (a relative path) to write it under first."""
    head, tail = os.path.split(name)
    return os.path.join(head, f".{tail}.{uuid.uuid4().hex[:12]}.partial")


class _Data:
    """The new data file, written under a temporary name, opened on first use."""

    def __init__(self, folder: str, name: str) -> None:
        self.folder, self.name = folder, name
        self.temporary = _temporary(name)
        self.file: BinaryIO | None = None
        self.size = 0

    def _start(self, length: int) -> tuple[BinaryIO, int]:
        if self.file is None:
            self.file = open(os.path.join(self.folder, self.temporary), "wb")  # noqa: SIM115 - closed in close()
        align = _ALIGN_LARGE if length >= _LARGE else _ALIGN_SMALL
        offset = -(-self.size // align) * align
        if offset > self.size:
            self.file.write(bytes(offset - self.size))
        self.size = offset + length
        return self.file, offset

    def write(self, data: bytes) -> int:
        file, offset = self._start(len(data))
        file.write(data)
        return offset

    def copy(self, source: str, start: int, length: int) -> int:
        file, offset = self._start(length)
        file.flush()
        with open(source, "rb") as src:
            done = 0
            while done < length:
                step = min(_CHUNK, length - done)
                if hasattr(os, "copy_file_range"):
                    moved = os.copy_file_range(src.fileno(), file.fileno(), step, start + done, offset + done)
                else:  # pragma: no cover - platforms without copy_file_range
                    chunk = os.pread(src.fileno(), step, start + done)
                    moved = os.pwrite(file.fileno(), chunk, offset + done)
                if moved <= 0:
                    raise OSError(f"could not copy bytes {start + done}.. of {source}")
                done += moved
        file.seek(self.size)
        return offset

    def close(self, keep: bool) -> None:
        if self.file is not None:
            self.file.close()
            path = os.path.join(self.folder, self.temporary)
            if keep:
                os.replace(path, os.path.join(self.folder, self.name))
            else:
                os.unlink(path)


def _clone(source: str, target: str) -> None:
    """Make ``target`` a copy-on-write clone of ``source`` (FICLONE); OSError where the file
    system cannot."""
    import fcntl

    ficlone = 0x40049409  # _IOW(0x94, 9, int), Linux
    with open(source, "rb") as src, open(target, "xb") as dst:
        try:
            fcntl.ioctl(dst.fileno(), ficlone, src.fileno())
        except OSError:
            dst.close()
            os.unlink(target)
            raise


def _share(source: str, target: str, link: bool) -> str:
    """Make ``target`` reach ``source``'s bytes without copying them; how, or OSError."""
    if link:
        os.link(source, target)
        return "hard link"
    if not hasattr(os, "copy_file_range"):  # pragma: no cover - FICLONE is Linux's
        raise OSError("no copy-on-write clones on this platform")
    _clone(source, target)
    return "clone"


class _Plan:
    """Where the new model in ``folder`` finds each referenced data file."""

    def __init__(self, folder: str, files: dict[str, FileStamp], data: str, link: bool) -> None:
        self.folder, self.data, self.link = folder, data, link
        self.locations: dict[str, str] = {}  # original path -> location in the new model
        self.copies: dict[str, int] = {}  # original path -> bytes copied
        self.referenced: list[str] = []
        self.linked: list[tuple[str, str, str]] = []
        self.made: list[str] = []  # links made by this dump (removed if it fails)
        self.reason = ""  # why a file had to be copied
        for path in files:
            self._reach(path)

    def _reach(self, path: str) -> None:
        if _inside(path, self.folder):
            location = Path(os.path.relpath(path, self.folder)).as_posix()
            self.locations[path] = location
            self.referenced.append(location)
            return
        stem, suffix = os.path.splitext(os.path.basename(path))
        for n in range(10_000):
            name = f"{stem}{suffix}" if n == 0 else f"{stem}.{n}{suffix}"
            candidate = os.path.join(self.folder, name)
            if name == self.data:
                continue
            if os.path.lexists(candidate):
                if self.link and os.path.isfile(candidate) and os.path.samefile(candidate, path):
                    how = "hard link"  # one an earlier dump made
                    break
                continue
            try:
                how = _share(path, candidate, self.link)
            except OSError as exc:
                self.copies[path] = 0
                self.reason = exc.strerror or str(exc)
                return
            self.made.append(candidate)
            break
        self.locations[path] = name
        self.linked.append((name, path, how))

    def undo(self) -> None:
        for made in self.made:
            os.unlink(made)


def _data_name(folder: str, target: Path, location: str | None, files: dict[str, FileStamp]) -> str:
    read = {os.path.relpath(p, folder) for p in files if _inside(p, folder)}
    if location is not None:
        if os.path.isabs(location) or not _inside(os.path.realpath(os.path.join(folder, location)), folder):
            raise FormatError(f"location {location!r} must be a file name inside the model's folder",
                              path=location, expected="a relative location inside the folder", found=location)
        if os.path.normpath(location) in read:
            raise FormatError(f"location {location!r} is a data file the model reads; the dump would overwrite "
                              "it: give another location", path=location, expected="a new file", found=location)
        return location
    name, n = f"{target.name}.data", 0
    while name in read:
        n += 1
        name = f"{target.name}.{n}.data"
    return name


def _place(tensors: list[Any], plan: _Plan, data: _Data, threshold: int) -> None:
    """Point each reference at where the new model finds it; move large new tensors to ``data``."""
    for tensor in tensors:
        if tensor.data_location == 1:
            entries = _entries(tensor)
            source = entries.get("location", "")
            if source not in plan.locations and source not in plan.copies:
                continue  # a relative location the model already had (never produced by export)
            offset, length = int(entries["offset"]), int(entries["length"])
            if source in plan.copies:
                _set_external(tensor, data.temporary, data.copy(source, offset, length), length)
                plan.copies[source] += length
            else:
                _set_external(tensor, plan.locations[source], offset, length)
        elif tensor.HasField("raw_data") and len(tensor.raw_data) >= threshold:
            length = len(tensor.raw_data)
            offset = data.write(tensor.raw_data)
            tensor.ClearField("raw_data")
            _set_external(tensor, data.temporary, offset, length)


def _rename(tensors: list[Any], old: str, new: str) -> None:
    for tensor in tensors:
        if tensor.data_location == 1:
            for entry in tensor.external_data:
                if entry.key == "location" and entry.value == old:
                    entry.value = new


def _write_model(model: Any, path: str) -> int:
    data = model.SerializeToString()
    with open(path, "wb") as file:
        file.write(data)
    return len(data)


def _check(model: Any, infer: bool, shown: str) -> None:
    """ONNX's checker (and, when ``infer``, strict shape inference) on the model, in memory: its
    external tensors, whose files and ranges were checked as they were planned, are checked as
    empty tensors, so no data file is read (nor refused for having several links)."""
    import onnx

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for tensor in _tensors(probe):
        if tensor.data_location == 1:
            tensor.ClearField("external_data")
            tensor.data_location = 0
            del tensor.dims[:]
            tensor.dims.append(0)
    try:
        if infer:
            onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        onnx.checker.check_model(probe)
    except Exception as exc:  # noqa: BLE001 - ValidationError, InferenceError
        message = " ".join(str(exc).split())
        raise FormatError(f"{shown}: the model is rejected by the ONNX checker, so it is not written: {message}",
                          path=shown, expected="a model the ONNX checker accepts", found=message) from None


def write_external(model: Any, target: str | Path, references: References, *, location: str | None = None,
                   size_threshold: int = 1024, link: bool = False, infer: bool = False) -> DumpReport:
    """Write ``model`` (exported under ``writing_external``, which collected ``references``) to
    ``target`` with external data, as the module docstring describes, after ONNX's checker (and
    strict shape inference when ``infer``: a model too big for to_onnx to check) accepts it."""
    target = Path(target)
    folder = os.path.realpath(target.parent)
    if not os.path.isdir(folder):
        raise FormatError(f"cannot write {str(target)!r}: no such directory", path=str(target))
    data_name = _data_name(folder, target, location, references.files)
    plan = _Plan(folder, references.files, data_name, link)
    data = _Data(folder, data_name)
    tensors = _tensors(model)
    partial = os.path.join(folder, _temporary(target.name))
    kept = False
    try:
        _place(tensors, plan, data, size_threshold)
        _check(model, infer, str(target))
        _rename(tensors, data.temporary, data.name)
        written = _write_model(model, partial)
        kept = True
    except OSError as exc:
        raise FormatError(f"cannot write {str(target)!r}: {exc.strerror or exc}", path=str(target)) from None
    finally:
        data.close(kept)
        if not kept:
            plan.undo()
            if os.path.exists(partial):
                os.unlink(partial)
    try:
        os.replace(partial, target)
    except OSError as exc:
        os.unlink(partial)
        raise FormatError(f"cannot write {str(target)!r}: {exc.strerror or exc}", path=str(target)) from None
    how = "hard-linked" if link else "cloned"
    for source, size in plan.copies.items():
        warnings.warn(f"{source} could not be {how} into {folder} ({plan.reason}); the {size:,} bytes of it "
                      f"the model uses were copied into {data.name}"
                      + ("" if link else " (dump_onnx(..., link=True) makes hard links instead)"), stacklevel=3)
    return DumpReport(
        str(target), str(target.parent / data.name) if data.file is not None else None, written + data.size,
        tuple(plan.referenced), tuple(plan.linked), tuple(plan.copies.items()))
