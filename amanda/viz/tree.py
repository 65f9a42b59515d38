"""A readable text tree of a container, folded for long models (the terminal's and
IPython's ``_repr_pretty_``), and the notebook's SVG when it is small enough to draw.

>>> import amanda
>>> net = amanda.chain(amanda.op("Relu", "relu", ["x"], ["y"]), inputs=["x"], outputs=["y"], name="net")
>>> print(tree_text(net))
net: Chain (x) -> (y)
└─ relu: Relu (x) -> (y)
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from amanda.containers.arguments import expect_container, expect_int
from amanda.viz.dot import type_label

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["notebook_svg", "tree_text"]

_SVG_LIMIT = 400  # leaf ops beyond which a notebook shows the text tree instead


def _ports(ports: Any) -> str:
    parts = []
    for port in ports:
        kind = type_label(port.attrs)
        parts.append(f"{port.name}: {kind}" if kind else port.name)
    return ", ".join(parts)


def _line(node: Container) -> str:
    head = f"{node.name}: {node.type}" if node.type else str(node.name)
    return f"{head} ({_ports(node.inputs)}) -> ({_ports(node.outputs)})"


def tree_text(model: Container, max_lines: int = 60, max_children: int = 12) -> str:
    """One line per node (name, type, typed ports), children indented; long runs folded.

    A container with more than ``max_children`` children shows the first ones and a line
    counting the rest by type; the whole text stops at ``max_lines``.
    """
    expect_container(model, "model")
    max_lines, max_children = expect_int(max_lines, "max_lines", 1), expect_int(max_children, "max_children", 0)
    lines = [_line(model)]
    stack: list[tuple[Container, str, int, bool]] = []

    def push(node: Container, prefix: str) -> None:
        kids = list(node.children)
        shown = kids[:max_children]
        rest = kids[max_children:]
        items: list[tuple[Any, bool]] = [(c, False) for c in shown]
        if rest:
            counts = Counter(c.type or "?" for c in rest)
            summary = ", ".join(f"{t}×{n}" for t, n in counts.most_common(4))
            items.append((f"… {len(rest)} more ({summary})", True))
        for i in reversed(range(len(items))):
            stack.append((items[i][0], prefix, i == len(items) - 1, items[i][1]))  # type: ignore[arg-type]

    push(model, "")
    while stack and len(lines) < max_lines:
        node, prefix, last, folded = stack.pop()
        branch = "└─ " if last else "├─ "
        lines.append(prefix + branch + (node if folded else _line(node)))  # type: ignore[operator]
        if not folded and node.children:
            push(node, prefix + ("   " if last else "│  "))
    if stack:
        lines.append(f"… (output cut at {max_lines} lines)")
    return "\n".join(lines)


def notebook_svg(model: Container, highlight: Any = None) -> str | None:
    """SVG for a notebook, or None when the model is too large or ``dot`` is missing."""
    from amanda.errors import RenderError
    from amanda.viz.render import to_svg

    expect_container(model, "model")
    if sum(1 for _ in model) > _SVG_LIMIT:
        return None
    try:
        return to_svg(model, highlight=highlight)
    except RenderError:
        return None
