"""Whether containers chained one into the next can ever fit together, from their types.

``chain(*kids)`` asks this when the first kid's inputs declare their types (as every layer's
do: a dtype, often of unknown rank). The chain is typed kid by kid, each on what the one before
gives, at each input rank from 1 to :data:`MAX_RANK` (unknown dims). When no rank lets the whole
chain type cleanly, although the first kid does at some rank and the kid that fails types
cleanly on its own, the chain can never run: ``Dense(4, 8) >> Dense(4, 3)`` is refused when it
is composed, naming both layers, instead of failing at run time inside a fused kernel. Widths
travel through layers that keep them (``Dense(4, 8) >> relu() >> Dense(4, 3)`` is refused
too). Containers without declared input types, and chains where the answer is not certain, are
accepted.

>>> from amanda import layers
>>> kids = [layers.Dense(4, 8, name="a"), layers.Dense(4, 3, name="b")]
>>> print(chain_problem(kids, [[("y", "x")]])[1])
'a' (Dense) gives y: float32[?,8] (at any input rank), which 'b' (Dense) cannot take: at b/matmul: \
expected MatMul: the inner dims of a matrix product equal to 8, found 4
>>> chain_problem([layers.Dense(4, 8), layers.Dense(8, 3)], [[("y", "x")]]) is None
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amanda.errors import AmandaError, Problem, format_path
from amanda.types.tensor_type import TensorType, TypeMismatch, from_attrs
from amanda.types.typemap import infer_types

__all__ = ["MAX_RANK", "chain_problem"]

MAX_RANK = 6  # input ranks tried when a container's inputs declare only a dtype

Pairs = Sequence[tuple[str, str]]  # (output of one kid, input of the next)


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


def _typed(container: Any, types: dict[str, Any]) -> tuple[list[Problem], Any]:
    try:
        found = infer_types(container, types)
    except AmandaError as exc:
        return [Problem(exc.path, exc.expected or "", exc.found or str(exc))], None
    return found.problems, found


def _walk(kids: Sequence[Any], pairs: Sequence[Pairs], probe: dict[str, Any]) -> tuple[int, Any, Problem] | None:
    """Type the chain kid by kid from ``probe``: None if it types cleanly, else ``(index of the
    first kid with a problem, what the kid before gave it, the problem)``."""
    given: dict[str, Any] = probe
    for k, kid in enumerate(kids):
        problems, types = _typed(kid, given)
        if problems:
            return k, given, problems[0]
        if k + 1 < len(kids):
            given = {into: t for out, into in pairs[k] if (t := types.output((), out)) is not None}
    return None


def chain_problem(kids: Sequence[Any], pairs: Sequence[Pairs]) -> tuple[int, str] | None:
    """``(index of the kid that cannot take what the one before gives, why)`` when the chain
    ``kids`` (wired as ``pairs[k]`` from kid k to kid k + 1) can never type-check; None when it
    can, or when that is not certain."""
    declared = _declared(kids[0]) if kids else None
    if declared is None or len(kids) < 2:
        return None
    failures = []
    for probe in _probes(declared):
        failed = _walk(kids, pairs, probe)
        if failed is None:
            return None  # this input rank runs the whole chain
        if failed[0] > 0:
            failures.append(failed)  # at k = 0 the first kid refuses this rank: no evidence
    if not failures:
        return None
    furthest = max(f[0] for f in failures)  # where a rank the early kids take meets a kid that cannot
    at_rank = [f for f in failures if f[0] == furthest]
    k, given, problem = next((f for f in at_rank if _rank(f[1]) == 2), at_rank[0])
    if not _fits_alone(kids[k]):
        return None  # the kid is wrong on its own: not the link's fault
    outs = {into: out for out, into in pairs[k - 1]}
    gives = ", ".join(f"{outs.get(name, name)}: {t!r}" for name, t in given.items())
    where = (kids[k].name, *problem.path) if isinstance(problem.path, tuple) else (kids[k].name,)
    every = " (at any input rank)" if len(at_rank) > 1 else ""
    earlier = ", ".join(_label(kid) for kid in kids[max(0, k - 4):k - 1])
    after = f"after {earlier}, " if earlier else ""
    return k, (f"{after}{_label(kids[k - 1])} gives {gives}{every}, which {_label(kids[k])} cannot take: "
               f"at {format_path(where)}: expected {problem.expected}, found {problem.found}")


def _rank(types: dict[str, Any]) -> int | None:
    first = next(iter(types.values()), None)
    return first.rank if type(first) is TensorType else None


def _label(c: Any) -> str:
    if c.type == "Chain" and c.children:
        inner = ", ".join(f"{k.name} ({k.type})" for k in c.children[:6])
        return f"{c.name!r} (a chain of {inner}{', ...' if len(c.children) > 6 else ''})"
    return f"{c.name!r} ({c.type})"


def _fits_alone(kid: Any) -> bool:
    """Whether ``kid`` types cleanly on some probe of its own declared inputs."""
    declared = _declared(kid)
    if declared is None:
        return False
    return any(not _typed(kid, probe)[0] for probe in _probes(declared))
