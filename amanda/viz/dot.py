"""DOT text for a container: nested clusters, typed edges, control and removed edges.

>>> import amanda
>>> relu = amanda.op("Relu", "relu", ["x"], ["y"])
>>> text = to_dot(amanda.chain(relu, inputs=["x"], outputs=["y"], name="net"))
>>> text.startswith("digraph") and "relu" in text
True
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from amanda.containers.arguments import brief
from amanda.containers.edge import CONTROL, SELF
from amanda.containers.flatten import flatten
from amanda.errors import ArgumentError
from amanda.viz.layout import DrawPath, Layout, Path, op_counts, plan_layout
from amanda.viz.scopes import ScopeKey

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["to_dot"]

_HIGHLIGHT = "#f5b041"
_REMOVED = "#c0392b"
_MAX_LABEL = 40


def _quote(text: str) -> str:
    """A DOT double-quoted string: backslashes, quotes and line breaks escaped."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r", "").replace("\n", "\\n") + '"'


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _short(text: str) -> str:
    return text if len(text) <= _MAX_LABEL else text[: _MAX_LABEL - 1] + "…"


def type_label(attrs: Any) -> str:
    """``float32[batch,784]`` from a port's ``dtype`` and ``shape`` attributes ('' if neither)."""
    dtype = attrs.get("dtype") if attrs else None
    shape = attrs.get("shape") if attrs else None
    text = str(dtype) if dtype is not None else ""
    if isinstance(shape, (tuple, list)):
        dims = ",".join("?" if d is None else str(d) for d in shape)
        text += f"[{dims}]"
    return text


