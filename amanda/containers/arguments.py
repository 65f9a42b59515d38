"""Checks at the boundary: the types of public functions' arguments, and the values of the
attributes amanda itself interprets.

Both raise where the bad value enters, naming what was expected, instead of letting a bare
``TypeError`` surface later in a transform, the Session or an exporter.

>>> expect_container(3, "model")
Traceback (most recent call last):
...
amanda.errors.ArgumentError: at model: expected a Container, found int 3
"""

from __future__ import annotations

import os
import reprlib
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np

from amanda.errors import ArgumentError, Problem

__all__ = [
    "INTERPRETED_ATTRS",
    "INTERPRETED_EDGE_ATTRS",
    "INTERPRETED_PORT_ATTRS",
    "attr_problems",
    "brief",
    "check_names",
    "expect_container",
    "expect_file",
    "expect_flag",
    "expect_int",
    "expect_list",
    "expect_mapping",
    "expect_number",
    "expect_str",
    "expect_type",
    "shown",
]


def _name(value: Any) -> bool:
    return type(value) is str and bool(value)


def _flag(value: Any) -> bool:
    return type(value) is bool


#: Container attributes amanda reads itself, with what each must hold (None counts as unset).
INTERPRETED_ATTRS: dict[str, tuple[Any, str]] = {
    "namespace": (_name, "a namespace name (a non-empty string)"),
    "shared_name": (lambda v: type(v) is str, "a state key (a string)"),
    "initializer": (_flag, "true or false"),
}
#: Port attributes amanda reads itself.
INTERPRETED_PORT_ATTRS: dict[str, tuple[Any, str]] = {
    "unbound": (_flag, "true or false"),
    "captured": (_flag, "true or false"),
}
#: Edge attributes amanda reads itself.
INTERPRETED_EDGE_ATTRS: dict[str, tuple[Any, str]] = {
    "phase": (_name, "a phase name (a non-empty string)"),
}


_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxlist, _BRIEF.maxtuple, _BRIEF.maxdict = 4, 12, 12, 8
_BRIEF.maxstring, _BRIEF.maxother = 60, 60


def brief(value: Any) -> str:
    """A short repr for a message, at most about 60 characters, that never recurses deeper than
    a few levels (a list nested thousands deep is shown, not a RecursionError).

    >>> brief([[[[[[1]]]]]]), brief(3)
    ('[[[[[...]]]]]', '3')
    """
    text = _BRIEF.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def shown(value: Any) -> str:
    """A value as a message shows it: its type and a short repr."""
    return f"{type(value).__name__} {brief(value)}"


def attr_problems(attrs: Mapping[str, Any], where: Any, table: Mapping[str, tuple[Any, str]] = INTERPRETED_ATTRS,
                  what: str = "attribute") -> list[Problem]:
    """A problem for each attribute of ``table`` whose value amanda cannot interpret."""
    problems = []
    for key, (fits, expected) in table.items():
        if key not in attrs:  # a pmap's get() raises and catches KeyError for a missing key: slow
            continue
        value = attrs[key]
        if value is not None and not fits(value):
            problems.append(Problem(where, f"{what} {key!r} to be {expected}", shown(value)))
    return problems


def port_problems(ports: Iterable[Any], where: tuple) -> list[Problem]:
    """Problems of the interpreted attributes of ``ports`` (each found at ``where/port``)."""
    problems: list[Problem] = []
    for port in ports:
        if port[1]:
            problems += attr_problems(port[1], (*where, port[0]), INTERPRETED_PORT_ATTRS, "port attribute")
    return problems


def expect_type(value: Any, kinds: type | tuple[type, ...], where: Any, expected: str) -> Any:
    """``value`` if it is an instance of ``kinds`` (never a bool for int), else ArgumentError."""
    if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in _tuple(kinds)):
        return value
    raise ArgumentError.at(where, expected, shown(value))


def _tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def expect_container(value: Any, where: Any) -> Any:
    """``value`` if it is a Container, else ArgumentError."""
    from amanda.containers.container import Container

    return expect_type(value, Container, where, "a Container")


def expect_str(value: Any, where: Any, expected: str = "a non-empty string", optional: bool = False) -> Any:
    """``value`` if it is a non-empty string (or None when ``optional``), else ArgumentError."""
    if (value is None and optional) or _name(value):
        return value
    raise ArgumentError.at(where, expected + (" or None" if optional else ""), shown(value))


