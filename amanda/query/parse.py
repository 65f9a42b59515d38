"""The selector grammar: text -> a tuple of steps, and errors that point at the text.

    selector := "$" step*
    step     := "." child | ".." (child | bracket) | bracket
    child    := NAME | QUOTED | "*"
    bracket  := "[" ( INT | SLICE | "*" | QUOTED | "?" FILTER ) "]"

``NAME`` is letters, digits, ``_`` and ``-``; any other name is quoted with ``"`` or
``'`` (backslash escapes the next character). ``FILTER`` is a JMESPath expression,
parsed by the jmespath library, within the nesting limits of :mod:`amanda.jmespath_nesting`.

>>> [(s.axis, s.test, s.arg) for s in parse_selector('$.encoder..["dense/MatMul"]')]
[('child', 'name', 'encoder'), ('descendant', 'name', 'dense/MatMul')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import jmespath
from jmespath import exceptions as jmes_errors

from amanda.errors import QueryError
from amanda.jmespath_nesting import MAX_NESTING, MAX_TREE_DEPTH, too_deep, tree_too_deep

__all__ = ["Step", "compile_filter", "find_filter_end", "parse_selector", "query_error"]

_NAME = re.compile(r"[\w\-]+")
_INT = re.compile(r"\s*(-?\d+)\s*")
_SLICE = re.compile(r"\s*(-?\d+)?\s*:\s*(-?\d+)?\s*(?::\s*(-?\d+)?\s*)?")
_CLOSERS = {"]": "[", ")": "(", "}": "{"}


@dataclass(frozen=True)
class Step:
    """One step of a selector.

    ``axis`` is ``"child"`` or ``"descendant"`` (the step applies to every node below the
    current ones, as JSONPath's ``..``). ``test`` is ``"name"`` (``arg`` the name), ``"any"``,
    ``"index"`` (``arg`` an int), ``"slice"`` (``arg`` a ``(start, stop, step)`` triple) or
    ``"filter"`` (``arg`` the JMESPath text). ``position`` is the step's column in the
    selector; ``offset`` the column where a filter's text starts.
    """

    axis: str
    test: str
    arg: Any
    position: int
    offset: int = 0


def query_error(selector: str, position: int, message: str, expected: str | None = None, found: str | None = None) -> QueryError:
    """A QueryError whose message shows the selector with a caret under ``position``.

    >>> print(query_error("$..", 3, "expected a name after `..`"))
    expected a name after `..` (column 3)
      $..
         ^
    """
    shown = selector.replace("\n", " ").replace("\t", " ").replace("\r", " ")
    position = max(0, min(position, len(shown)))
    text = f"{message} (column {position})\n  {shown}\n  {' ' * position}^"
    error = QueryError(text, expected=expected, found=found)
    error.selector = selector  # type: ignore[attr-defined]
    error.position = position  # type: ignore[attr-defined]
    return error


def find_filter_end(text: str, start: int) -> int:
    """Index of the ``]`` closing a filter whose JMESPath text begins at ``start``; -1 if none.

    Brackets nest; quoted identifiers, raw strings and JSON literals may hold any character.

    >>> text = "$[?name == ']' && length(path) > `1`].x"
    >>> text[find_filter_end(text, 3):]
    '].x'
    """
    depth = 0
    i = start
    quotes = {"'": "'", '"': '"', "`": "`"}
    while i < len(text):
        ch = text[i]
        if ch in quotes:
            i += 1
            while i < len(text) and text[i] != quotes[ch]:
                i += 2 if text[i] == "\\" else 1
            if i >= len(text):
                return -1
        elif ch in "[({":
            depth += 1
        elif ch in _CLOSERS:
            if depth == 0:
                return i if ch == "]" else -1
            depth -= 1
        i += 1
    return -1


def parse_selector(text: str, relative: bool = False) -> tuple[Step, ...]:
    """Parse a selector into steps; ``relative`` allows leaving out the leading ``$``.

    >>> [(s.axis, s.test) for s in parse_selector("$..[?type == 'Dot']")]
    [('descendant', 'filter')]
    >>> parse_selector("$.a[")
    Traceback (most recent call last):
    ...
    amanda.errors.QueryError: expected an index, a slice, `*`, a quoted name or `?filter` after `[` (column 4)
      $.a[
          ^
    """
    if not isinstance(text, str):
        raise QueryError(f"a selector is a string such as '$..[?is_op]', found {type(text).__name__}",
                         expected="a selector string", found=type(text).__name__)
    return _Parser(text, relative).parse()


class _Parser:
    def __init__(self, text: str, relative: bool) -> None:
        self.text = text
        self.relative = relative
        self.i = 0

    def error(self, position: int, message: str) -> QueryError:
        found = self.text[position:position + 10] or "the end"
        return query_error(self.text, position, message, expected=message, found=found)

    def skip_space(self) -> None:
        while self.i < len(self.text) and self.text[self.i].isspace():
            self.i += 1

    def parse(self) -> tuple[Step, ...]:
        text = self.text
        self.skip_space()
        if text.startswith("$", self.i):
            self.i += 1
        elif not self.relative:
            raise self.error(self.i, "a selector starts with `$` (the container queried)")
        steps: list[Step] = []
        while True:
            self.skip_space()
            if self.i >= len(text):
                return tuple(steps)
            start = self.i
            if text.startswith("..", start):
                self.i += 2
                if text.startswith("[", self.i):
                    steps.append(self.bracket("descendant", start))
                else:
                    steps.append(self.child("descendant", start, "`..`"))
            elif text[start] == ".":
                self.i += 1
                steps.append(self.child("child", start, "`.`"))
            elif text[start] == "[":
                steps.append(self.bracket("child", start))
            else:
                raise self.error(start, "expected `.name`, `..`, or `[` to continue the selector")

    def child(self, axis: str, start: int, after: str) -> Step:
        text = self.text
        i = self.i
        if i < len(text) and text[i] == "*":
            self.i += 1
            return Step(axis, "any", None, start)
        if i < len(text) and text[i] in "'\"":
            return Step(axis, "name", self.quoted(), start)
        match = _NAME.match(text, i)
        if match is None:
            raise self.error(i, f"expected a name, a quoted name or `*` after {after}")
        self.i = match.end()
        return Step(axis, "name", match.group(), start)

    def quoted(self) -> str:
        text = self.text
        quote = text[self.i]
        begin = self.i
        self.i += 1
        out = []
        while self.i < len(text) and text[self.i] != quote:
            if text[self.i] == "\\" and self.i + 1 < len(text):
                self.i += 1
            out.append(text[self.i])
            self.i += 1
        if self.i >= len(text):
            raise self.error(begin, f"expected a closing {quote} for this quoted name")
        self.i += 1
        return "".join(out)

    def bracket(self, axis: str, start: int) -> Step:
        text = self.text
        open_at = self.i
        self.i += 1
        self.skip_space()
        i = self.i
        if text.startswith("?", i):
            offset = i + 1
            end = find_filter_end(text, offset)
            if end < 0:
                raise self.error(open_at, "expected a `]` closing this filter")
            body = text[offset:end]
            if not body.strip():
                raise self.error(offset, "expected a JMESPath expression after `[?`")
            self.i = end + 1
            return Step(axis, "filter", body, start, offset)
        if text.startswith("*", i):
            self.i += 1
            step = Step(axis, "any", None, start)
        elif i < len(text) and text[i] in "'\"":
            step = Step(axis, "name", self.quoted(), start)
        else:
            piece = _SLICE.match(text, i)
            integer = _INT.match(text, i)
            if piece is not None:
                parts = tuple(None if g is None else int(g) for g in piece.groups())
                if parts[2] == 0:
                    raise self.error(i, "expected a slice step other than 0")
                self.i = piece.end()
                step = Step(axis, "slice", parts, start)
            elif integer is not None:
                self.i = integer.end()
                step = Step(axis, "index", int(integer.group(1)), start)
            else:
                raise self.error(i, "expected an index, a slice, `*`, a quoted name or `?filter` after `[`")
        self.skip_space()
        if not text.startswith("]", self.i):
            raise self.error(self.i, "expected a `]` closing the bracket")
        self.i += 1
        return step


def compile_filter(selector: str, step: Step) -> Any:
    """The jmespath parse of a filter step, or a QueryError pointing into the selector.

    >>> compile_filter("$[?is_op]", parse_selector("$[?is_op]")[0])
    {'type': 'field', 'children': [], 'value': 'is_op'}
    """
    deep = too_deep(step.arg)
    if deep is not None:
        raise query_error(selector, step.offset + deep[0],
                          f"invalid filter: nested deeper than {MAX_NESTING} levels",
                          expected=f"at most {MAX_NESTING} levels of nesting", found=f"{deep[1]} levels")
    try:
        parsed = jmespath.compile(step.arg).parsed
    except jmes_errors.LexerError as exc:
        position = step.offset + (exc.lexer_position or 0)
        raise query_error(selector, position, f"invalid filter: {exc.message}") from None
    except jmes_errors.IncompleteExpressionError:
        raise query_error(selector, step.offset + len(step.arg), "invalid filter: the expression is incomplete") from None
    except jmes_errors.ParseError as exc:
        found = exc.token_value if exc.token_value is not None else exc.token_type
        position = step.offset + (exc.lex_position or 0)
        from amanda.query.traps import number_hint

        hint = number_hint(exc.token_type, step.arg[exc.lex_position or 0:])
        raise query_error(selector, position, f"invalid filter: unexpected {found!r}" + (f" ({hint})" if hint else ""),
                          found=str(found)) from None
    except jmes_errors.JMESPathError as exc:
        raise query_error(selector, step.offset, f"invalid filter: {exc}") from None
    depth = tree_too_deep(parsed)
    if depth is not None:
        raise query_error(selector, step.offset, f"invalid filter: parses {depth} levels deep, more than "
                          f"{MAX_TREE_DEPTH} (a chain of `||`, `&&`, `|` or comparisons adds one per operator)",
                          expected=f"at most {MAX_TREE_DEPTH} levels", found=f"{depth} levels")
    return parsed
