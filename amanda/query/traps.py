"""The usual JMESPath traps in a filter, refused with the fix instead of matching nothing.

In JMESPath ``"Conv"`` (double quotes) and a bare ``Conv`` are *fields*, not strings, so
``type == "Conv"`` compares ``type`` with a missing field and selects nothing, silently; so does
``attrs.debug == true`` (a field named ``true``). Every node's view has the same keys
(:data:`~amanda.query.view.VIEW_KEYS`), so a field the filter reads from the view that is not
one of them is always null: :func:`check_fields` raises a ``QueryError`` there, pointing at it
and showing the literal meant (``'Conv'``, `` `true` ``). Fields of the view compared with each
other (``name == type``) and fields read from other values (``inputs[?@ == 'x']``,
``sort_by(@, &name)``, ``attrs.units``) are left alone. A bare number (``attrs.units > 4``),
which JMESPath's parser refuses, is reported by :func:`number_hint`'s advice.

>>> import jmespath
>>> from amanda.errors import QueryError
>>> from amanda.query.parse import parse_selector
>>> text = '$..[?type == "Conv"]'
>>> step = parse_selector(text)[0]
>>> try:
...     check_fields(text, step, jmespath.compile(step.arg).parsed)
... except QueryError as error:
...     print(error.found, error.position, str(error).splitlines()[0].split(": ")[1])
"Conv" 13 in JMESPath double quotes name a field; for the string write 'Conv' (column 13)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from jmespath import exceptions as jmes_errors
from jmespath.lexer import Lexer

from amanda.errors import suggest
from amanda.query.parse import Step, query_error
from amanda.query.view import VIEW_KEYS

__all__ = ["check_fields", "number_hint"]

_ELEMENT_READERS = frozenset({"subexpression", "index_expression", "projection", "value_projection",
                              "filter_projection", "flatten", "pipe"})  # only their first child reads the view
_NO_FIELDS = frozenset({"expref", "literal", "current", "identity", "slice", "index"})
_LITERALS = {"true": "`true`", "false": "`false`", "null": "`null`"}


def _view_fields(node: dict) -> Iterator[dict]:
    """The ``field`` nodes of a parsed filter that read a key of the node's view."""
    stack = [node]
    while stack:
        here = stack.pop()
        kind = here.get("type")
        if kind == "field":
            yield here
            continue
        if kind in _NO_FIELDS:
            continue
        children = [c for c in here.get("children", ()) if isinstance(c, dict)]
        if kind in _ELEMENT_READERS:
            stack.extend(children[:1])
        else:
            stack.extend(reversed(children))


def _token(text: str, name: str) -> dict | None:
    """The first identifier token naming ``name`` that is not a function name or a sub-field."""
    try:
        tokens = list(Lexer().tokenize(text))
    except jmes_errors.JMESPathError:
        return None
    for before, here, after in zip([{}, *tokens], tokens, [*tokens[1:], {}]):
        if here["type"] in ("quoted_identifier", "unquoted_identifier") and here["value"] == name \
                and before.get("type") != "dot" and after.get("type") != "lparen":
            return here
    return None


def _string(name: str) -> str:
    return "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


def check_fields(selector: str, step: Step, parsed: Any) -> None:
    """Raise a ``QueryError`` at the first field the filter reads from the view that no view
    has, saying how to write the literal that was probably meant."""
    for node in _view_fields(parsed):
        name = node["value"]
        if name in VIEW_KEYS:
            continue
        token = _token(step.arg, name)
        quoted = token is not None and token["type"] == "quoted_identifier"
        shown = f'"{name}"' if quoted else repr(name)
        if quoted:
            fix = f"in JMESPath double quotes name a field; for the string write {_string(name)}"
        elif name in _LITERALS:
            fix = f"a bare {name} is a field in JMESPath; for the literal write {_LITERALS[name]}"
        else:
            fix = suggest(name, VIEW_KEYS) or (
                f"a bare word is a field in JMESPath (the view's fields: {', '.join(VIEW_KEYS)}); "
                f"for the string write {_string(name)}")
        position = step.offset + (token["start"] if token is not None else 0)
        raise query_error(selector, position, f"the filter reads the field {shown}, which no node's view has: {fix}",
                          expected=f"a field of the view ({', '.join(VIEW_KEYS)}) or a literal", found=shown)


def number_hint(token_type: Any, rest: str) -> str:
    """Advice for a parse error at a token of ``token_type`` where the filter text ``rest``
    begins: a bare number is written in backticks (the whole number, which the lexer reads only
    up to its decimal point).

    >>> number_hint("number", "-2.5e3]")
    'a number is a JSON literal in backticks in JMESPath: write `-2.5e3`'
    """
    match = _NUMBER.match(rest)
    if str(token_type).lower() == "number" and match:
        return f"a number is a JSON literal in backticks in JMESPath: write `{match.group()}`"
    return ""


_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")
