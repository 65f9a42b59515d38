"""JMESPath filter ASTs turned into Python code over table columns.

:class:`Compiler` writes, for a filter, one expression that is truthy exactly where
JMESPath finds the filter true on node ``i``'s view. Fields of the view read table
columns (``attrs.k`` reads the effective column of ``k``); literals, comparisons,
``&&``, ``||``, ``!`` and function calls become Python; any other node is evaluated by
the jmespath library on a view holding just the keys it reads. Helpers below repeat
jmespath's rules exactly (``0`` is true, ``1 == true`` is false, ordering compares
numbers or strings and is null otherwise).

>>> import jmespath
>>> compiler = Compiler()
>>> compiler.truth(jmespath.compile("is_op && type == 'Dot'").parsed)
"(C0[i] and (C1[i] == 'Dot'))"
>>> compiler.specs
[('is_op',), ('type',)]
"""

from __future__ import annotations

import math
import operator
from numbers import Number
from typing import Any

__all__ = ["FIELDS", "ORDER", "Compiler", "field_chain", "truth", "view_keys"]

FIELDS = {
    "name": ("name",), "type": ("type",), "path": ("path",), "depth": ("depth",),
    "attrs": ("attrs",), "own_attrs": ("own_attrs",), "inputs": ("inputs",), "outputs": ("outputs",),
    "controls": ("controls",), "is_op": ("is_op",), "namespace": ("attr", "namespace"), "uid": ("uid",),
}
# how each column's values turn into JMESPath truth: Python's own truth agrees with
# JMESPath for strings, lists, dicts, None and booleans, not for numbers (0 is true)
_PY_TRUTH = {"name", "type", "path", "attrs", "own_attrs", "inputs", "outputs", "controls", "uid"}
ORDER = {"lt": "<", "gt": ">", "lte": "<=", "gte": ">="}
_OPERATORS = {"lt": operator.lt, "gt": operator.gt, "lte": operator.le, "gte": operator.ge}


# -- JMESPath's semantics, as helpers for the generated code ----------------------------------


def _is_number(x: Any) -> bool:
    return isinstance(x, Number) and not isinstance(x, bool)


def truth(value: Any) -> bool:
    return not (value == "" or value == [] or value == {} or value is None or value is False)


def _not(value: Any) -> bool:
    if _is_number(value) and value == 0:
        return False
    return not value


def _eq(x: Any, y: Any) -> bool:
    if _is_number(x) and x in (0, 1):
        if isinstance(y, bool):
            return False
    elif _is_number(y) and y in (0, 1) and isinstance(x, bool):
        return False
    return x == y


def _ordered(op: str, x: Any, y: Any) -> Any:
    if not ((_is_number(x) or isinstance(x, str)) and (_is_number(y) or isinstance(y, str))):
        return None
    return _OPERATORS[op](x, y)


def _field(value: Any, key: str) -> Any:
    return value.get(key) if value.__class__ is dict else None


_GLOBALS = {
    "_T": truth, "_not": _not, "_eq": _eq, "_ord": _ordered, "_get": _field,
    "_NUM": frozenset({int, float}),
}


# -- the compiler -------------------------------------------------------------------------------