class _Drawing:
    """Assigns DOT ids and writes statements for one container."""

    def __init__(self, model: Container, layout: Layout, highlight: frozenset[Path]) -> None:
        self.model = model
        self.layout = layout
        self.highlight = frozenset(map(layout.display, highlight))
        self.ids: dict[DrawPath, str] = {}
        self.lines: list[str] = []

    def node_id(self, path: DrawPath) -> str:
        if path not in self.ids:
            self.ids[path] = f"n{len(self.ids)}"
        return self.ids[path]

    def clusters(self) -> None:
        """Open containers as nested clusters, closed ones and leaves as boxes (iteratively)."""
        layout = self.layout
        stack: list[tuple[DrawPath, bool]] = [((), False)]
        while stack:
            path, closing = stack.pop()
            node = layout.nodes[path]
            indent = "  " * max(len(path), 1)
            if closing:
                self.lines.append(indent + "}")
                continue
            if path in layout.open:
                if path:
                    self.lines.append(f"{indent}subgraph cluster_{self.node_id(path)} {{")
                    label = f"{node.name}: {node.type}" if node.type else str(node.name)
                    self.lines.append(f"{indent}  label={_quote(_short(label))};")
                    if path in self.highlight:
                        self.lines.append(f'{indent}  color="{_HIGHLIGHT}"; penwidth=3;')
                    stack.append((path, True))
                stack.extend((child, False) for child in reversed(layout.kids.get(path, ())))
            else:
                self.box(path, node, indent)

    def box(self, path: DrawPath, node: Any, indent: str) -> None:
        name = str(node.name)
        extra = ""
        if len(path) > 1 and isinstance(path[-2], ScopeKey):
            # inside a scope's cluster, the name without the scope (the whole name as a tooltip)
            extra = f", tooltip={_quote(name)}"
            name = name.rsplit("/", 1)[-1] if "/" in name else name.rsplit(".", 1)[-1]
        label = _short(name) + "\n" + _short(str(node.type or ""))
        if node.children:
            label += "\n" + _short(op_counts(node))
            style = 'shape=box3d, style="filled"'
            fill = "#eaecee"
        else:
            style = 'shape=box, style="rounded,filled"'
            fill = "#ffffff"
        if path in self.highlight:
            fill = _HIGHLIGHT
        self.lines.append(f'{indent}{self.node_id(path)} [label={_quote(label)}, {style}, fillcolor="{fill}"{extra}];')

    def boundary(self) -> None:
        """The root's own input and output ports as ellipses."""
        for side, ports in (("in", self.model.inputs), ("out", self.model.outputs)):
            for port in ports:
                name = f"{side}:{port.name}"
                kind = type_label(port.attrs)
                label = port.name + (f"\n{kind}" if kind else "")
                self.lines.append(f'  {self.node_id(("", name))} [label={_quote(label)}, shape=ellipse];')

    def end_id(self, end: Any, side: str) -> str | None:
        """The DOT node of one effective endpoint (None for the root's control port)."""
        op, port = end[0], end[1]
        if op is SELF:
            if port == CONTROL:
                return None
            key = ("", f"{'in' if side == 'src' else 'out'}:{port}")
            return self.ids.get(key)
        return self.node_id(self.layout.shown(op))

    def dataflow(self) -> None:
        """Effective edges, merged where closed boxes hide their ends."""
        flat = flatten(self.model)
        merged: dict[tuple[str, str, bool], list[str]] = {}
        for edge in flat.edges:
            src, dst = self.end_id(edge[0], "src"), self.end_id(edge[1], "dst")
            if src is None or dst is None or src == dst:
                continue
            control = edge[0][1] == CONTROL or edge[1][1] == CONTROL
            label = "" if control else self.edge_type(flat, edge)
            merged.setdefault((src, dst, control), []).append(label)
        for (src, dst, control), labels in merged.items():
            attrs = ['style="dotted"', 'arrowhead="odot"'] if control else []
            kinds = sorted({x for x in labels if x})
            if kinds:
                attrs.append(f"label={_quote(_short(' '.join(kinds)))}")
            if len(labels) > 1:
                attrs.append(f"penwidth={min(1 + len(labels) / 4, 4):.2g}")
            self.lines.append(f"  {src} -> {dst}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";")

    def edge_type(self, flat: Any, edge: Any) -> str:
        op, port = edge[0][0], edge[0][1]
        if op is SELF:
            ports = self.model.inputs
        else:
            ports = flat.ops[op].outputs
        for candidate in ports:
            if candidate.name == port:
                return type_label(candidate.attrs)
        return ""

    def removed(self) -> None:
        """Tombstoned edges, red, dashed, their label struck through."""
        for path, node in self.layout.nodes.items():
            for tomb in node.tombstones:
                owner = self.layout.real[path]
                src = self.tomb_end(owner, tomb[0], "src")
                dst = self.tomb_end(owner, tomb[1], "dst")
                if src is None or dst is None:
                    continue
                (src_id, src_extra), (dst_id, dst_extra) = src, dst
                label = f"<<S>{_html(str(tomb[0][1]))} → {_html(str(tomb[1][1]))}</S>>"
                attrs = [f'color="{_REMOVED}"', 'style="dashed"', 'arrowhead="tee"', f"label={label}",
                         f'fontcolor="{_REMOVED}"', *src_extra, *dst_extra]
                self.lines.append(f"  {src_id} -> {dst_id} [{', '.join(attrs)}];")

    def tomb_end(self, owner: Path, end: Any, side: str) -> tuple[str, list[str]] | None:
        """The DOT node (and clipping) of a tombstone's end; ``owner`` is a model path."""
        target = owner if end[0] is SELF else owner + tuple(end[0])
        if not target:
            key = ("", f"{'in' if side == 'src' else 'out'}:{end[1]}")
            return (self.ids[key], []) if key in self.ids else None
        target = self.layout.display(target)
        if target in self.layout.open:
            # an open container: point at its cluster through its first box
            inner = next(p for p in self.layout.boxes() if p[: len(target)] == target)
            clip = "ltail" if side == "src" else "lhead"
            return self.node_id(inner), [f"{clip}=cluster_{self.node_id(target)}"]
        return self.node_id(self.layout.box_of(target)), []


def _highlighted(highlight: Any) -> frozenset[Path]:
    if highlight is None:
        return frozenset()
    paths = getattr(highlight, "paths", None)
    if paths is None:
        if isinstance(highlight, (str, bytes, np.ndarray)) or not isinstance(highlight, Iterable):
            raise ArgumentError.at("highlight", "a Selection or paths (tuples of names)", brief(highlight))
        paths = highlight
    result = set()
    for path in paths:
        if isinstance(path, str):
            path = tuple(p for p in path.split("/") if p)
        if not isinstance(path, tuple) or not all(isinstance(p, str) for p in path):
            raise ArgumentError.at("highlight", "paths as tuples of names or 'a/b' strings", brief(path))
        result.add(path)
    return frozenset(result)


def to_dot(model: Container, depth: int | None = None, highlight: Any = None, max_nodes: int = 300,
           group: bool = True) -> str:
    """DOT text drawing ``model``: containers as nested clusters, ops as boxes.

    Containers deeper than ``depth``, or past the budget of ``max_nodes`` boxes, are drawn
    as one box with their op counts. A level with more than ``max_nodes`` children is drawn
    by name scope when ``group`` (``/blocks/blocks.3/attn/MatMul`` and ``blocks.3.attn.weight``
    fall in the groups ``blocks`` / ``blocks.3`` / ``attn``, which open and close like
    containers and count as levels for ``depth``); a top level still past the budget is a
    RenderError that says how to draw it. Edges carry the source port's type when the port
    declares one; control edges are dotted; edges deleted by a tombstone are red, dashed and
    struck through. ``highlight`` (a Selection or paths) is coloured.
    """
    from amanda.containers.container import Container

    if not isinstance(model, Container):
        raise ArgumentError.at("model", "a Container", type(model).__name__)
    if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool) or depth < 0):
        raise ArgumentError.at("depth", "None or a non-negative integer", brief(depth))
    if not isinstance(max_nodes, int) or isinstance(max_nodes, bool) or max_nodes < 1:
        raise ArgumentError.at("max_nodes", "a positive integer", brief(max_nodes))
    if not isinstance(group, bool):
        raise ArgumentError.at("group", "True or False", brief(group))
    drawing = _Drawing(model, plan_layout(model, depth, max_nodes, group), _highlighted(highlight))
    title = f"{model.name}: {model.type}" if model.type else str(model.name)
    drawing.lines += [
        "digraph amanda {",
        "  compound=true; rankdir=TB;",
        f"  label={_quote(_short(title))}; labelloc=t;",
        '  node [fontname="Helvetica", fontsize=11]; edge [fontname="Helvetica", fontsize=9];',
    ]
    drawing.boundary()
    drawing.clusters()
    drawing.dataflow()
    drawing.removed()
    drawing.lines.append("}")
    return "\n".join(drawing.lines) + "\n"
