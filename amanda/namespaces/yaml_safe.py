"""Safe YAML parsing that remembers where each value came from, for schemas and mappings.

The text is read by ``amanda.safe_load``, the one loader amanda has: only plain scalars, lists
and mappings are accepted (``!!python/object``, ``!!binary``, merge keys and custom tags are
refused), depth and alias expansion are bounded; its refusals become ``SchemaError`` here.
"""

from __future__ import annotations

import os
from pathlib import Path as FilePath
from typing import Any, cast

from amanda.containers.arguments import shown
from amanda.errors import AmandaError, ArgumentError, FormatError, SchemaError
from amanda.safe_load import load_located

__all__ = ["located_error", "parse_yaml", "source_text"]

Path = tuple[str, ...]


def located_error(path: Path, expected: str, found: str, hint: str = "",
                  line: int | None = None) -> SchemaError:
    """A ``SchemaError`` at ``path`` whose message (and ``line`` field) gives the line.

    >>> str(located_error(("a", "b"), "an int", "'x'", line=3))
    "at a/b: expected an int, found 'x' (line 3)"
    """
    error = cast(SchemaError, SchemaError.at(path, expected, found, hint))
    if line is not None:
        error.args = (f"{error.args[0]} (line {line})",)
    error.line = line  # type: ignore[attr-defined]
    return error


def parse_yaml(text: str, base: Path = ()) -> tuple[Any, dict[Path, int]]:
    """Parse one YAML document into plain data and a map from field path to line number.

    ``base`` prefixes the paths named in errors.

    >>> parse_yaml("a: [1, {b: x}]")
    ({'a': [1, {'b': 'x'}]}, {(): 1, ('a',): 1, ('a', '0'): 1, ('a', '1'): 1, ('a', '1', 'b'): 1})
    >>> parse_yaml("!!python/object:os.system {}")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    amanda.errors.SchemaError: at <root>: ... found the refused tag !!python/object:os.system ...
    """
    try:
        return load_located(text)
    except FormatError as exc:
        where = base + tuple(exc.path or ())
        raise located_error(where, str(exc.expected or "well-formed YAML"),
                            str(exc.found or exc), line=exc.line) from None


def source_text(source: Any, error: type[AmandaError], what: str) -> str:
    """The YAML text ``source`` gives: ``bytes`` decoded, an ``os.PathLike`` read, and a ``str``
    read as a path when it names a file or has neither a newline nor a ':' (else it is the
    text itself). ``error`` (for example SchemaError) names what went wrong, ``what`` the kind
    of file (``"schema"``)."""
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error.at("<text>", "UTF-8 text", exc.reason) from None
    if isinstance(source, os.PathLike) or (
            isinstance(source, str) and "\n" not in source and (os.path.isfile(source) or ":" not in source)):
        try:
            return FilePath(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise error.at(str(source)[:80], f"a readable UTF-8 {what} file",
                           getattr(exc, "strerror", None) or str(exc)) from None
    if not isinstance(source, str):
        raise ArgumentError.at("source", f"a {what} file path or YAML text (str, bytes or os.PathLike)",
                               shown(source))
    return source
