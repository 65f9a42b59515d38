"""Cycles of the effective view, reported as problems rather than raised.

A container is built without looking for cycles: a cycle may close only across nesting levels,
through boundary ports, or once a wrapper's tombstones and new edges are applied, so finding it
costs the whole effective view, which a constructor must not pay on every edit (see
``docs/design.md``). ``validate`` and ``infer_types`` report cycles instead, with one problem
per op on a cycle: its path and a cycle through it. The graphs ops hold in attributes (ONNX
``If``/``Loop``/``Scan`` bodies) are searched too, with paths ``(*op_path, attribute, ...)``.

>>> from amanda.containers.container import Container, op
>>> g = Container(None, "g", inputs=["x"], outputs=["y"], children=[
...     op("Add", "a", ["A", "B"], ["C"]), op("Relu", "r", ["X"], ["Y"])],
...     edges=[("g:x", "a:A"), ("r:Y", "a:B"), ("a:C", "r:X"), ("r:Y", "g:y")])
>>> for problem in cycle_problems(g):
...     print(problem)
at a: expected an acyclic dataflow, found the cycle a -> r -> a
at r: expected an acyclic dataflow, found the cycle r -> a -> r
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from amanda.containers.edge import SELF
from amanda.containers.flatten import effective_edges, flatten
from amanda.containers.order import cyclic_components
from amanda.containers.records import Path
from amanda.errors import CycleError, Problem, format_path

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["cycle_problems", "held_graphs"]

SHOWN = 12  # ops of a long cycle shown in a message


def held_graphs(op: Container) -> list[tuple[str, Container]]:
    """``(label, graph)`` for every graph ``op`` holds in its attributes, in sorted attribute
    order: a graph-valued attribute is labelled by its name, the i-th graph of a tuple of graphs
    by ``name[i]``.

    >>> from amanda.containers.container import Container, op
    >>> body = Container(None, "body")
    >>> [label for label, _ in held_graphs(op("If", "if", attrs={"then_branch": body, "b": (body, body)}))]
    ['b[0]', 'b[1]', 'then_branch']
    """
    found: list[tuple[str, Container]] = []
    for key in sorted(op.attrs):
        value = op.attrs[key]
        if _is_container(value):
            found.append((key, value))
        elif isinstance(value, tuple):
            found += [(f"{key}[{i}]", v) for i, v in enumerate(value) if _is_container(v)]
    return found


def _is_container(value: Any) -> bool:
    return getattr(value, "_amanda_frozen", False) is True and hasattr(value, "children")


def cycle_problems(container: Container) -> list[Problem]:
    """One problem per op on a cycle of the effective view of ``container`` (or of a graph one
    of its ops holds), in document order; empty when the dataflow is acyclic."""
    problems: list[Problem] = []
    stack: list[tuple[Path, Container]] = [((), container)]
    seen: set[tuple[Path, int]] = set()
    while stack:
        prefix, graph = stack.pop()
        if (prefix, id(graph)) in seen:
            continue
        seen.add((prefix, id(graph)))
        found, ops = _cycles_of(graph, prefix)
        problems += found
        for path, op in reversed(list(ops.items())):
            for label, body in reversed(held_graphs(op)):
                stack.append(((*prefix, *path, label), body))
    return problems


def _cycles_of(graph: Container, prefix: Path) -> tuple[list[Problem], dict[Path, Container]]:
    try:
        return [], dict(flatten(graph).ops)
    except CycleError:
        pass
    try:
        ops, edges = effective_edges(graph)
    except CycleError as exc:  # boundary ports wired in a loop, with no op on it
        paths = list(dict.fromkeys((*prefix, *p) for p in exc.cycle))
        shown = ", ".join(format_path(p) for p in paths)
        return [Problem(p, "an acyclic dataflow", f"a loop through the boundary ports of {shown}, with no op on it")
                for p in paths], {}
    successors: dict[Path, list[Path]] = {path: [] for path in ops}
    for edge in edges:
        src, dst = edge[0][0], edge[1][0]
        if src is not SELF and dst is not SELF:
            successors[src].append(dst)
    problems = []
    for component in cyclic_components(list(ops), ((a, b) for a, nexts in successors.items() for b in nexts)):
        members = set(component)
        known: dict[Path, list[Path]] = {}
        for path in component:
            cycle = known.get(path) or _cycle_through(path, successors, members)
            for i, on in enumerate(cycle):
                known.setdefault(on, cycle[i:] + cycle[:i])
            full = [(*prefix, *p) for p in known[path]]
            problems.append(Problem(full[0], "an acyclic dataflow", f"the cycle {_shown(full, 0)}"))
    return problems, ops


def _cycle_through(start: Path, successors: dict[Path, list[Path]], members: set[Path]) -> list[Path]:
    """A shortest cycle from ``start`` back to it, within its strongly connected component."""
    before: dict[Path, Path] = {}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        for nxt in successors[here]:
            if nxt == start:
                cycle = [here]
                while cycle[-1] != start:
                    cycle.append(before[cycle[-1]])
                return cycle[::-1]
            if nxt in members and nxt not in before:
                before[nxt] = here
                queue.append(nxt)
    return [start]  # unreachable: every member of a cyclic component lies on a cycle


def _shown(cycle: Sequence[Path], start: int) -> str:
    order = [*cycle[start:], *cycle[:start]]
    names = [format_path(p) for p in _ends(order)]
    return " -> ".join(names)


def _ends(order: Sequence[Path]) -> Iterator[Path | str]:
    if len(order) <= SHOWN:
        yield from order
    else:
        yield from order[: SHOWN - 2]
        yield f"... ({len(order) - SHOWN + 1} more ops)"
        yield order[-1]
    yield order[0]
