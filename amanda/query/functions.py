"""JMESPath functions that ask about the graph around the node being filtered.

JMESPath functions receive only their arguments, so the evaluator tells the function
table which node it is filtering (``position``) before it evaluates the filter on that
node; the user writes ``in_computation('inference')`` with no node argument.

=======================  ====================================================================
``in_computation(c)``    whether the node runs when computation ``c`` is fetched (its outputs
                         and every named control port ``c``), see :mod:`amanda.query.analysis`
``producer_types()``     sorted distinct types of the ops feeding the node (data edges)
``consumer_types()``     sorted distinct types of the ops the node feeds (data edges)
=======================  ====================================================================

Every built-in JMESPath function (``contains``, ``length``, ``starts_with`` …) works too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jmespath import functions as jmes_functions
from jmespath.functions import signature

from amanda.query.analysis import neighbour_types

if TYPE_CHECKING:
    from amanda.query.indexes import NodeTable

__all__ = ["FUNCTION_NAMES", "QueryFunctions", "arity"]


class QueryFunctions(jmes_functions.Functions):
    """JMESPath's built-in functions plus amanda's graph functions, bound to one table.

    >>> from amanda.containers import Container, op
    >>> from amanda.query.indexes import table
    >>> g = Container("G", "g", children=[op("Dot", "d", outputs=["y"]), op("Relu", "r", ["x"])],
    ...               edges=[("d:y", "r:x")])
    >>> fns = QueryFunctions(table(g))
    >>> fns.position = 2
    >>> fns.call_function("producer_types", [])
    ['Dot']
    """

    def __init__(self, t: NodeTable) -> None:
        self.table = t
        self.position = 0

    @signature({"types": ["string"]})
    def _func_in_computation(self, name: str) -> bool:
        return self.position in self.table.computation(name)

    @signature()
    def _func_producer_types(self) -> list[Any]:
        return neighbour_types(self.table, self.position, "producers")

    @signature()
    def _func_consumer_types(self) -> list[Any]:
        return neighbour_types(self.table, self.position, "consumers")


FUNCTION_NAMES = frozenset(QueryFunctions.FUNCTION_TABLE)


def arity(name: str) -> tuple[int, bool]:
    """``(number of parameters, variadic)`` of a known function.

    >>> arity("in_computation"), arity("not_null")
    ((1, False), (1, True))
    """
    spec = QueryFunctions.FUNCTION_TABLE[name]["signature"]
    return len(spec), bool(spec and spec[-1].get("variadic"))
