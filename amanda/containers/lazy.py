"""Lazy tensors: a weight that stays in its file until something reads its values.

A :class:`LazyTensor` names bytes of a file (the file's :class:`FileStamp` as it was when the
model was loaded, an offset), a dtype and a shape. Containers store it where an array would be
(``freeze`` keeps it as it is), so loading a model reads no weight. A reader of ``attrs`` gets a
read-only numpy array over a memory map of the file (:meth:`LazyTensor.array`): the OS reads its
pages in as they are read, and may drop them again under memory pressure, since they are clean.
Every tensor of one file shares one map, which lives as long as an array over it does.

Equality and hashing never read the bytes. Two lazy tensors are equal when they name the same
bytes of the same file (equal stamps, offsets, dtypes and shapes); a lazy tensor never equals an
array held in memory, even one with the same values: compare ``np.asarray`` of both to compare
values. An array over a lazy tensor's map (what ``attrs`` handed out) counts as that tensor, so
storing it again keeps it lazy and copies nothing.

A file is checked against its stamp each time a tensor's array is made: a file changed on disk
(size, modification time, inode) or removed since the model was loaded raises ``FormatError``
naming the tensor, rather than being read as garbage. Arrays handed out before the change keep
the bytes they map; a file truncated under them is beyond what a map can guard against.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "w.bin")
>>> _ = open(path, "wb").write(np.arange(6, dtype=np.float32).tobytes())
>>> lazy = LazyTensor(stamp_of(path), 8, np.float32, (2, 2), name="w")
>>> lazy == LazyTensor(stamp_of(path), 8, np.float32, (2, 2)), lazy.nbytes
(True, 16)
>>> lazy.array().tolist(), lazy_of(lazy.array()) == lazy
([[2.0, 3.0], [4.0, 5.0]], True)
"""

from __future__ import annotations

import math
import mmap
import os
import threading
import weakref
from typing import Any, NamedTuple

import numpy as np

from amanda.errors import FormatError

__all__ = ["FileStamp", "LazyTensor", "is_mapped", "lazy_of", "stamp_of"]


class FileStamp(NamedTuple):
    """A file as it was seen: its absolute path, size, modification time (ns), device and inode."""

    path: str
    size: int
    mtime_ns: int
    device: int
    inode: int


def stamp_of(path: str | os.PathLike) -> FileStamp:
    """The stamp of the file at ``path`` now (``OSError`` if it cannot be read)."""
    absolute = os.path.abspath(path)
    return _stamp(absolute, os.stat(absolute))


def _stamp(path: str, st: os.stat_result) -> FileStamp:
    return FileStamp(path, st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino)


class LazyTensor:
    """``shape`` values of ``dtype`` stored at ``offset`` in the file ``file`` describes (see the
    module docstring). ``name`` (the tensor's, for messages) takes no part in equality."""

    __slots__ = ("_hash", "dtype", "file", "name", "offset", "shape")

    _hash: int
    file: FileStamp
    offset: int
    dtype: np.dtype
    shape: tuple[int, ...]
    name: str

    def __init__(self, file: FileStamp, offset: int, dtype: Any, shape: Any, *, name: str = "") -> None:
        setter = object.__setattr__
        setter(self, "file", file)
        setter(self, "offset", int(offset))
        setter(self, "dtype", np.dtype(dtype))
        setter(self, "shape", tuple(map(int, shape)))
        setter(self, "name", name)
        setter(self, "_hash", hash((file, self.offset, self.dtype.str, self.shape)))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"LazyTensor is immutable: cannot set {key!r}")

    def __reduce__(self) -> Any:
        return _rebuild, (self.file, self.offset, self.dtype.str, self.shape, self.name)

    @property
    def size(self) -> int:
        """The number of elements."""
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        """The number of bytes the tensor takes in its file."""
        return self.size * self.dtype.itemsize

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LazyTensor):
            return NotImplemented
        return self is other or (
            self._hash == other._hash
            and self.file == other.file
            and self.offset == other.offset
            and self.dtype == other.dtype
            and self.shape == other.shape
        )

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        name = f"{self.name!r}, " if self.name else ""
        return (f"LazyTensor({name}{self.dtype}{list(self.shape)} at {self.file.path}"
                f"[{self.offset}:{self.offset + self.nbytes}])")

    def check(self) -> None:
        """Raise ``FormatError`` if the file changed (size, modification time, inode) or went
        away since the tensor was made."""
        _check(self)

    def array(self) -> np.ndarray:
        """A read-only array over the file's memory map (nothing is read until its values are);
        ``FormatError`` if the file changed or went away since the tensor was made."""
        if self.nbytes == 0:
            empty = np.empty(self.shape, self.dtype)
            empty.setflags(write=False)
            return empty
        mapped = _map(self)
        return np.frombuffer(mapped, self.dtype, self.size, self.offset).reshape(self.shape)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        array = self.array()
        if dtype is not None and np.dtype(dtype) != array.dtype:
            return array.astype(dtype)
        return array.copy() if copy else array


