"""Queries: JSONPath-like selectors over containers, with JMESPath filters.

``$`` is the container queried; ``.name`` a child (``."dense/MatMul"`` when the name
holds other characters); ``[n]`` a child by index; ``*`` any child; ``..`` any
descendant; ``[?expr]`` the children for which the JMESPath ``expr`` is true on their
view. See ``docs/query.md`` for the grammar, the view and the functions.

>>> import amanda
>>> from amanda.containers import Container, op
>>> cell = Container("LSTM", "cell", children=[op("Dot", "w"), op("Tanh", "t")], attrs={"rnn_cell": True})
>>> init = op("Const", "init", attrs={"initializer": True})
>>> model = Container("Model", "m", children=[init, cell, op("Softmax", "out")])
>>> select(model, "$..[?type == 'Dot']").paths
(('cell', 'w'),)
>>> select(model, "$..[?is_op && attrs.rnn_cell]").paths
(('cell', 'w'), ('cell', 't'))
>>> select(model, "$[?is_op && !(attrs.initializer)]").paths  # `!a.b` would mean `(!a).b`
(('out',),)
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from amanda.containers.arguments import brief
from amanda.engines import install
from amanda.errors import QueryError
from amanda.query.evaluate import Selector
from amanda.query.selection import Selection

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["Selection", "Selector", "compile_selector", "select"]


def compile_selector(selector: str, *, relative: bool = False, engine: str = "compiled") -> Selector:
    """Parse and compile ``selector`` once (cached); raises QueryError if it is malformed.

    ``relative`` lets the selector leave out the leading ``$``; ``engine="jmespath"``
    evaluates filters with the jmespath library alone (slow; for checking).

    >>> compiled = compile_selector("$..[?is_op]")
    >>> from amanda.containers import Container, op
    >>> compiled.select(Container("G", "g", children=[op("Relu", "r")])).paths
    (('r',),)
    """
    _check_arguments(selector, relative, engine)
    return _compile(selector, relative, engine)


def _check_arguments(selector: object, relative: object = False, engine: object = "compiled") -> None:
    """Raise QueryError for arguments of the wrong type (before they reach the cache's hash)."""
    if not isinstance(selector, str):
        from amanda.query.parse import parse_selector

        parse_selector(selector)  # type: ignore[arg-type]  # raises the QueryError saying what a selector is
    if not isinstance(relative, bool):
        raise QueryError(f"relative is True or False, found {brief(relative)}", expected="a bool",
                         found=brief(relative))
    if not isinstance(engine, str):
        raise QueryError(f"engine is a string such as 'compiled', found {brief(engine)}", expected="a string",
                         found=brief(engine))


@lru_cache(maxsize=512)
def _compile(selector: str, relative: bool, engine: str) -> Selector:
    return Selector(selector, relative=relative, engine=engine)


def select(container: Container, selector: str) -> Selection:
    """The nodes of ``container`` that ``selector`` finds, as a Selection in document order.

    >>> from amanda.containers import Container, op
    >>> g = Container("G", "g", children=[op("Dot", "a"), op("Relu", "b")])
    >>> [path for path, _ in select(g, "$.*")]
    [('a',), ('b',)]
    """
    _check_arguments(selector)
    return _compile(selector, False, "compiled").select(container)


install("select", select)  # model.select(...) calls it