class Compiler:
    def __init__(self) -> None:
        self.specs: list[tuple] = []
        self.globals: dict[str, Any] = dict(_GLOBALS)
        self.temps = 0

    def column(self, spec: tuple) -> str:
        if spec not in self.specs:
            self.specs.append(spec)
        return f"C{self.specs.index(spec)}"

    def const(self, value: Any) -> str:
        if value is None or type(value) in (bool, int, str):
            return repr(value)
        if type(value) is float and math.isfinite(value):
            return repr(value)
        name = f"K{len(self.globals)}"
        self.globals[name] = value
        return name

    def temp(self) -> str:
        self.temps += 1
        return f"_t{self.temps}"

    def fallback(self, node: dict) -> tuple[str, str]:
        return f"_jm(i, {self.const(node)}, {self.const(view_keys(node))})", "any"

    def value(self, node: dict) -> tuple[str, str]:
        """Python code giving JMESPath's value of ``node`` on the view of node ``i``, and
        the kind of that value (for truth tests)."""
        kind = node["type"]
        if kind in ("field", "subexpression"):
            chain = field_chain(node)
            if chain is None:
                return self.fallback(node)
            return self.fields(chain)
        if kind == "literal":
            return self.const(node["value"]), "literal"
        if kind == "current":
            return f"{self.column(('view',))}[i]", "py"
        if kind == "comparator":
            return self.comparator(node), "py"
        if kind == "and_expression":
            left, right = (self.value(c)[0] for c in node["children"])
            t = self.temp()
            return f"({right} if _T({t} := {left}) else {t})", "any"
        if kind == "or_expression":
            left, right = (self.value(c)[0] for c in node["children"])
            t = self.temp()
            return f"({t} if _T({t} := {left}) else {right})", "any"
        if kind == "not_expression":
            return self.negation(node["children"][0]), "bool"
        if kind == "function_expression":
            return self.call(node)
        return self.fallback(node)

    def fields(self, chain: list[str]) -> tuple[str, str]:
        head, rest = chain[0], chain[1:]
        if head in ("attrs", "own_attrs") and rest:
            spec: tuple | None = ("attr" if head == "attrs" else "own", rest[0])
            rest = rest[1:]
        else:
            spec = FIELDS.get(head)
        if spec is None:
            return "None", "literal"
        code = f"{self.column(spec)}[i]"
        for key in rest:
            code = f"_get({code}, {key!r})"
        if rest:
            return code, "any"
        if spec[0] == "is_op":
            return code, "bool"
        if spec[0] == "depth":
            return code, "true"
        return code, "py" if spec[0] in _PY_TRUTH else "any"

    def comparator(self, node: dict) -> str:
        op = node["value"]
        left_node, right_node = node["children"]
        left, right = self.value(left_node)[0], self.value(right_node)[0]
        literal = _literal_of(right_node, left_node)
        if op in ("eq", "ne"):
            plain = literal is not _NONE and not isinstance(literal, bool) and not (
                _is_number(literal) and literal in (0, 1)
            )
            code = f"({left} == {right})" if plain else f"_eq({left}, {right})"
            return code if op == "eq" else f"(not {code})"
        symbol = ORDER[op]
        # the usual case, a column against a number or string literal, inline
        if right_node["type"] == "literal" and type(literal) in (int, float, str):
            t = self.temp()
            guard = "in _NUM" if type(literal) is not str else "is str"
            return f"({t} {symbol} {right} if ({t} := {left}).__class__ {guard} else _ord({op!r}, {t}, {right}))"
        return f"_ord({op!r}, {left}, {right})"

    def negation(self, child: dict) -> str:
        code, kind = self.value(child)
        if kind == "bool":
            return f"(not {code})"
        return f"_not({code})"

    def call(self, node: dict) -> tuple[str, str]:
        name, args = node["value"], node["children"]
        if any(a["type"] == "expref" for a in args):
            return self.fallback(node)
        if name == "in_computation" and len(args) == 1 and args[0]["type"] == "literal" and isinstance(
            args[0]["value"], str
        ):
            return f"(i in {self.column(('computation-set', args[0]['value']))})", "bool"
        values = ", ".join(self.value(a)[0] for a in args)
        return f"_call(i, {name!r}, [{values}])", "any"

    def truth(self, node: dict) -> str:
        """Python code that is truthy exactly when JMESPath finds ``node`` true."""
        kind = node["type"]
        if kind == "and_expression":
            left, right = node["children"]
            return f"({self.truth(left)} and {self.truth(right)})"
        if kind == "or_expression":
            left, right = node["children"]
            return f"({self.truth(left)} or {self.truth(right)})"
        code, value_kind = self.value(node)
        if value_kind in ("bool", "py"):
            return code
        if value_kind == "true":
            return "True"
        if value_kind == "literal":
            return repr(truth(node["value"] if kind == "literal" else None))
        return f"_T({code})"


_NONE = object()


def _literal_of(*nodes: dict) -> Any:
    for node in nodes:
        if node["type"] == "literal":
            return node["value"]
    return _NONE


def view_keys(node: dict) -> frozenset | None:
    """The view keys evaluating ``node`` on a view can read; None if it may need the whole
    view (``@``). A fallback then builds only those keys."""
    keys: set[str] = set()
    stack = [node]
    while stack:
        here = stack.pop()
        kind = here["type"]
        if kind == "current":
            return None
        if kind == "field":
            keys.add(here["value"])
            continue
        children = [c for c in here.get("children", ()) if isinstance(c, dict)]
        if kind in ("subexpression", "index_expression", "projection", "value_projection", "pipe",
                    "filter_projection"):
            # only the first child reads the view; the others read what it produced
            stack.append(children[0])
        elif kind != "expref":  # an expref reads the elements a function hands it
            stack.extend(children)
    return frozenset(keys)


def field_chain(node: dict) -> list[str] | None:
    """``["attrs", "k", …]`` for a plain chain of field accesses; None otherwise."""
    if node["type"] == "field":
        return [node["value"]]
    if node["type"] != "subexpression":
        return None
    head = field_chain(node["children"][0])
    if head is None:
        return None
    for child in node["children"][1:]:
        if child["type"] != "field":
            return None
        head.append(child["value"])
    return head
