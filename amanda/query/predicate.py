"""Filters: JMESPath expressions compiled into Python predicates over table columns.

The common subset (field access, literals, comparisons, ``&&``, ``||``, ``!`` and
function calls) becomes one Python list comprehension reading the table's columns
(see :mod:`amanda.query.filters`); any other node (projections, indexes, pipes,
exprefs …) is evaluated by the jmespath library on the node's view, so a filter always
gives what jmespath gives.

A filter also says which index can narrow its candidates: a leading conjunct such as
``type == 'Dot'``, ``is_op``, ``attrs.k > `1``` (false wherever ``attrs.k`` is null) or
``in_computation('train')``, provided nothing before it can raise.

>>> from amanda.query.parse import parse_selector
>>> step = parse_selector("$..[?is_op && attrs.i > `97`]")[0]
>>> Predicate("$..[?is_op && attrs.i > `97`]", step).prefilters
[('attr', 'i'), ('is_op', None)]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from jmespath import exceptions as jmes_errors
from jmespath.lexer import Lexer
from jmespath.visitor import Options, TreeInterpreter

from amanda.containers.phases import check_phase
from amanda.errors import QueryError
from amanda.query.filters import FIELDS, ORDER, Compiler, Env, field_chain, truth
from amanda.query.functions import FUNCTION_NAMES, QueryFunctions, arity
from amanda.query.parse import Step, compile_filter, query_error
from amanda.query.traps import check_fields

if TYPE_CHECKING:
    from amanda.query.indexes import NodeTable

__all__ = ["ENGINES", "Predicate"]

ENGINES = ("compiled", "jmespath")

_PRIORITY = {"type": 0, "name": 0, "computation": 1, "own": 2, "attr": 3, "is_op": 4}
_GRAPH_FUNCTIONS = {"producer_types", "consumer_types"}


# -- planning: safety and the indexes a filter can use -----------------------------------------


def _safe(node: dict) -> bool:
    """Whether evaluating ``node`` can never raise (so skipping it changes nothing)."""
    kind = node["type"]
    if kind == "comparator" and node["value"] in ORDER or kind == "slice":
        return False
    if kind == "function_expression":
        name, args = node["value"], node["children"]
        if name in _GRAPH_FUNCTIONS and not args:
            return True
        return name == "in_computation" and len(args) == 1 and args[0]["type"] == "literal" and isinstance(
            args[0]["value"], str
        )
    return all(_safe(c) for c in node.get("children", ()) if isinstance(c, dict))


def _conjuncts(node: dict) -> list[dict]:
    if node["type"] == "and_expression":
        return _conjuncts(node["children"][0]) + _conjuncts(node["children"][1])
    return [node]


def _index_of(node: dict) -> tuple[tuple[str, Any], bool] | None:
    """``(index spec, exact)`` for a conjunct an index can answer or narrow."""
    kind = node["type"]
    chain = field_chain(node)
    if chain == ["is_op"]:
        return ("is_op", None), True
    if chain is not None:
        spec = _attr_spec(chain)
        return (spec, False) if spec else None
    if kind == "function_expression" and node["value"] == "in_computation" and _safe(node):
        return ("computation", node["children"][0]["value"]), True
    if kind != "comparator":
        return None
    left, right = node["children"]
    if right["type"] != "literal":
        left, right = right, left
    side = field_chain(left)
    if side is None:
        return None
    literal = right["value"] if right["type"] == "literal" else None
    if node["value"] == "eq" and side in (["type"], ["name"]) and isinstance(literal, str):
        return (side[0], literal), True
    spec = _attr_spec(side)
    if spec is None or not _safe(right):
        return None
    if node["value"] in ORDER or (node["value"] == "eq" and right["type"] == "literal" and right["value"] is not None):
        return spec, False  # null on the attribute's side makes the comparison false
    return None


def _attr_spec(chain: list[str]) -> tuple[str, str] | None:
    if chain[0] == "namespace":
        return ("attr", "namespace")
    if chain[0] in ("attrs", "own_attrs") and len(chain) > 1:
        return ("attr" if chain[0] == "attrs" else "own", chain[1])
    return None


def _check_functions(selector: str, step: Step, node: dict) -> None:
    if node["type"] == "function_expression":
        name = node["value"]
        where = step.offset + _token_position(step.arg, "function", name)
        if name not in FUNCTION_NAMES:
            known = ", ".join(sorted(FUNCTION_NAMES))
            raise query_error(selector, where, f"unknown function {name}() in the filter; known: {known}",
                              expected="a known function", found=name)
        count, variadic = arity(name)
        given = len(node["children"])
        if given < count or (given > count and not variadic):
            need = f"at least {count}" if variadic else str(count)
            raise query_error(selector, where, f"{name}() takes {need} argument(s), found {given}",
                              expected=f"{need} arguments", found=str(given))
    for child in node.get("children", ()):
        if isinstance(child, dict):
            _check_functions(selector, step, child)


def _named_computations(node: dict) -> tuple[str, ...]:
    """The literal names given to ``in_computation`` anywhere in a parsed filter."""
    found: list[str] = []
    stack = [node]
    while stack:
        here = stack.pop()
        args = here.get("children", ())
        if here["type"] == "function_expression" and here["value"] == "in_computation" and len(args) == 1 \
                and args[0]["type"] == "literal" and isinstance(args[0]["value"], str):
            found.append(args[0]["value"])
        stack.extend(c for c in args if isinstance(c, dict))
    return tuple(dict.fromkeys(found))


def _token_position(text: str, what: str, name: str = "") -> int:
    """Column (within the filter) of a function's name or of the first ordering operator."""
    try:
        tokens = list(Lexer().tokenize(text))
    except jmes_errors.JMESPathError:
        return 0
    for here, after in zip(tokens, tokens[1:] + [{}]):
        is_call = here["type"] == "unquoted_identifier" and after.get("type") == "lparen"
        if what == "function" and is_call and here["value"] == name:
            return here["start"]
        if what == "order" and here["type"] in ORDER:
            return here["start"]
    return 0


