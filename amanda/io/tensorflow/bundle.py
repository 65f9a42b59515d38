"""TensorFlow checkpoints (tensor bundles: ``<prefix>.index`` + ``<prefix>.data-*``), read-only.

The ``.index`` file is a sorted string table (LevelDB's table format, which TensorFlow's
``tsl/lib/io/table`` keeps): a 48-byte footer with the handles of the index block, the index
block with the handle of each data block, and data blocks of prefix-compressed entries. Key
``""`` holds a ``BundleHeaderProto``; every other key is a tensor's name and holds its
``BundleEntryProto`` (dtype, shape, shard, offset and size in ``<prefix>.data-<shard>-of-<n>``).
Every offset and length is checked against the file it points into, blocks must be
uncompressed (TensorFlow writes them so), and shard files are named from the prefix only, so a
malformed index raises FormatError and never reads outside the checkpoint's files. Sliced
(partitioned) variables are not read.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> (folder / "v.index").write_bytes(b"short")
5
>>> Bundle(folder / "v")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
amanda.errors.FormatError: ...v.index: expected a table footer (48 bytes or more), found 5 bytes
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np

from amanda.errors import FormatError
from amanda.io.tensorflow.protos import parse
from amanda.io.tensorflow.tensors import MAX_ELEMENTS, STORAGE, dtype_name

__all__ = ["Bundle"]

_MAGIC = 0xDB4775248B80FB57
_FOOTER = 48
_TRAILER = 5  # compression type byte + crc32c after every block


def _varint(data: bytes, pos: int, end: int, where: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _bad(where, "a varint", "a truncated or overlong one")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _bad(where: str, expected: str, found: str) -> FormatError:
    return FormatError(f"{where}: expected {expected}, found {found}", path=where, expected=expected, found=found)


class Bundle:
    """The tensors of one checkpoint ``prefix`` (``variables/variables``), read on demand."""

    def __init__(self, prefix: str | Path) -> None:
        self.prefix = Path(prefix)
        index = self.prefix.with_name(self.prefix.name + ".index")
        self.where = str(index)
        try:
            self.data = index.read_bytes()
        except OSError as exc:
            raise FormatError(f"cannot read {self.where!r}: {exc.strerror or exc}", path=self.where) from None
        self.entries: dict[str, bytes] = {}
        for block in self._index_handles():
            self._read_block(*block, self.entries.__setitem__)
        header = parse("tensorflow.BundleHeaderProto", self.entries.pop("", b""), self.where + "[header]")
        self.shards = max(header.num_shards, 1)
        if header.endianness != 0:
            raise _bad(self.where, "a little-endian checkpoint", "a big-endian one")
        self._files: dict[int, bytes] = {}

    def _index_handles(self) -> list[tuple[int, int]]:
        data, size = self.data, len(self.data)
        if size < _FOOTER:
            raise _bad(self.where, f"a table footer ({_FOOTER} bytes or more)", f"{size} bytes")
        (magic,) = struct.unpack_from("<Q", data, size - 8)
        if magic != _MAGIC:
            raise _bad(self.where, "a TensorFlow table (its magic number)", hex(magic))
        pos = size - _FOOTER
        _, pos = _varint(data, pos, size - 8, self.where + "[footer]")  # metaindex offset
        _, pos = _varint(data, pos, size - 8, self.where + "[footer]")  # metaindex size
        offset, pos = _varint(data, pos, size - 8, self.where + "[footer]")
        length, pos = _varint(data, pos, size - 8, self.where + "[footer]")
        handles: list[tuple[int, int]] = []

        def add(_key: str, value: bytes) -> None:
            block_offset, at = _varint(value, 0, len(value), self.where + "[index]")
            block_size, _ = _varint(value, at, len(value), self.where + "[index]")
            handles.append((block_offset, block_size))

        self._read_block(offset, length, add)
        return handles

    def _read_block(self, offset: int, length: int, take: Any) -> None:
        data, where = self.data, f"{self.where}[block at {offset}]"
        if offset + length + _TRAILER > len(data) or length < 4:
            raise _bad(where, f"a block inside the file ({len(data)} bytes)", f"{length} bytes at {offset}")
        if data[offset + length] != 0:
            raise _bad(where, "an uncompressed block", f"compression type {data[offset + length]}")
        end = offset + length
        (restarts,) = struct.unpack_from("<I", data, end - 4)
        limit = end - 4 - 4 * restarts
        if restarts < 1 or limit < offset:
            raise _bad(where, "a restart array inside the block", f"{restarts} restarts")
        pos, key = offset, b""
        while pos < limit:
            shared, pos = _varint(data, pos, limit, where)
            own, pos = _varint(data, pos, limit, where)
            size, pos = _varint(data, pos, limit, where)
            if shared > len(key) or pos + own + size > limit:
                raise _bad(where, "an entry inside the block", f"key {shared}+{own} bytes, value {size} bytes")
            key = key[:shared] + data[pos:pos + own]
            pos += own
            take(key.decode("utf-8", "replace"), data[pos:pos + size])
            pos += size

    def keys(self) -> list[str]:
        """The names of the tensors in the checkpoint, sorted."""
        return sorted(self.entries)

    def _shard(self, shard: int, where: str) -> bytes:
        if not 0 <= shard < self.shards:
            raise _bad(where + ".shard_id", f"a shard below {self.shards}", str(shard))
        found = self._files.get(shard)
        if found is None:
            path = self.prefix.with_name(f"{self.prefix.name}.data-{shard:05d}-of-{self.shards:05d}")
            try:
                found = self._files[shard] = path.read_bytes()
            except OSError as exc:
                raise FormatError(f"cannot read {str(path)!r}: {exc.strerror or exc}", path=str(path)) from None
        return found

    def tensor(self, key: str) -> np.ndarray:
        """The value of tensor ``key`` (a read-only array), or FormatError."""
        raw = self.entries.get(key)
        where = f"{self.where}[{key!r}]"
        if raw is None:
            from amanda.errors import suggest

            raise FormatError.at(where, "a tensor of the checkpoint", repr(key), suggest(key, self.entries))
        entry = parse("tensorflow.BundleEntryProto", raw, where)
        if entry.slices:
            raise _bad(where, "a whole tensor", "a sliced (partitioned) variable")
        dims = tuple(d.size for d in entry.shape.dim)
        count = int(np.prod(dims, dtype=np.int64)) if dims else 1
        if any(d < 0 for d in dims) or count > MAX_ELEMENTS:
            raise _bad(where + ".shape", "a known shape of a bounded size", str(dims))
        data = self._shard(entry.shard_id, where)
        if entry.offset < 0 or entry.offset + entry.size > len(data):
            raise _bad(where, f"bytes inside the shard ({len(data)} bytes)", f"{entry.size} at {entry.offset}")
        chunk = data[entry.offset:entry.offset + entry.size]
        kind = dtype_name(entry.dtype, where + ".dtype")
        array = _strings(chunk, count, where) if kind == "string" else _numbers(chunk, kind, count, where)
        array = array.reshape(dims)
        array.setflags(write=False)
        return array


def _numbers(chunk: bytes, kind: str, count: int, where: str) -> np.ndarray:
    storage = "<u2" if kind == "bfloat16" else STORAGE.get(kind)
    if storage is None:
        raise _bad(where + ".dtype", "a tensor dtype with values", kind)
    if len(chunk) != count * np.dtype(storage).itemsize:
        raise _bad(where, f"{count} values of {kind}", f"{len(chunk)} bytes")
    array = np.frombuffer(chunk, storage)
    return (array.astype(np.uint32) << 16).view(np.float32) if kind == "bfloat16" else array


def _strings(chunk: bytes, count: int, where: str) -> np.ndarray:
    """A string tensor: the varint lengths of all elements, a 4-byte checksum, the bytes."""
    pos, lengths = 0, []
    for _ in range(count):
        length, pos = _varint(chunk, pos, len(chunk), where)
        lengths.append(length)
    pos += 4
    values = []
    for length in lengths:
        if pos + length > len(chunk):
            raise _bad(where, "string bytes inside the tensor", f"{length} bytes at {pos}")
        values.append(chunk[pos:pos + length])
        pos += length
    return np.array(values, dtype=np.bytes_)