def _rebuild(file: FileStamp, offset: int, dtype: str, shape: tuple, name: str) -> LazyTensor:
    return LazyTensor(FileStamp(*file), offset, dtype, shape, name=name)


# -- memory maps -----------------------------------------------------------------------------

_MAPS: dict[FileStamp, Any] = {}  # stamp -> weak reference to its map
_OWNERS: dict[int, tuple[FileStamp, int]] = {}  # id(map) -> (stamp, address of its first byte)
_LOCK = threading.Lock()


def _changed(tensor: LazyTensor, now: FileStamp | None) -> FormatError:
    stamp = tensor.file
    what = f"tensor {tensor.name!r}" if tensor.name else "a lazy tensor"
    if now is None:
        found = "no such file"
        how = "was removed"
    else:
        found = f"size {now.size}, modified at {now.mtime_ns} ns, inode {now.inode}"
        how = "changed on disk"
    return FormatError(
        f"{what} keeps its data in {stamp.path!r}, which {how} since the model was loaded "
        f"(it was {stamp.size} bytes, modified at {stamp.mtime_ns} ns); load the model again",
        path=tensor.name or stamp.path,
        expected=f"size {stamp.size}, modified at {stamp.mtime_ns} ns, inode {stamp.inode}",
        found=found,
    )


def _check(tensor: LazyTensor) -> None:
    stamp = tensor.file
    try:
        now: FileStamp | None = _stamp(stamp.path, os.stat(stamp.path))
    except OSError:
        now = None
    if now != stamp:
        raise _changed(tensor, now)


def _map(tensor: LazyTensor) -> mmap.mmap:
    _check(tensor)
    stamp = tensor.file
    ref = _MAPS.get(stamp)
    mapped = ref() if ref is not None else None
    if mapped is not None:
        return mapped  # type: ignore[no-any-return]
    with _LOCK:
        ref = _MAPS.get(stamp)
        mapped = ref() if ref is not None else None
        if mapped is None:
            mapped = _open(tensor)
    return mapped  # type: ignore[no-any-return]


def _open(tensor: LazyTensor) -> mmap.mmap:
    stamp = tensor.file
    try:
        with open(stamp.path, "rb") as file:
            opened = _stamp(stamp.path, os.fstat(file.fileno()))
            if opened != stamp:  # replaced since the stat
                raise _changed(tensor, opened)
            mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise FormatError(
            f"tensor {tensor.name!r}: cannot map {stamp.path!r}: {exc.strerror or exc}",
            path=tensor.name or stamp.path,
            expected="a readable file",
            found=str(exc),
        ) from None
    address = np.frombuffer(mapped, np.uint8, 1).__array_interface__["data"][0]
    key = id(mapped)
    _OWNERS[key] = (stamp, address)
    _MAPS[stamp] = weakref.ref(mapped)
    weakref.finalize(mapped, _forget, key, stamp)
    return mapped


def _forget(key: int, stamp: FileStamp) -> None:
    _OWNERS.pop(key, None)
    ref = _MAPS.get(stamp)
    if ref is not None and ref() is None:
        _MAPS.pop(stamp, None)


def _owner(array: np.ndarray) -> Any:
    """The object at the end of ``array``'s chain of bases (a memoryview's exporter)."""
    base: Any = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return base


def is_mapped(array: Any) -> bool:
    """Whether ``array`` views a lazy tensor's memory map (its values stay in the file).

    >>> is_mapped(np.zeros(3))
    False
    """
    if not isinstance(array, np.ndarray):
        return False
    owner = _owner(array)
    return type(owner) is mmap.mmap and id(owner) in _OWNERS


def lazy_of(value: Any) -> LazyTensor | None:
    """``value`` itself if it is a LazyTensor; the lazy tensor a contiguous array over a lazy
    tensor's map views; None for anything else (arrays in memory, scalars).

    >>> lazy_of(np.arange(3)) is None
    True
    """
    if type(value) is LazyTensor:
        return value
    if not isinstance(value, np.ndarray) or value.flags.writeable:
        return None
    owner = _owner(value)
    if type(owner) is not mmap.mmap:
        return None
    found = _OWNERS.get(id(owner))
    if found is None or not value.flags.c_contiguous or value.size == 0:
        return None
    stamp, address = found
    offset = value.__array_interface__["data"][0] - address
    return LazyTensor(stamp, offset, value.dtype, value.shape)
