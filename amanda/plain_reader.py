"""The one reader of plain data: YAML text to plain data with each field's line, and the checks
that read plain data field by field into containers (``amanda.io.document``), namespace schemas
(``amanda.namespaces.schema_io``) and mapping tables (``amanda.rewrite.mapping``).

Text is parsed by :mod:`amanda.safe_load` (plain data only, bounded depth and aliases). A field
of the wrong kind raises the reader's error class (``FormatError`` for documents, ``SchemaError``
for schemas, ``MappingError`` for mapping tables) naming its path, what was expected, what was
found, a did-you-mean for a misspelt field and, when the text's lines are known, its line.

>>> from amanda.errors import SchemaError
>>> data, lines = read_yaml("op: {name: r, colour: red}")
>>> reader = PlainReader(SchemaError, lines)
>>> reader.fields(data["op"], ("op",), ("name", "color"))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
amanda.errors.SchemaError: at op.colour: expected one of the fields name, color, ... (did you mean 'color'?) (line 1)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from pathlib import Path as FilePath
from typing import Any

from amanda.containers.arguments import shown
from amanda.errors import AmandaError, ArgumentError, FormatError, Problem, suggest
from amanda.safe_load import load_located

__all__ = ["Path", "PlainReader", "dotted", "read_yaml", "source_text"]

Path = tuple  # keys and list indexes from the document's root

def dotted(path: Path) -> str:
    """``graph.ops[3].name`` from ``("graph", "ops", 3, "name")`` (or ``"3"``); ``<root>`` for ().

    >>> dotted(("mapping", "rules", "0", "map")), dotted(())
    ('mapping.rules[0].map', '<root>')
    """
    text = ""
    for part in path:
        index = isinstance(part, int) or (isinstance(part, str) and part.isdigit())
        text += f"[{part}]" if index else (f".{part}" if text else str(part))
    return text or "<root>"


class PlainReader:
    """Reads plain data field by field; a bad field raises ``error`` (an AmandaError subclass)
    at its path, shown by ``show`` (:func:`dotted`, or ``format_path`` for ``a/b``), with the
    line ``lines`` gives for the path or its nearest enclosing field."""

    __slots__ = ("kind", "lines", "show")

    def __init__(self, error: type[AmandaError] = FormatError, lines: Mapping[Path, int] | None = None,
                 show: Callable[[Path], str] = dotted) -> None:
        self.kind, self.lines, self.show = error, lines or {}, show

    def line(self, path: Path) -> int | None:
        """The line of ``path``, or of its nearest enclosing field whose line is known."""
        for end in range(len(path), -1, -1):
            found = self.lines.get(path[:end])
            if found is not None:
                return found
        return None

    def error(self, path: Path, expected: str, found: Any, hint: str = "", line: int | None = None) -> AmandaError:
        """The reader's error at ``path``: expected, found (text), hint, and the line."""
        line = self.line(path) if line is None and self.lines else line
        text = str(Problem(self.show(path), expected, str(found), hint))
        error = self.kind(text + (f" (line {line})" if line is not None else ""), path=path,
                          expected=expected, found=str(found))
        error.line = line  # type: ignore[attr-defined]
        return error

    def wrap(self, path: Path, exc: AmandaError) -> AmandaError:
        """``exc`` (raised while building what ``path`` describes) located at ``path``."""
        if getattr(exc, "line", None) is not None:
            return exc  # already says where
        line = self.line(path)
        where = f" (line {line})" if line is not None else ""
        error = self.kind(f"in {self.show(path)}{where}: {exc}", path=path, expected=exc.expected, found=exc.found)
        error.line = line  # type: ignore[attr-defined]
        return error

    def fields(self, value: Any, path: Path, allowed: Collection[str], required: Collection[str] = (),
               what: str = "") -> Mapping[str, Any]:
        """``value`` if it is a mapping whose keys are among ``allowed`` and include ``required``."""
        known = allowed if isinstance(allowed, frozenset) else frozenset(allowed)
        if isinstance(value, Mapping) and known.issuperset(value) and all(k in value for k in required):
            return value
        of = f" ({what})" if what else ""
        if not isinstance(value, Mapping):
            raise self.error(path, f"a mapping{of}", shown(value))
        names = sorted(allowed) if isinstance(allowed, frozenset) else list(allowed)
        for key in value:
            if key not in known:
                raise self.error((*path, str(key)), f"one of the fields {', '.join(names)}{of}",
                                 f"unknown field {key!r}", suggest(str(key), names))
        missing = next(k for k in required if k not in value)
        raise self.error(path, f"the field {missing!r}{of}", "it missing")

    def get(self, data: Mapping[str, Any], key: str, path: Path, kinds: tuple[type, ...], what: str,
            default: Any = None) -> Any:
        """The field ``key`` of ``data`` if it is one of ``kinds`` (``default`` when absent or null)."""
        value = data.get(key)
        if key not in data or (value is None and type(None) not in kinds):
            return default
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise self.error((*path, key), what, shown(value))
        return value

    def strings(self, value: Any, path: Path, one_or_none: bool = False) -> tuple[str, ...]:
        """A list of strings as a tuple; with ``one_or_none`` a lone string or null too."""
        if one_or_none and value is None:
            return ()
        if one_or_none and isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(path, "a list of strings", shown(value))
        return tuple(value)

    def listed(self, value: Any, path: Path) -> list:
        """A list field (null reads as an empty list)."""
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(path, "a list", shown(value))
        return value

    def text(self, value: Any, path: Path, optional: bool = True) -> str | None:
        """A non-empty string field (null when ``optional``)."""
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value:
            raise self.error(path, "a non-empty string", shown(value))
        return value


def read_yaml(text: str | bytes, error: type[AmandaError] = FormatError, base: Path = (),
              show: Callable[[Path], str] = dotted) -> tuple[Any, dict[Path, int]]:
    """Plain data from YAML text and the line of each field, by path of keys and indexes (as
    text); text that is not plain YAML raises ``error`` at ``base`` plus the bad field's path.

    >>> read_yaml("a: [1, {b: x}]")
    ({'a': [1, {'b': 'x'}]}, {(): 1, ('a',): 1, ('a', '0'): 1, ('a', '1'): 1, ('a', '1', 'b'): 1})
    >>> read_yaml("!!python/object:os.system {}")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    amanda.errors.FormatError: at <root>: ... found the refused tag !!python/object:os.system ...
    """
    try:
        return load_located(text)
    except FormatError as exc:
        where = base + tuple(exc.path or ())
        raise PlainReader(error, show=show).error(where, str(exc.expected or "well-formed YAML"),
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