# -- the predicate ------------------------------------------------------------------------------


class Predicate:
    """One filter step, ready to run on any table.

    ``prefilters``: index specs that may narrow the candidates, best first;
    ``exact``: the whole filter is that first index (no evaluation needed).
    """

    def __init__(self, selector: str, step: Step, engine: str = "compiled") -> None:
        self.selector = selector
        self.step = step
        self.engine = engine
        self.parsed = compile_filter(selector, step)
        _check_functions(selector, step, self.parsed)
        self.computations = _named_computations(self.parsed)
        check_fields(selector, step, self.parsed)
        conjuncts = _conjuncts(self.parsed)
        found: list[tuple[tuple, bool]] = []
        for conjunct in conjuncts:
            usable = _index_of(conjunct)
            if usable is not None:
                found.append(usable)
            if not _safe(conjunct):
                break  # a later index would skip nodes on which this conjunct raises
        found.sort(key=lambda item: _PRIORITY[item[0][0]])
        self.prefilters = [spec for spec, _ in found] if engine == "compiled" else []
        self.exact = engine == "compiled" and len(conjuncts) == 1 and bool(found) and found[0][1]
        compiler = Compiler()
        self._make = compiler.truth(self.parsed)
        self.specs = compiler.specs
        self.fallbacks = compiler.fallbacks  # nodes left to the jmespath library
        self.calls = tuple(compiler.calls)

    def check_names(self, t: NodeTable) -> None:
        """Refuse an ``in_computation('c')`` whose ``c`` the queried model does not know, with
        a caret under the call (:func:`amanda.containers.phases.check_phase`)."""
        for name in self.computations:
            try:
                check_phase(t.root, name, QueryError, "in_computation")
            except QueryError as exc:
                where = self.step.offset + _token_position(self.step.arg, "function", "in_computation")
                raise query_error(self.selector, where, str(exc), expected=exc.expected, found=exc.found) from None

    def run(self, t: NodeTable, candidates: Iterable[int], expected: int) -> list[int]:
        """The candidates (positions, in order) on which the filter is true."""
        functions = QueryFunctions(t)
        interpreter = TreeInterpreter(Options(custom_functions=functions))
        views = _Views(t)

        def jm(i: int, node: dict, keys: frozenset | None = None) -> Any:
            functions.position = i
            if keys is None:
                return interpreter.visit(node, views[i])
            view = {key: t.value(FIELDS[key], i) for key in keys if key in FIELDS}
            return interpreter.visit(node, view)

        def call(i: int, name: str, args: list) -> Any:
            functions.position = i
            return functions.call_function(name, args)

        if self.engine == "jmespath":
            parsed = self.parsed
            run = lambda cands: [i for i in cands if truth(jm(i, parsed))]
        else:
            columns: list[Any] = []
            for spec in self.specs:
                if spec[0] == "computation-set":
                    columns.append(t.computation(spec[1]))
                elif spec[0] == "view":
                    columns.append(views)
                else:
                    columns.append(t.getter(spec, expected))
            test = self._make(Env(columns, call, jm))
            run = lambda cands: [i for i in cands if test(i)]  # noqa: E731
        candidates = candidates if isinstance(candidates, (list, range)) else list(candidates)
        try:
            return run(candidates)
        except (jmes_errors.JMESPathError, TypeError, ValueError, ArithmeticError) as exc:
            raise self._explain(t, run, candidates, exc) from None

    def _explain(self, t: NodeTable, run: Any, candidates: Iterable[int], exc: Exception) -> Exception:
        culprit = None
        for i in candidates:
            try:
                run([i])
            except Exception:  # noqa: BLE001 - we are looking for the node that raised
                culprit = i
                break
        where = "/".join(map(str, t.path(culprit))) if culprit is not None else "?"
        column = self.step.offset
        if isinstance(exc, jmes_errors.JMESPathTypeError):
            column += _token_position(self.step.arg, "function", exc.function_name)
        elif isinstance(exc, TypeError):
            column += _token_position(self.step.arg, "order")
        message = f"filter failed on node {where or '<root>'}: {exc}"
        return query_error(self.selector, column, message, expected="a filter that applies to every node", found=str(exc))


class _Views:
    """Node views for this run, built on first use."""

    __slots__ = ("memo", "table")

    def __init__(self, t: NodeTable) -> None:
        self.table = t
        self.memo: dict[int, dict] = {}

    def __getitem__(self, p: int) -> dict:
        view = self.memo.get(p)
        if view is None:
            view = self.memo[p] = self.table.view(p)
        return view
