"""The one topological sort: Kahn's algorithm, ties broken by the order the nodes are given in
(document order for ops), so every caller gets the same deterministic order.

>>> topological(["a", "b", "c"], [("c", "a")])
['b', 'c', 'a']
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

from amanda.errors import CycleError

__all__ = ["cyclic_components", "find_cycle", "ordered", "topological"]

K = TypeVar("K", bound=Hashable)


def topological(nodes: Sequence[K], edges: Iterable[tuple[K, K]], *, cycles: str = "raise") -> list[K]:
    """``nodes`` ordered so that every edge ``(a, b)`` puts ``a`` before ``b``; among the nodes
    ready at each step, the earliest in ``nodes`` comes first.

    Edges whose ends are not both among ``nodes`` are ignored. A cycle raises ``CycleError``
    naming the nodes on it, in edge order; with ``cycles="append"`` the nodes a cycle holds up
    follow the others in their given order instead (type inference keeps going that way).

    >>> topological(["a", "b", "c"], [("b", "c"), ("c", "b")], cycles="append")
    ['a', 'b', 'c']
    """
    rank = {node: position for position, node in enumerate(nodes)}
    successors: list[list[int]] = [[] for _ in nodes]
    indegree = [0] * len(nodes)
    for a, b in edges:
        i, j = rank.get(a), rank.get(b)
        if i is None or j is None:
            continue
        successors[i].append(j)
        indegree[j] += 1
    ready = [i for i, degree in enumerate(indegree) if degree == 0]  # already a heap: sorted
    order: list[K] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(nodes[i])
        for j in successors[i]:
            indegree[j] -= 1
            if indegree[j] == 0:
                heapq.heappush(ready, j)
    if len(order) != len(nodes):
        left = {i for i, degree in enumerate(indegree) if degree > 0}
        if cycles == "append":
            return order + [nodes[i] for i in sorted(left)]
        raise CycleError([nodes[i] for i in find_cycle(successors, left)])  # type: ignore[misc]
    return order


def ordered(nodes: Sequence[K], edges: Iterable[tuple[K, K]], looped: bool = False) -> tuple[list[K], bool]:
    """:func:`topological` order with ``cycles="append"``, and whether the edges hold a cycle
    (or ``looped`` says a node already feeds itself).

    >>> ordered(["a", "b"], [("b", "a")]), ordered(["a", "b"], [("a", "b"), ("b", "a")])
    ((['b', 'a'], False), (['a', 'b'], True))
    """
    edges = list(edges)
    try:
        return topological(nodes, edges), looped
    except CycleError:
        return topological(nodes, edges, cycles="append"), True


def find_cycle(successors: Sequence[Sequence[int]], remaining: set[int]) -> list[int]:
    """One cycle among the ``remaining`` node numbers Kahn's algorithm left over, in edge order.

    Every leftover node has a leftover predecessor (ops downstream of a cycle are left over
    too, but lead nowhere), so walking predecessors from any of them must close a cycle.
    """
    predecessors: dict[int, list[int]] = {i: [] for i in remaining}
    for i in remaining:
        for j in successors[i]:
            if j in remaining:
                predecessors[j].append(i)
    node = min(remaining)
    trail: list[int] = []
    where: dict[int, int] = {}
    while node not in where:
        where[node] = len(trail)
        trail.append(node)
        node = predecessors[node][0]
    cycle = list(reversed(trail[where[node]:]))
    start = cycle.index(min(cycle))  # begin at the earliest node, as Kahn's order would meet it
    return cycle[start:] + cycle[:start]


def cyclic_components(nodes: Sequence[K], edges: Iterable[tuple[K, K]]) -> list[list[K]]:
    """Every strongly connected component that holds a cycle (two or more nodes, or one node
    with an edge to itself), each in the order of ``nodes``, ordered by their first node.

    Iterative (Tarjan's algorithm with an explicit stack), so a long cycle cannot exhaust
    Python's recursion limit.

    >>> cyclic_components(["a", "b", "c", "d"], [("a", "b"), ("b", "a"), ("c", "d"), ("d", "d")])
    [['a', 'b'], ['d']]
    """
    rank = {node: position for position, node in enumerate(nodes)}
    successors: list[list[int]] = [[] for _ in nodes]
    looped: set[int] = set()
    for a, b in edges:
        i, j = rank.get(a), rank.get(b)
        if i is None or j is None:
            continue
        successors[i].append(j)
        if i == j:
            looped.add(i)
    found = sorted(sorted(c) for c in _components(successors) if len(c) > 1 or c[0] in looped)
    return [[nodes[i] for i in component] for component in found]


def _components(successors: Sequence[Sequence[int]]) -> list[list[int]]:
    """The strongly connected components of the numbered graph (Tarjan's algorithm with an
    explicit stack), each listing its node numbers with its root last."""
    n = len(successors)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    found: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            v, child = work.pop()
            if child == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            if child < len(successors[v]):
                work.append((v, child + 1))
                w = successors[v][child]
                if index[w] < 0:
                    work.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            if work:  # v is finished: its parent learns its low link
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    component.append(w)
                    if w == v:
                        break
                found.append(component)
    return found
