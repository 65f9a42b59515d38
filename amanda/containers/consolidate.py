"""``consolidate``: fold a stack of edit wrappers into one tree with the same effective view.

Each wrapper's new ops join the model's children, its edges are rewritten in the
model's coordinates (through the model's boundary ports where they touch them), and
each tombstone deletes its edge from the container that owns it. Only the containers
on the paths to deleted edges are rebuilt; every other subtree is shared.

>>> from amanda.containers.container import op
>>> from amanda.containers.compose import chain
>>> from amanda.containers.edit import edit
>>> from amanda.containers.flatten import flatten
>>> body = chain(*(op("Dense", f"L{i}", ["x"], ["y"]) for i in (1, 2, 3)), name="body")
>>> wrapped = edit(body).remove_edge("body/L2:y", "body/L3:x").connect("body/L1:y", "body/L3:x").build()
>>> flat = consolidate(wrapped)
>>> sorted(f"{e.src}->{e.dst}" for e in flatten(flat).edges)
['L1:y->L2:x', 'L1:y->L3:x', 'L3:y->SELF:y', 'SELF:x->L1:x']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from amanda.containers.arguments import expect_container
from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge
from amanda.containers.edit import EDIT_TYPE
from amanda.containers.frames import at, lower, with_child
from amanda.containers.invariants import own_edge_keys
from amanda.containers.values import values_equal

__all__ = ["consolidate"]


def consolidate(container: Container) -> Container:
    """Fold the stack of edit wrappers at the top of ``container`` into its model.

    The effective view is kept: dataflow, and every leaf's effective attributes. An op a
    wrapper added becomes a child of the model, so it would inherit the model's own
    attributes; where the wrapper's value differs it gets the wrapper's value as its own,
    and an attribute the wrapper's level does not have moves down onto the model's children.
    A wrapper around a leaf op is returned as it is (there is no tree to fold into).
    """
    expect_container(container, "container")
    return _consolidate(container, {})[0]


def _identity(path: tuple) -> Any:
    return path


def _consolidate(container: Container, above: Mapping[str, Any]) -> tuple[Container, Callable[[tuple], Any]]:
    """The folded container and how paths relative to ``container`` read in it (SELF or a path);
    ``above`` is what the container's ancestors' attributes make effective."""
    if container.type != EDIT_TYPE or not container.children:
        return container, _identity
    wrapper = container
    inner = container.children[0]
    scope = {**above, **container.attrs}
    folded, inner_map = _consolidate(inner, scope)

    def before_fold(rel: tuple) -> tuple:
        """A path relative to ``container`` after its inner stack was folded."""
        if folded is inner or not rel or rel[0] != inner.name:
            return rel
        rest = inner_map(tuple(rel[1:]))
        return (folded.name,) if rest is SELF else (folded.name, *rest)

    if folded is not inner:
        wrapper = with_child(container, inner.name, folded, moved=inner_map)
    model = wrapper.children[0]
    if model.is_op or [p.name for p in wrapper.inputs] != [p.name for p in model.inputs] or [
        p.name for p in wrapper.outputs
    ] != [p.name for p in model.outputs]:
        return wrapper, before_fold  # not the shape an Edit builds: nothing to fold into
    merged, fold_map = _fold(wrapper, model, scope)
    return merged, lambda rel: fold_map(before_fold(rel))


def _kept_attrs(wrapper: Container, model: Container, scope: Mapping[str, Any]) -> tuple[dict, list, list]:
    """The folded model's own attributes, its children and the added ops, with attributes
    set so that every leaf keeps its effective attributes (``scope``: the wrapper's)."""
    own = {**wrapper.attrs, **model.attrs}
    pinned: dict[str, Any] = {}  # set on added ops: the wrapper's value, which the model's hides
    pushed: dict[str, Any] = {}  # moved onto the model's children: the wrapper's level lacks it
    for key, value in model.attrs.items():
        if key not in scope:
            pushed[key] = value
            del own[key]
        elif not values_equal(scope[key], value):
            pinned[key] = scope[key]
    kids = [_with_missing(kid, pushed) for kid in model.children]
    added = [_with_missing(kid, pinned) for kid in wrapper.children[1:]]
    return own, kids, added


def _with_missing(node: Container, attrs: Mapping[str, Any]) -> Container:
    missing = {k: v for k, v in attrs.items() if k not in node.attrs}
    return node.with_attrs(**missing) if missing else node


def _fold(wrapper: Container, model: Container, scope: Mapping[str, Any]) -> tuple[Container, Callable[[tuple], Any]]:
    m = model.name
    own_attrs, model_kids, new_kids = _kept_attrs(wrapper, model, scope)
    taken = set(model._index)
    rename: dict[str, str] = {}
    added = []
    for child in new_kids:
        name = child.name
        while name in taken:
            name = f"{name}_"
        taken.add(name)
        rename[child.name] = name
        added.append(child if name == child.name else child.with_name(name))

    def path(op: Any) -> Any:
        """A wrapper-relative path in the folded model's coordinates (SELF for the model)."""
        if op is SELF:
            return SELF
        if op[0] == m:
            return tuple(op[1:]) if len(op) > 1 else SELF
        return (rename[op[0]], *op[1:])

    kept, new_edges = _folded_edges(wrapper, model, path)
    own_keys = {e.key for e in kept}
    tombstones = [Edge((path(t.src.op), t.src.port), (path(t.dst.op), t.dst.port)) for t in wrapper.tombstones]
    deleted = {t.key for t in tombstones} & own_keys  # the model's own edges: delete them outright
    buried = [t for t in tombstones if t.key not in own_keys]
    merged = Container(
        model.type, wrapper.name if wrapper.name is not None else model.name, inputs=model.inputs, outputs=model.outputs,
        children=[*model_kids, *added], edges=[e for e in kept if e.key not in deleted] + new_edges,
        tombstones=[*model.tombstones, *buried], attrs=own_attrs, uid=model.uid, controls=model.controls,
    )
    for tomb in buried:
        merged = _bury(merged, tomb)
    return merged, lambda rel: path(rel) if rel else SELF


def _folded_edges(wrapper: Container, model: Container, path: Callable[[Any], Any]) -> tuple[list[Edge], list[Edge]]:
    """The model's edges and the wrapper's, in the folded model's frame: a value the wrapper
    feeds into a model input, or reads from a model output, is spliced past that port."""
    m = (model.name,)
    produced_inside = {e.dst.port: e for e in model.edges if e.dst.op is SELF}
    fed_from: dict[str, Any] = {}  # model input port -> what the wrapper feeds it from
    replaced_outputs: set[str] = set()
    new_edges: list[Edge] = []
    for edge in wrapper.edges:
        src, dst = edge.src, edge.dst
        if dst.op == m and dst.port != -1:
            if src.op is not SELF or src.port != dst.port:
                fed_from[dst.port] = _source(src, path, produced_inside)
        elif not (dst.op is SELF and src.op == m and src.port == dst.port):  # else the output passes through
            if dst.op is SELF:
                replaced_outputs.add(dst.port)
            new_edges.append(Edge(_source(src, path, produced_inside), (path(dst.op), dst.port), attrs=edge.attrs))
    kept = [
        Edge(fed_from[e.src.port], e.dst, attrs=e.attrs) if e.src.op is SELF and e.src.port in fed_from else e
        for e in model.edges if not (e.dst.op is SELF and e.dst.port in replaced_outputs)
    ]
    return kept, new_edges


def _source(src: Any, path: Any, produced_inside: dict[str, Edge]) -> tuple:
    """The folded form of a wrapper edge's source; the model's output resolves to its producer."""
    target = path(src.op)
    if target is SELF and src.op is not SELF:
        inner = produced_inside.get(src.port)
        if inner is not None:
            return (inner.src.op, inner.src.port)
    return (target, src.port)


def _bury(root: Container, tomb: Edge) -> Container:
    """Delete every edge a root-level tombstone names (at any depth below the root) from
    the container that owns it; the tombstones left naming nothing are dropped on the way."""
    src, dst = tomb.src.op, tomb.dst.op
    common = 0
    while common < min(len(src), len(dst)) and src[common] == dst[common]:
        common += 1
    for depth in range(common, 0, -1):
        key = lower(tomb, src[:depth]).key  # type: ignore[union-attr]  # both ends lie below src[:depth]
        root = at(root, src[:depth], partial(_without_edge, key=key), prune=True)
    return root


def _without_edge(owner: Container, key: tuple) -> Container:
    if owner.is_op or key not in own_edge_keys(owner):
        return owner
    return owner.evolve(edges=[e for e in owner.edges if e.key != key])
