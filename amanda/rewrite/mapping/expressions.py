"""Expressions in mapping tables: ``${...}`` is JMESPath over a match's captures, never Python.

A string that is exactly one ``${expr}`` evaluates to the expression's value (any type); a string
with ``${...}`` among other text interpolates each value as text; ``$${`` writes a literal
``${``; any other string is a literal. Inside an expression ``$m`` names the op captured as
``$m`` (it is rewritten to the quoted JMESPath identifier ``"$m"``), and ``$source``/``$target``
are the table's namespaces. Each capture reads as ``{name, type, path, namespace, attrs, inputs,
outputs, input_attrs, output_attrs, consumers}``; arrays stay arrays (use ``to_list``).

Expressions are compiled when a table is loaded, so a syntax error (or Python smuggled in), or
nesting past the limits of :mod:`amanda.jmespath_nesting`, is a ``MappingError`` at load time. Evaluation
can only read the captures and call JMESPath's built-in functions plus the pure functions of
:mod:`amanda.rewrite.mapping.functions` (``FUNCTIONS``); every node it evaluates and every
value it builds is charged to a budget (``budget.MAX_WORK``, 5 * 10^6), so no expression can run
away.

>>> template = compile_template("${$m.attrs.transpose_a && 'Gemm' || 'MatMul'}", "type")
>>> template.evaluate({"$m": {"attrs": {"transpose_a": True}}})
'Gemm'
>>> compile_template("${$m.name}/pre", "name").evaluate({"$m": {"name": "conv"}})
'conv/pre'
>>> compile_template("${__import__('os')}", "type")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
amanda.errors.MappingError: at type: expected a JMESPath expression calling only known functions, ...
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import jmespath
import jmespath.exceptions

from amanda.errors import MappingError
from amanda.jmespath_nesting import MAX_NESTING, MAX_TREE_DEPTH, too_deep, tree_too_deep
from amanda.rewrite.mapping import budget
from amanda.rewrite.mapping.functions import FUNCTIONS, MAX_ELEMENTS, OPTIONS, onnx_dtype, truthy

__all__ = ["FUNCTIONS", "MAX_ELEMENTS", "Template", "compile_template", "compile_value", "evaluate_value",
           "onnx_dtype", "quote_variables", "truthy"]

MAX_EXPRESSION = 2000  # characters
_VARIABLE = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]*")
_QUOTES = {"'": "'", '"': '"', "`": "`"}


def _skip_quoted(text: str, start: int) -> int:
    """Index just past the quoted literal opening at ``start`` (backslash escapes honoured)."""
    close = _QUOTES[text[start]]
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == close:
            return i + 1
        i += 1
    return len(text)


def quote_variables(expression: str) -> tuple[str, tuple[str, ...]]:
    """Rewrite ``$name`` outside literals as the JMESPath identifier ``"$name"``; also return the
    names used.

    >>> quote_variables("$m.attrs.x == 'a $b'")
    ('"$m".attrs.x == \\'a $b\\'', ('$m',))
    """
    out: list[str] = []
    names: list[str] = []
    i = 0
    while i < len(expression):
        c = expression[i]
        if c in _QUOTES:
            end = _skip_quoted(expression, i)
            out.append(expression[i:end])
            i = end
            continue
        found = _VARIABLE.match(expression, i) if c == "$" else None
        if found:
            names.append(found.group())
            out.append(f'"{found.group()}"')
            i = found.end()
            continue
        out.append(c)
        i += 1
    return "".join(out), tuple(dict.fromkeys(names))


def _expression_end(text: str, start: int) -> int:
    """Index of the ``}`` closing the ``${`` whose ``{`` is at ``start``, or -1."""
    depth = 0
    i = start
    while i < len(text):
        c = text[i]
        if c in _QUOTES:
            i = _skip_quoted(text, i)
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


class Template:
    """A string with ``${...}`` parts, compiled; ``evaluate(captures)`` gives its value."""

    __slots__ = ("parts", "source", "variables", "where")

    def __init__(self, source: str, parts: list[Any], variables: tuple[str, ...], where: Any) -> None:
        self.source = source
        self.parts = parts  # literal strings and (expression text, compiled) pairs
        self.variables = variables
        self.where = where

    def __repr__(self) -> str:
        return f"Template({self.source!r})"

    def evaluate(self, data: Mapping[str, Any]) -> Any:
        """The value: the expression's own value for a whole-string ``${...}``, else text."""
        values = [part if isinstance(part, str) else self._search(part, data) for part in self.parts]
        if len(self.parts) == 1 and not isinstance(self.parts[0], str):
            return values[0]
        return "".join(v if isinstance(v, str) else _text(v) for v in values)

    def _search(self, part: tuple[str, Any], data: Mapping[str, Any]) -> Any:
        text, compiled = part
        try:
            return budget.search(compiled.parsed, data, OPTIONS)
        except budget.WorkExceeded as exc:
            raise MappingError.at(self.where, f"an expression doing at most {budget.MAX_WORK} units of work",
                                  f"${{{text}}}: {exc}") from None
        except (jmespath.exceptions.JMESPathError, TypeError, ValueError, OverflowError) as exc:
            raise MappingError.at(self.where, f"an expression that evaluates: ${{{text}}}",
                                  f"{type(exc).__name__}: {exc}") from None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def compile_template(source: str, where: Any) -> Template | str:
    """Compile a string: a ``Template`` if it holds ``${...}``, else the literal string itself.

    Raises ``MappingError`` (at ``where``) for an unclosed ``${``, an expression that is not
    JMESPath, or one longer than ``MAX_EXPRESSION`` characters.
    """
    if "${" not in source:
        return source
    parts: list[Any] = []
    variables: list[str] = []
    literal: list[str] = []
    i = 0
    while i < len(source):
        if source.startswith("$${", i):
            literal.append("${")
            i += 3
            continue
        if not source.startswith("${", i):
            literal.append(source[i])
            i += 1
            continue
        end = _expression_end(source, i + 1)
        if end < 0:
            raise MappingError.at(where, "'${' closed by '}'", repr(source))
        text = source[i + 2:end].strip()
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append((text, _compile(text, where)))
        variables += quote_variables(text)[1]
        i = end + 1
    if literal:
        parts.append("".join(literal))
    if all(isinstance(p, str) for p in parts):
        return "".join(parts)
    return Template(source, parts, tuple(dict.fromkeys(variables)), where)


def _compile(text: str, where: Any) -> Any:
    if not text:
        raise MappingError.at(where, "a JMESPath expression inside ${...}", "an empty one")
    if len(text) > MAX_EXPRESSION:
        raise MappingError.at(where, f"an expression of at most {MAX_EXPRESSION} characters",
                              f"{len(text)} characters")
    # measured with each `$` as `_`, which keeps columns those of the text as written
    deep = too_deep(_VARIABLE.sub(lambda m: "_" + m.group()[1:], text))
    if deep is not None:
        column, level = deep
        raise MappingError.at(where, f"an expression nested at most {MAX_NESTING} levels deep",
                              f"${{{_excerpt(text, column)}}} nested {level} levels at column {column}")
    quoted, _ = quote_variables(text)
    try:
        compiled = jmespath.compile(quoted)
    except jmespath.exceptions.JMESPathError as exc:
        reason = str(exc).splitlines()[0]
        raise MappingError.at(where, "a JMESPath expression (mapping files hold no Python)",
                              f"${{{text}}}: {reason}") from None
    depth = tree_too_deep(compiled.parsed)
    if depth is not None:
        raise MappingError.at(where, f"an expression parsing at most {MAX_TREE_DEPTH} levels deep",
                              f"${{{_excerpt(text, 0)}}} parses {depth} levels deep")
    unknown = sorted(_functions_called(compiled.parsed) - set(FUNCTIONS.FUNCTION_TABLE))
    if unknown:
        raise MappingError.at(where, "a JMESPath expression calling only known functions",
                              f"${{{text}}} calls {', '.join(unknown)}",
                              f"functions: {', '.join(sorted(FUNCTIONS.FUNCTION_TABLE))}")
    return compiled


def _excerpt(text: str, column: int) -> str:
    """``text`` shortened to about 60 characters around ``column``."""
    if len(text) <= 60:
        return text
    start = max(0, column - 30)
    return ("…" if start else "") + text[start:start + 60] + ("…" if start + 60 < len(text) else "")


def _functions_called(node: Any) -> set[str]:
    """Names of the functions a parsed JMESPath expression calls."""
    found: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("type") == "function_expression":
                found.add(str(item.get("value")))
            stack.extend(item.get("children", ()))
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _map_tree(value: Any, where: tuple[str, ...], leaf: Any) -> Any:
    """The same tree of dicts and lists with ``leaf(value, where)`` at every leaf, built
    iteratively (a document may nest as deep as the loader allows)."""
    out: list[Any] = [None]
    stack: list[tuple[Any, tuple[str, ...], Any, Any]] = [(value, where, out, 0)]
    while stack:
        item, here, parent, slot = stack.pop()
        if isinstance(item, dict):
            parent[slot] = new = dict.fromkeys(item)
            stack.extend((v, (*here, str(k)), new, k) for k, v in item.items())
        elif isinstance(item, list):
            parent[slot] = new_list = [None] * len(item)
            stack.extend((v, (*here, str(i)), new_list, i) for i, v in enumerate(item))
        else:
            parent[slot] = leaf(item, here)
    return out[0]


def compile_value(value: Any, where: tuple[str, ...]) -> Any:
    """Compile every string of a plain-data tree (dicts, lists, scalars) with ``compile_template``."""
    return _map_tree(value, where, lambda v, w: compile_template(v, "/".join(w)) if isinstance(v, str) else v)


def evaluate_value(value: Any, data: Mapping[str, Any]) -> Any:
    """Evaluate a tree made by ``compile_value`` against the captures ``data``."""
    return _map_tree(value, (), lambda v, w: v.evaluate(data) if isinstance(v, Template) else v)


def template_variables(value: Any) -> set[str]:
    """Every ``$name`` the templates in a compiled tree read."""
    found: set[str] = set()
    stack = [value]
    while stack:  # iterative: the tree may nest as deep as the loader allows
        item = stack.pop()
        if isinstance(item, Template):
            found.update(item.variables)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found
