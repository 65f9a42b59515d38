"""The values the typed fields of an op's registry entry may hold, checked where they are
declared.

>>> checked_field("effect", "random").value, checked_field("bodies", ["body"])
('random', ('body',))
>>> checked_field("heavy", "yes")
Traceback (most recent call last):
amanda.errors.ArgumentError: at heavy: expected True or False, found 'yes'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from amanda.errors import ArgumentError
from amanda.ops.effects import Effect

__all__ = ["DECLARABLE", "InPlace", "checked_field"]


class InPlace(NamedTuple):
    """An in-place variant: the input ``positions`` that may be donated, and ``make(position)``
    returning ``run(fallback, attrs, *inputs)`` that writes into that input."""

    positions: tuple[int, ...]
    make: Callable[[int], Callable[..., tuple]]


_KINDS = {"heavy": bool, "fresh": bool, "constant": bool, "schema": str, "no_gradient": str, "gradient_gap": str,
          "dtype_rule": str}


def checked_field(name: str, value: Any) -> Any:
    """``value`` as field ``name`` holds it; ArgumentError naming the field when it cannot be."""
    expected = {"effect": f"an Effect or one of {[e.value for e in Effect]}", "bodies": "attribute names (strings)",
                "inplace": "an InPlace", "type_rule": "a function", "vjp": "a function"}.get(name)
    if name == "effect":
        found: Any = next((e for e in Effect if value is e or (isinstance(value, str) and value == e.value)), None)
    elif name == "bodies":
        found = tuple(value) if isinstance(value, (list, tuple)) and all(isinstance(b, str) for b in value) else None
    elif name == "inplace":
        found = value if isinstance(value, InPlace) else None
    elif name in ("type_rule", "vjp"):
        found = value if callable(value) else None
    else:
        kind = _KINDS[name]
        expected = "True or False" if kind is bool else "a non-empty string"
        found = value if isinstance(value, kind) and (kind is bool or value) else None
    if found is None:
        raise ArgumentError.at(name, str(expected), repr(value))
    return found


#: the fields declare() sets
DECLARABLE = frozenset({"heavy", "fresh", "inplace", "effect", "bodies", "constant", "schema", "type_rule",
                         "vjp", "no_gradient", "gradient_gap", "dtype_rule"})