def expect_list(value: Any, where: Any, expected: str) -> list:
    """``value`` as a list if it is a list or tuple (not a string or mapping), else ArgumentError."""
    if isinstance(value, (list, tuple)):
        return list(value)
    raise ArgumentError.at(where, expected, shown(value))


def expect_mapping(value: Any, where: Any, expected: str, optional: bool = False) -> Any:
    """``value`` if it is a mapping (or None when ``optional``), else ArgumentError."""
    if isinstance(value, Mapping) or (value is None and optional):
        return value
    raise ArgumentError.at(where, expected + (" or None" if optional else ""), shown(value))


def expect_flag(value: Any, where: Any, optional: bool = False) -> Any:
    """``value`` if it is True or False (or None when ``optional``), else ArgumentError.

    >>> expect_flag(1, "keepdims")
    Traceback (most recent call last):
    ...
    amanda.errors.ArgumentError: at keepdims: expected True or False, found int 1
    """
    if value is True or value is False or (value is None and optional):
        return value
    raise ArgumentError.at(where, "True or False" + (" or None" if optional else ""), shown(value))


def expect_int(value: Any, where: Any, minimum: int = 0) -> int:
    """``value`` as an int if it is one (a numpy integer too, never a bool) of at least
    ``minimum``, else ArgumentError."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= minimum:
        return int(value)
    raise ArgumentError.at(where, f"an int >= {minimum}", shown(value))


def expect_number(value: Any, where: Any, minimum: float = 0.0, below: float | None = None) -> float:
    """``value`` as a float if it is a real number (an int, a float or a numpy scalar of
    either, never a bool) of at least ``minimum`` and under ``below`` (when given), else
    ArgumentError (NaN is never in range).

    >>> expect_number("0.1", "lr")
    Traceback (most recent call last):
    ...
    amanda.errors.ArgumentError: at lr: expected a number >= 0.0, found str '0.1'
    """
    ok = isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)
    if not ok or not value >= minimum or (below is not None and not value < below):
        expected = f"a number >= {minimum}" + ("" if below is None else f" and < {below}")
        raise ArgumentError.at(where, expected, shown(value))
    return float(value)


def expect_file(value: Any, where: Any = "path") -> Any:
    """``value`` if it is a file path (a non-empty str or an ``os.PathLike``), else ArgumentError."""
    if _name(value) or isinstance(value, os.PathLike):
        return value
    raise ArgumentError.at(where, "a file path (a non-empty str or os.PathLike)", shown(value))


def sequence_problem(value: Any, where: Any, expected: str) -> Problem | None:
    """A problem unless ``value`` is an iterable that is not a string, bytes, a mapping or a
    numpy array (whose items are arrays, never ports, edges or names)."""
    if isinstance(value, (str, bytes, Mapping, np.ndarray)) or not isinstance(value, Iterable):
        return Problem(where, expected, shown(value))
    return None


def expect_hashable(value: Any, where: Any, expected: str) -> Any:
    """``value`` if it can be hashed (a dict key), else ArgumentError."""
    if isinstance(value, Hashable):
        try:
            hash(value)
            return value
        except TypeError:
            pass
    raise ArgumentError.at(where, expected, shown(value))


def check_names(type_: Any, name: Any, uid: Any) -> None:
    """Raise InvariantError unless a container's type, name and uid are each a non-empty UTF-8
    string or None (documents cannot tell "" from a missing field, and YAML cannot write lone
    surrogates).

    >>> check_names("Relu", "r", None)
    """
    if (
        (name is None or (name.__class__ is str and name and name.isascii()))
        and (type_ is None or (type_.__class__ is str and type_ and type_.isascii()))
        and (uid is None or (uid.__class__ is str and uid and uid.isascii()))
    ):
        return  # the common case, without building the loop below
    _refuse_names(type_, name, uid)


def _refuse_names(type_: Any, name: Any, uid: Any) -> None:
    """InvariantError naming the first of type, name and uid that is not a non-empty UTF-8
    string or None (the slow path of :func:`check_names`)."""
    from amanda.containers.values import utf8_text
    from amanda.errors import InvariantError

    for key, value in (("name", name), ("type", type_), ("uid", uid)):
        ok = value is None or type(value) is str and value and (value.isascii() or utf8_text(value))
        if not ok:
            where = (name,) if key != "name" and type(name) is str and name else None
            raise InvariantError([Problem(where, f"a non-empty string {key} (UTF-8) or None", brief(value))])
