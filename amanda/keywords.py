"""The deprecation path of constructors whose parameters after the name became keyword-only.

A call passing them by position still works for now and emits a DeprecationWarning that
names the parameters to write as keywords.

>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     moved_to_keywords("Port", ("attrs",), ({"k": 1},), (None,), (None,))
({'k': 1},)
>>> str(caught[0].message)
'Port(): pass attrs as a keyword (attrs=...); passing it by position is deprecated'
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from amanda.errors import ArgumentError

__all__ = ["keyword_only_after", "moved_to_keywords"]

T = TypeVar("T")


def _warn(owner: str, names: tuple[str, ...], stacklevel: int) -> None:
    shown = ", ".join(f"{n}=..." for n in names)
    which = "it" if len(names) == 1 else "them"
    warnings.warn(
        f"{owner}(): pass {', '.join(names)} as {'a keyword' if len(names) == 1 else 'keywords'} ({shown}); "
        f"passing {which} by position is deprecated", DeprecationWarning, stacklevel=stacklevel + 1)


def moved_to_keywords(owner: str, names: tuple[str, ...], args: tuple, current: tuple, defaults: tuple,
                      stacklevel: int = 3) -> tuple:
    """``current`` (the keyword values of ``names``) with the positional ``args`` put in place,
    after a DeprecationWarning; an ArgumentError for too many arguments or a value given twice.

    Callers check ``if args:`` first, so a keyword call pays nothing. ``defaults`` are the
    parameters' defaults: a keyword still at its default (by identity) was not given.
    """
    if len(args) > len(names):
        raise ArgumentError.at(owner, f"at most {len(names)} arguments after the first",
                               f"{len(args)}: pass {', '.join(names)} as keywords")
    out = list(current)
    for i, value in enumerate(args):
        if current[i] is not defaults[i]:
            raise ArgumentError.at(owner, f"one value for {names[i]}", "one by position and one by keyword")
        out[i] = value
    _warn(owner, names[:len(args)], stacklevel)
    return tuple(out)


def keyword_only_after(keep: int) -> Callable[[type[T]], type[T]]:
    """Give a dataclass whose fields after the first ``keep`` are keyword-only (``KW_ONLY``)
    the deprecation path for positional calls.

    A wrapper costs a call, so the hot constructors (Container, Port, Edge) check inline with
    :func:`moved_to_keywords` instead.
    """

    def wrap(cls: type[T]) -> type[T]:
        init = cls.__init__
        names = tuple(f.name for f in dataclasses.fields(cls) if f.init)[keep:]  # type: ignore[arg-type]

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            if len(args) > keep:
                extra = args[keep:]
                if len(extra) > len(names):
                    raise ArgumentError.at(cls.__name__, f"at most {keep + len(names)} arguments", str(len(args)))
                for name, value in zip(names, extra):
                    if name in kwargs:
                        raise ArgumentError.at(cls.__name__, f"one value for {name}",
                                               "one by position and one by keyword")
                    kwargs[name] = value
                _warn(cls.__name__, names[:len(extra)], 2)
                args = args[:keep]
            init(self, *args, **kwargs)

        cls.__init__ = __init__  # type: ignore[method-assign]
        return cls

    return wrap
