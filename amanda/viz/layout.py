"""Which containers a drawing opens and which it shows as one box.

A drawing of a large model stays readable, and quick to lay out, by opening containers breadth
first as long as the number of boxes on the page stays within a budget; a container left closed
is drawn as one box with its op counts. The root is always open. A level with more children
than the budget (a flat import of thousands of sibling ops) is drawn by name scope: the
children that share a scope (:mod:`amanda.viz.scopes`) are gathered into groups that open and
close like containers. A root level that is still past the budget is refused with an error that
says how to draw it, rather than handed to Graphviz, whose layout time grows much faster than
the number of boxes.

Paths in a layout are *drawing paths*: a node's path with a :class:`ScopeKey` before each name
that a scope group holds. :meth:`Layout.display` maps a model path to its drawing path.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from amanda.containers.records import Path
from amanda.errors import RenderError
from amanda.viz.scopes import Scope, ScopeKey, group_by_scope

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["DrawPath", "Layout", "plan_layout"]

DrawPath = tuple[Any, ...]  # a drawing path: names, and a ScopeKey before each name a scope holds


class Layout:
    """The open nodes of one drawing and, for every node, the box that shows it.

    ``nodes``: drawing path -> container or :class:`Scope`, for every node of the tree, in
    document order; ``kids``: drawing path -> its children's; ``open``: the drawing paths of
    open nodes; ``real``: drawing path -> model path of each container.
    """

    __slots__ = ("_memo", "inserts", "kids", "nodes", "open", "real")

    def __init__(self, nodes: dict[DrawPath, Any], kids: dict[DrawPath, list[DrawPath]], open_: frozenset[DrawPath],
                 real: dict[DrawPath, Path], inserts: dict[Path, tuple]) -> None:
        self.nodes = nodes
        self.kids = kids  # drawing path -> its children's drawing paths, in order
        self.open = open_
        self.real = real
        self.inserts = inserts  # model path -> the scope keys between its parent and it
        self._memo: dict[Path, DrawPath] = {}

    def display(self, path: Path) -> DrawPath:
        """The drawing path of the node at model path ``path``."""
        if not self.inserts:
            return path
        found = self._memo.get(path)
        if found is None:
            parts: list[Any] = []
            for k in range(1, len(path) + 1):
                parts.extend(self.inserts.get(path[:k], ()))
                parts.append(path[k - 1])
            found = self._memo[path] = tuple(parts)
        return found

    def shown(self, path: Path) -> DrawPath:
        """The drawing path of the box that shows the node at model path ``path``: its own,
        or a closed ancestor's (a container or a scope)."""
        return self.box_of(self.display(path))

    def box_of(self, path: DrawPath) -> DrawPath:
        """The drawing path of the box that shows the node at drawing path ``path``."""
        for end in range(len(path) + 1):
            prefix = path[:end]
            if prefix not in self.open:
                return prefix
        return path

    def boxes(self) -> Iterator[DrawPath]:
        """Drawing paths drawn as boxes: leaf ops and closed nodes under open ones."""
        for path in self.nodes:
            if path not in self.open and (not path or path[:-1] in self.open):
                yield path


def _children(node: Any, max_nodes: int, group: bool) -> list:
    kids = list(node.children)
    if group and len(kids) > max_nodes and not isinstance(node, Scope):
        return group_by_scope(kids) or kids
    return kids


def _tree(model: Container, max_nodes: int, group: bool) -> tuple[dict, dict, dict, dict]:
    """Every node by drawing path, the drawing paths of each node's children, the model path
    of each container, and the scope keys inserted before each grouped child."""
    nodes: dict[DrawPath, Any] = {}
    kids: dict[DrawPath, list[DrawPath]] = {}
    real: dict[DrawPath, Path] = {}
    inserts: dict[Path, tuple] = {}
    # (drawing path, model path of the node or of a scope's real parent, node, scope keys above it)
    stack: list[tuple[DrawPath, Path, Any, tuple]] = [((), (), model, ())]
    while stack:
        path, rpath, node, keys = stack.pop()
        nodes[path] = node
        scope = isinstance(node, Scope)
        if not scope:
            real[path] = rpath
            if keys:
                inserts[rpath] = keys
        items = _children(node, max_nodes, group)
        if not items:
            continue
        here: list[tuple[DrawPath, Path, Any, tuple]] = []
        for item in items:
            if isinstance(item, Scope):
                key = ScopeKey(item.name)
                here.append((path + (key,), rpath, item, (keys if scope else ()) + (key,)))
            else:
                here.append((path + (item.name,), rpath + (item.name,), item, keys if scope else ()))
        kids[path] = [entry[0] for entry in here]
        stack.extend(reversed(here))
    return nodes, kids, real, inserts


def plan_layout(model: Container, depth: int | None, max_nodes: int, group: bool = True) -> Layout:
    """Open nodes breadth first while depth and the box budget allow (a scope group counts as
    a level). A root with more children than ``max_nodes`` (after grouping, when ``group``) is
    a RenderError."""
    nodes, kids, real, inserts = _tree(model, max_nodes, group)
    top = len(kids.get((), ()))
    if top > max_nodes:
        raise _too_many(model, top, max_nodes, group)
    opened: set[DrawPath] = set()
    visible = 1
    queue: deque[DrawPath] = deque([()])
    while queue:
        path = queue.popleft()
        children = kids.get(path)
        if not children:
            continue
        fits = visible - 1 + len(children) <= max_nodes
        within = depth is None or len(path) < depth
        if path and not (fits and within):
            continue
        opened.add(path)
        visible += len(children) - (1 if path else 0)
        queue.extend(children)
    return Layout(nodes, kids, frozenset(opened), real, inserts)


def _too_many(model: Container, count: int, max_nodes: int, group: bool) -> RenderError:
    name = model.name or "the model"
    grouped = group and count < len(model.children)
    kind = "boxes after grouping its ops by name scope" if grouped else "children"
    fixes = [f"raise the budget (max_nodes={count}; Graphviz takes minutes on thousands of boxes)"]
    if not group:
        fixes.append("group them by name scope (group=True)")
    elif not grouped:
        kind += " (no two of them share a name scope to group by)"
    inner = next((c.name for c in model.children if c.children), None)
    if inner is not None:
        quoted = str(inner).replace("\\", "\\\\").replace('"', '\\"')
        selector = f'$."{quoted}"'
        fixes.append(f"draw one of its containers, as a selector finds it: "
                     f"render(model.select({selector!r}).containers[0], ...)")
    return RenderError(f"{name!r} has {count} {kind}, past the drawing budget of max_nodes={max_nodes}: "
                       + ", or ".join(fixes),
                       path=(), expected=f"at most max_nodes={max_nodes} boxes on the top level",
                       found=f"{count} {kind}")


def op_counts(container: Any, most: int = 3) -> str:
    """``"12 ops: MatMul×4, Add×4, Relu×2, …"`` for a closed box's label."""
    counts = Counter(op.type or "?" for op in container)
    total = sum(counts.values())
    shown = ", ".join(f"{t}×{n}" for t, n in counts.most_common(most))
    more = ", …" if len(counts) > most else ""
    return f"{total} op{'s' if total != 1 else ''}: {shown}{more}"
