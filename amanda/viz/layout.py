"""Which containers a drawing opens and which it shows as one box.

A drawing of a large model stays readable by opening containers breadth first, as long as
the number of boxes on the page stays within a budget; a container left closed is drawn as
one box with its op counts. The root is always open.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

from amanda.containers.records import Path

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["Layout", "plan_layout"]


class Layout:
    """The open containers of one drawing and, for every node, the box that shows it."""

    __slots__ = ("nodes", "open")

    def __init__(self, nodes: dict[Path, Container], open_: frozenset[Path]) -> None:
        self.nodes = nodes  # every node of the tree, by path
        self.open = open_

    def shown(self, path: Path) -> Path:
        """The path of the box that shows the node at ``path``: itself, or a closed ancestor."""
        for end in range(len(path) + 1):
            prefix = path[:end]
            if prefix not in self.open:
                return prefix
        return path

    def boxes(self) -> Iterator[Path]:
        """Paths drawn as boxes: leaf ops and closed containers under open ones."""
        for path in self.nodes:
            if path not in self.open and (not path or path[:-1] in self.open):
                yield path


def plan_layout(model: Container, depth: int | None, max_nodes: int) -> Layout:
    """Open containers breadth first while depth and the box budget allow."""
    nodes: dict[Path, Container] = {}
    stack: list[tuple[Path, Container]] = [((), model)]
    while stack:
        path, node = stack.pop()
        nodes[path] = node
        stack.extend((path + (c.name,), c) for c in reversed(node.children))
    opened: set[Path] = set()
    visible = 1
    queue: deque[Path] = deque([()])
    while queue:
        path = queue.popleft()
        node = nodes[path]
        if not node.children:
            continue
        fits = visible - 1 + len(node.children) <= max_nodes
        within = depth is None or len(path) < depth
        if path and not (fits and within):
            continue
        opened.add(path)
        visible += len(node.children) - (1 if path else 0)
        queue.extend(path + (c.name,) for c in node.children)
    return Layout(nodes, frozenset(opened))


def op_counts(container: Container, most: int = 3) -> str:
    """``"12 ops: MatMul×4, Add×4, Relu×2, …"`` for a closed box's label."""
    counts = Counter(op.type or "?" for op in container)
    total = sum(counts.values())
    shown = ", ".join(f"{t}×{n}" for t, n in counts.most_common(most))
    more = ", …" if len(counts) > most else ""
    return f"{total} op{'s' if total != 1 else ''}: {shown}{more}"
