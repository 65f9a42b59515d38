"""The work one mapping expression may do: every value it builds is charged to a budget.

Each function bounds its own result (``range`` gives at most ``MAX_ELEMENTS`` numbers), but a
projection calls a function once per element, and a pipe can double a list at every step:
``range(`0`, `1000000`)[*].range(`0`, `1000`)`` would build 10^9 numbers. So one evaluation
gets ``MAX_WORK`` units: one for every node of the expression it evaluates (a projection
evaluates its right side once per element), plus the elements of every list, dict or string a
projection, flatten, multi-select, slice or function call returns, plus the elements our
functions build inside (``tensor``, ``to_list``). Reading a capture (however big its weights)
costs one unit. Running out raises :class:`WorkExceeded`; the budget allows about a second of
work.

>>> import jmespath
>>> search(jmespath.compile("[@, @][]").parsed, [1, 2], jmespath.Options())
[1, 2, 1, 2]
>>> search(jmespath.compile("[@, @][] | [@, @][]").parsed, [1, 2], jmespath.Options(), budget=20)
Traceback (most recent call last):
...
amanda.rewrite.mapping.budget.WorkExceeded: the expression does more than 20 units of work
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from jmespath.visitor import Options, TreeInterpreter  # type: ignore[import-untyped]

__all__ = ["MAX_WORK", "WorkExceeded", "search", "spend"]

MAX_WORK = 5_000_000
"""Units of work (nodes evaluated, values built) one expression evaluation may do."""

_BUILDING = frozenset({"projection", "filter_projection", "value_projection", "flatten",
                       "multi_select_list", "multi_select_dict", "function_expression", "slice"})


class WorkExceeded(Exception):
    """An evaluation did more work than its budget allows."""


class _Budget:
    __slots__ = ("left", "total")

    def __init__(self, total: int) -> None:
        self.total = total
        self.left = total

    def spend(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            raise WorkExceeded(f"the expression does more than {self.total} units of work")


_current: ContextVar[_Budget | None] = ContextVar("mapping_budget", default=None)


def spend(count: int) -> None:
    """Charge ``count`` units to the evaluation running in this context (if any)."""
    budget = _current.get()
    if budget is not None:
        budget.spend(count)


class _Interpreter(TreeInterpreter):
    def __init__(self, options: Options, budget: _Budget) -> None:
        super().__init__(options)
        self.budget = budget

    def visit(self, node: dict, *args: Any, **kwargs: Any) -> Any:
        value = super().visit(node, *args, **kwargs)
        built = len(value) if node["type"] in _BUILDING and isinstance(value, (list, dict, str)) else 0
        self.budget.spend(built + 1)
        return value


def search(parsed: dict, data: Any, options: Options, budget: int = MAX_WORK) -> Any:
    """Evaluate a parsed jmespath expression on ``data`` within ``budget`` units of work."""
    counter = _Budget(budget)
    token = _current.set(counter)
    try:
        return _Interpreter(options, counter).visit(parsed, data)
    finally:
        _current.reset(token)
