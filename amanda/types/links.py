"""Whether two containers chained one into the other can ever fit together, from their types.

``chain(a, b)`` asks this when ``a``'s inputs declare their types (as every layer's do: a
dtype, often of unknown rank). ``a`` is typed at each input rank from 1 to :data:`MAX_RANK`
(unknown dims); where ``a`` types cleanly, ``b`` is typed on what ``a`` gives. When no rank lets
``b`` take ``a``'s outputs, although ``b`` alone types cleanly at some rank, the chain can never
run: ``Dense(4, 8) >> Dense(4, 3)`` is refused when it is composed, naming both layers, instead
of failing at run time inside a fused kernel. Containers without declared input types, and any
pair where the answer is not certain, are accepted.

>>> from amanda import layers
>>> print(link_problem(layers.Dense(4, 8, name="a"), layers.Dense(4, 3, name="b"), [("y", "x")]))
'a' (Dense) gives y: float32[?,8] (at any input rank), which 'b' (Dense) cannot take: at b/matmul: \
expected MatMul: the inner dims of a matrix product equal to 8, found 4
>>> link_problem(layers.Dense(4, 8), layers.Dense(8, 3), [("y", "x")]) is None
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amanda.errors import AmandaError, Problem, format_path
from amanda.types.tensor_type import TensorType, TypeMismatch, from_attrs
from amanda.types.typemap import infer_types

__all__ = ["MAX_RANK", "link_problem"]

MAX_RANK = 6  # input ranks tried when a container's inputs declare only a dtype


def _declared(container: Any) -> dict[str, TensorType] | None:
    """Declared tensor types of every input port, or None if one has none."""
    found = {}
    for port in container.inputs:
        try:
            t = from_attrs(port.attrs) if port.attrs else None
        except TypeMismatch:
            return None
        if type(t) is not TensorType or t.dtype is None:
            return None
        found[port.name] = t
    return found


def _probes(declared: dict[str, TensorType]) -> list[dict[str, TensorType]]:
    if all(t.shape is not None for t in declared.values()):
        return [declared]
    return [{name: t if t.shape is not None else TensorType(t.dtype, (None,) * rank) for name, t in declared.items()}
            for rank in range(1, MAX_RANK + 1)]


def _problems(container: Any, types: dict[str, Any]) -> tuple[list[Problem], Any]:
    try:
        found = infer_types(container, types)
    except AmandaError as exc:
        return [Problem(exc.path, exc.expected or "", exc.found or str(exc))], None
    return found.problems, found


def link_problem(a: Any, b: Any, pairs: Sequence[tuple[str, str]]) -> str | None:
    """Why ``b`` can never take ``a``'s outputs wired as ``pairs`` (output of a, input of b),
    or None when it can, or when that is not certain."""
    declared = _declared(a)
    if declared is None or not pairs:
        return None
    failures = []
    for probe in _probes(declared):
        problems, types = _problems(a, probe)
        if problems:
            continue  # a cannot take inputs of this rank: no evidence either way
        given = {into: types.output((), out) for out, into in pairs}
        given = {k: v for k, v in given.items() if v is not None}
        downstream, _ = _problems(b, given)
        if not downstream:
            return None
        failures.append((given, downstream[0]))
    if not failures or not _fits_alone(b):
        return None
    # show a batch of vectors where the probes allow it: the shape users picture
    given, problem = next((f for f in failures if _rank(f[0]) == 2), failures[0])
    outs = {into: out for out, into in pairs}
    gives = ", ".join(f"{outs[name]}: {t!r}" for name, t in given.items())
    where = (b.name, *problem.path) if isinstance(problem.path, tuple) else (b.name,)
    every = " (at any input rank)" if len(failures) > 1 else ""
    return (f"{_label(a)} gives {gives}{every}, which {_label(b)} cannot take: "
            f"at {format_path(where)}: expected {problem.expected}, found {problem.found}")


def _rank(types: dict[str, Any]) -> int | None:
    first = next(iter(types.values()), None)
    return first.rank if type(first) is TensorType else None


def _label(c: Any) -> str:
    if c.type == "Chain" and c.children:
        inner = ", ".join(f"{k.name} ({k.type})" for k in c.children[:6])
        return f"{c.name!r} (a chain of {inner}{', ...' if len(c.children) > 6 else ''})"
    return f"{c.name!r} ({c.type})"


def _fits_alone(b: Any) -> bool:
    """Whether ``b`` types cleanly on some probe of its own declared inputs (else the fault is
    not the link's)."""
    declared = _declared(b)
    if declared is None:
        return False
    return any(not _problems(b, probe)[0] for probe in _probes(declared))
