"""``check(model)``: every type error of a model as a ``Problem``; it never raises for one.

Problems come from the rules (dtype mismatch, broadcasting failure, wrong rank, an attribute
inconsistent with an input's shape), from declared port types that contradict the inferred
ones, and from symbols bound inconsistently: when one op forces ``batch`` to 4 and another
forces it to 8, the second is reported. Unknown and symbolic dims are accepted where they
could fit.

>>> import amanda
>>> add = amanda.op("Add", "add", inputs=["A", "B"], outputs=["C"])
>>> g = amanda.Container(None, "g", inputs=[amanda.Port("a", attrs={"dtype": "float32", "shape": [2, 3]}),
...     amanda.Port("b", attrs={"dtype": "float32", "shape": [4]})], outputs=["c"], children=[add],
...     edges=[("g:a", "add:A"), ("g:b", "add:B"), ("add:C", "g:c")], attrs={"namespace": "amanda/onnx/17"})
>>> for problem in check(g):
...     print(problem)
at add: expected Add: shapes that broadcast, found [2,3] and [4]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from amanda.containers.arguments import expect_container, expect_mapping
from amanda.errors import AmandaError, Problem
from amanda.types.typemap import infer_types

__all__ = ["check"]


def check(model: Any, inputs: Mapping[str, Any] | None = None) -> list[Problem]:
    """Every type error in ``model`` (given its declared input types, or ``inputs``)."""
    expect_container(model, "model")
    expect_mapping(inputs, "inputs", "a mapping of input names to types", optional=True)
    try:
        types = infer_types(model, inputs)
    except AmandaError as exc:
        return [Problem(exc.path or (), exc.expected or "a model whose types can be inferred",
                        exc.found or str(exc))]
    problems = types.problems
    bound: dict[str, tuple[int, tuple]] = {}
    for path, symbol, size in types.bindings:
        first = bound.setdefault(symbol, (size, path))
        if first[0] != size:
            problems.append(Problem(path, f"dim {symbol!r} = {first[0]} (as at {'/'.join(first[1])})",
                                    str(size)))
    return problems
