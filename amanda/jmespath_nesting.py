"""How deeply a JMESPath expression nests, measured before anything recursive reads it.

jmespath's parser, its interpreter and amanda's filter compiler all recurse once (or a few
times) per level of an expression, so ``!!!!…x``, ``((((…))))``, ``a[*][*]…`` or a chain of
``||`` thousands long would end in ``RecursionError``. Two limits prevent it:

- :func:`too_deep` reads the text with jmespath's lexer (which does not recurse) and finds the
  first token nested deeper than ``MAX_NESTING`` (100) levels, counting the brackets (``(``,
  ``[``, ``{``, ``[?``) open around it plus, in each of them, the prefix operators (``!``,
  ``&``) and projections (``*``, ``[]``, closed bracket groups such as ``[0]`` or ``[?x]``)
  that came before it: what the parser recurses on. Binary operators do not count here.
- :func:`tree_too_deep` bounds the parsed tree to ``MAX_TREE_DEPTH`` (200) levels; a chain
  ``a || b || c`` parses as ``or(or(a, b), c)``, one level per operator.

The lexer itself decodes JSON literals (`` `[[1]]` ``) with Python's recursive ``json`` module,
so :func:`too_deep` first scans the text for a literal whose arrays and objects nest deeper
than ``MAX_NESTING`` levels, without lexing it: ``json`` would end in ``RecursionError``.

Selector filters and mapping expressions refuse text past either limit with an error naming
the column.

>>> too_deep("a || b && !c")
>>> too_deep("!" * 150 + "x")
(100, 101)
>>> too_deep("type == `" + "[" * 150 + "]" * 150 + "`")
(109, 101)
"""

from __future__ import annotations

from typing import Any

from jmespath import exceptions as jmes_errors  # type: ignore[import-untyped]
from jmespath.lexer import Lexer  # type: ignore[import-untyped]

__all__ = ["MAX_NESTING", "MAX_TREE_DEPTH", "too_deep", "tree_too_deep"]

MAX_NESTING = 100
"""Brackets, prefix operators and projections a token may be nested in (see above)."""
MAX_TREE_DEPTH = 200
"""Levels the parsed tree of a filter or mapping expression may have."""

_OPEN = frozenset({"lbracket", "lbrace", "lparen", "filter"})
_CLOSE = frozenset({"rbracket", "rbrace", "rparen"})
_NESTING = frozenset({"not", "expref", "star", "flatten"})  # parsed by recursion


def too_deep(text: str, limit: int = MAX_NESTING) -> tuple[int, int] | None:
    """``(column, level)`` of the first token nested deeper than ``limit``, or None.

    Text the lexer refuses gives None: the parser reports that error itself.

    >>> too_deep("(" * 3 + "a" + ")" * 3, limit=2)
    (2, 3)
    """
    deep = _literal_too_deep(text, limit)
    if deep is not None:
        return deep
    frames = [0]  # prefix operators and projections seen so far in each open bracket
    level = 0
    try:
        for token in Lexer().tokenize(text):
            kind = token["type"]
            if kind in _OPEN:
                frames.append(0)
                level += 1
            elif kind in _CLOSE and len(frames) > 1:
                level -= 1 + frames.pop()
                kind = "group"  # the closed group counts as one operand nesting its parent
            if kind in _NESTING or kind == "group":
                frames[-1] += 1
                level += 1
            if level > limit:
                return token["start"], level
    except jmes_errors.JMESPathError:
        return None
    return None


def _literal_too_deep(text: str, limit: int) -> tuple[int, int] | None:
    """``(column, level)`` where a JSON literal's arrays and objects nest past ``limit``.

    Raw strings and quoted identifiers are skipped as jmespath's lexer skips them; inside a
    literal, JSON strings are skipped, and a backslash escapes the next character throughout.
    """
    closing = {"'": "'", '"': '"', "`": "`"}
    i, n = 0, len(text)
    while i < n:
        quote = closing.get(text[i])
        i += 1
        if quote is None:
            continue
        level = 0
        in_string = False
        while i < n and text[i] != quote:
            ch = text[i]
            if ch == "\\":
                i += 2
                continue
            if quote == "`":
                if ch == '"':
                    in_string = not in_string
                elif not in_string and ch in "[{":
                    level += 1
                    if level > limit:
                        return i, level
                elif not in_string and ch in "]}":
                    level -= 1
            i += 1
        i += 1
    return None


def tree_too_deep(node: Any, limit: int = MAX_TREE_DEPTH) -> int | None:
    """The depth of a parsed jmespath tree if it passes ``limit``, else None (no recursion).

    >>> import jmespath
    >>> tree_too_deep(jmespath.compile("a || b || c").parsed, limit=2)
    3
    """
    deepest = 0
    stack = [(node, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        for child in item.get("children", ()) if isinstance(item, dict) else ():
            if isinstance(child, dict):
                stack.append((child, depth + 1))
    return deepest if deepest > limit else None
