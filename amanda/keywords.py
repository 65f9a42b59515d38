"""Keyword-only parameters: constructors whose parameters after the first (or the first two)
are keyword-only refuse positional values for them with an ArgumentError that names the
keywords to write (the positional forms were deprecated, then removed).

>>> print(positional_refused("Port", ("attrs",), ({"k": 1},)).expected)
attrs as a keyword (attrs=...)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from amanda.errors import AmandaError, ArgumentError

__all__ = ["keyword_only_after", "positional_refused"]

T = TypeVar("T")


def positional_refused(owner: str, names: tuple[str, ...], args: tuple) -> AmandaError:
    """The ArgumentError for ``args`` given by position where ``names`` are keyword-only."""
    given = names[:len(args)] or names
    shown = ", ".join(f"{n}=..." for n in given)
    expected = f"{', '.join(given)} as {'a keyword' if len(given) == 1 else 'keywords'} ({shown})"
    return ArgumentError.at(owner, expected, f"{len(args)} more argument{'s' if len(args) != 1 else ''} by position")


def keyword_only_after(keep: int) -> Callable[[type[T]], type[T]]:
    """Make a dataclass whose fields after the first ``keep`` are keyword-only (``KW_ONLY``)
    refuse positional values for them with an ArgumentError (Python's own TypeError does not
    name the keywords)."""

    def wrap(cls: type[T]) -> type[T]:
        init = cls.__init__
        names = tuple(f.name for f in dataclasses.fields(cls) if f.init)[keep:]  # type: ignore[arg-type]

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            if len(args) > keep:
                raise positional_refused(cls.__name__, names, args[keep:])
            init(self, *args, **kwargs)

        cls.__init__ = __init__  # type: ignore[method-assign]
        return cls

    return wrap
