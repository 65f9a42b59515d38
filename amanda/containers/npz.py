"""An ``.npz`` archive read within bounds: every member's header at once, its data on request.

``np.load`` of an archive decompresses a member whole as soon as it is looked at, so a small
file of highly compressed members can cost any amount of memory. :class:`Archive` reads the
zip directory and each member's ``.npy`` header (a few bytes of each), checks that the header's
dtype and shape take exactly the member's declared size, and decompresses a member only when
:meth:`Archive.read` asks for it, with a byte limit. Everything wrong with the file is a
``FormatError`` naming it; object arrays are refused (no pickles are read).

>>> import io, numpy as np
>>> buffer = io.BytesIO()
>>> np.savez(buffer, a=np.arange(3.0))
>>> with Archive(buffer, "mem.npz") as archive:
...     archive.members["a"].shape, archive.read("a").tolist()
((3,), [0.0, 1.0, 2.0])
"""

from __future__ import annotations

import tokenize
import zipfile
import zlib
from typing import IO, Any, NamedTuple

import numpy as np

from amanda.errors import FormatError

__all__ = ["Archive", "Member"]

_SUFFIX = ".npy"
_HEADER_BYTES = 10_000  # numpy's own bound on an .npy header (read_array_header's default)
_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


class Member(NamedTuple):
    """One array of the archive as its header describes it."""

    name: str  # the zip member's name (the key and ``.npy``)
    dtype: np.dtype
    shape: tuple[int, ...]
    fortran: bool
    start: int  # where its data starts, after the magic and the header
    nbytes: int  # the size of its data


class Archive:
    """An open ``.npz`` file (a path or a binary file object); ``members`` by key."""

    def __init__(self, source: str | IO[bytes], shown: str | None = None) -> None:
        self.shown = shown if shown is not None else str(source)
        try:
            with open(source, "rb") if isinstance(source, str) else _Borrowed(source) as handle:
                if handle.read(6) == b"\x93NUMPY":
                    raise self.fail("a .npy array, not an .npz archive", "NUMPY")
            self._zip = zipfile.ZipFile(source)
        except (OSError, zipfile.BadZipFile, ValueError, EOFError, NotImplementedError) as exc:
            raise self.fail(str(exc) or type(exc).__name__, type(exc).__name__) from None
        try:
            self.members = {self._key(info): self._header(info) for info in self._zip.infolist()}
        except BaseException:
            self._zip.close()
            raise

    def fail(self, why: str, found: str) -> FormatError:
        """The error for this file: what is wrong and what was found."""
        return FormatError(f"cannot read weights from {self.shown!r}: {why}", path=self.shown,
                           expected="an .npz archive written by save_weights", found=found)

    def _key(self, info: zipfile.ZipInfo) -> str:
        if not info.filename.endswith(_SUFFIX):
            raise self.fail(f"member {info.filename!r} is not a .npy array", "a member without .npy")
        return info.filename[: -len(_SUFFIX)]

    def _header(self, info: zipfile.ZipInfo) -> Member:
        """The member's header, read from its first bytes only."""
        try:
            with self._zip.open(info) as stream:
                version = np.lib.format.read_magic(stream)
                reader = _READERS.get(version)
                if reader is None:
                    raise ValueError(f"an .npy format version numpy writes for plain arrays, not {version}")
                shape, fortran, dtype = reader(stream, max_header_size=_HEADER_BYTES)
                start = stream.tell()
        except (OSError, ValueError, EOFError, SyntaxError, TypeError, zipfile.BadZipFile, zlib.error,
                NotImplementedError, tokenize.TokenError) as exc:  # numpy parses headers with Python's tokenizer
            raise self.fail(f"member {info.filename!r} has no valid .npy header ({exc})", type(exc).__name__) from None
        if dtype.hasobject:
            raise self.fail(f"member {info.filename!r} holds Python objects (pickles are not read)", str(dtype))
        count = int(np.prod(shape, dtype=object))
        nbytes = count * dtype.itemsize
        if start + nbytes != info.file_size:
            raise self.fail(f"member {info.filename!r} declares {info.file_size} bytes, but its header "
                            f"({dtype}{list(shape)}) takes {start + nbytes}", f"{info.file_size} bytes")
        return Member(info.filename, dtype, tuple(int(d) for d in shape), bool(fortran), start, nbytes)

    def read(self, key: str, limit: int | None = None) -> np.ndarray:
        """The member's array (read-only); a FormatError when its data exceeds ``limit`` bytes
        or does not read back whole (a corrupt or truncated member)."""
        member = self.members[key]
        if limit is not None and member.nbytes > limit:
            raise self.fail(f"member {member.name!r} holds {member.nbytes} bytes, more than the limit of {limit}",
                            f"{member.nbytes} bytes")
        try:
            with self._zip.open(member.name) as stream:
                stream.read(member.start)  # the header, read already
                data = stream.read(member.nbytes)
                rest = stream.read()  # reaching the end checks the member's CRC
            if len(data) != member.nbytes or rest:
                raise ValueError(f"{len(data) + len(rest)} data bytes for {member.nbytes}")
            array = np.ndarray(member.shape, member.dtype, buffer=data, order="F" if member.fortran else "C")
        except (OSError, ValueError, EOFError, TypeError, zipfile.BadZipFile, zlib.error) as exc:
            raise self.fail(f"member {member.name!r} cannot be read ({exc})", type(exc).__name__) from None
        return array

    def close(self) -> None:
        """Close the zip file."""
        self._zip.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Borrowed:
    """A caller's file object used as a context manager that rewinds it instead of closing it."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.start = handle.tell()

    def __enter__(self) -> IO[bytes]:
        return self.handle

    def __exit__(self, *exc: Any) -> None:
        self.handle.seek(self.start)
