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
from typing import Any

from amanda.containers.checks import expect_container
from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge
from amanda.containers.edit import EDIT_TYPE
from amanda.containers.frames import lift
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
        def moved(end: Any) -> tuple:
            op = end.op
            if op is SELF or op[0] != inner.name:
                return (op, end.port)
            rest = inner_map(tuple(op[1:]))
            return ((folded.name,) if rest is SELF else (folded.name, *rest), end.port)

        wrapper = Container(
            container.type, container.name, container.inputs, container.outputs,
            [folded, *container.children[1:]],
            [Edge(moved(e.src), moved(e.dst), e.attrs) for e in container.edges],
            [Edge(moved(t.src), moved(t.dst)) for t in container.tombstones],
            container.attrs, container.uid, container.controls,
        )
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

    produced_inside = {e.dst.port: e for e in model.edges if e.dst.op is SELF}
    fed_from: dict[str, Any] = {}  # model input port -> what the wrapper feeds it from
    replaced_outputs: set[str] = set()
    new_edges: list[Edge] = []
    for edge in wrapper.edges:
        src, dst = edge.src, edge.dst
        if dst.op == (m,) and dst.port != -1:
            if src.op is not SELF or src.port != dst.port:
                fed_from[dst.port] = _source(src, path, produced_inside)
            continue
        if dst.op is SELF and src.op == (m,) and src.port == dst.port:
            continue  # the model's own output passes through
        new_src = _source(src, path, produced_inside)
        if dst.op is SELF:
            replaced_outputs.add(dst.port)
        new_edges.append(Edge(new_src, (path(dst.op), dst.port), edge.attrs))
    kept = []
    for edge in model.edges:
        if edge.dst.op is SELF and edge.dst.port in replaced_outputs:
            continue
        if edge.src.op is SELF and edge.src.port in fed_from:
            edge = Edge(fed_from[edge.src.port], edge.dst, edge.attrs)
        kept.append(edge)
    own_keys = {e.key for e in kept}
    tombstones = []
    for tomb in wrapper.tombstones:
        translated = Edge((path(tomb.src.op), tomb.src.port), (path(tomb.dst.op), tomb.dst.port))
        if translated.key in own_keys:
            kept = [e for e in kept if e.key != translated.key]
        else:
            tombstones.append(translated)
    merged = Container(
        model.type, wrapper.name if wrapper.name is not None else model.name,
        model.inputs, model.outputs, [*model_kids, *added], kept + new_edges,
        list(model.tombstones) + tombstones, own_attrs, model.uid, model.controls,
    )
    for tomb in tombstones:
        merged = _bury(merged, tomb)
    return merged, lambda rel: path(rel) if rel else SELF


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
    the container that owns it; the last deletion also drops the tombstone."""
    src, dst = tomb.src.op, tomb.dst.op
    common = 0
    while common < min(len(src), len(dst)) and src[common] == dst[common]:
        common += 1
    owners = []
    for depth in range(common, 0, -1):
        key = (
            (SELF if len(src) == depth else src[depth:], tomb.src.port),
            (SELF if len(dst) == depth else dst[depth:], tomb.dst.port),
        )
        owner = root.descendant(src[:depth])
        if any((tuple(e.src), tuple(e.dst)) == key for e in owner.edges):
            owners.append((src[:depth], key))
    for number, (owner_path, key) in enumerate(owners):
        root = _delete(root, owner_path, key, drop_tombstone=number == len(owners) - 1)
    return root


def _delete(root: Container, owner_path: tuple, key: tuple, drop_tombstone: bool) -> Container:
    """Rebuild the path to ``owner_path`` with the edge ``key`` removed from its owner."""
    trail = [root]
    for name in owner_path:
        trail.append(trail[-1].child(name))
    owner = trail[-1]
    rebuilt = owner.evolve(edges=[e for e in owner.edges if (tuple(e.src), tuple(e.dst)) != key])
    for level in range(len(owner_path) - 1, -1, -1):
        parent = trail[level]
        lifted = lift(Edge(*key), owner_path[level:]).key
        keep_all = level == 0 and not drop_tombstone
        rebuilt = Container(
            parent.type, parent.name, parent.inputs, parent.outputs,
            parent.children.set(parent.child_index(owner_path[level]), rebuilt), parent.edges,
            [t for t in parent.tombstones if keep_all or t.key != lifted],
            parent.attrs, parent.uid, parent.controls,
        )
    return rebuilt
