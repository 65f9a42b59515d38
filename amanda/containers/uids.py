"""Identity by uid: where each uid sits in a tree, and the uids two different nodes share.

A uid names one node. For an op that holds an array (a weight, a constant, a variable's initial
value) it is also a key: weights are saved and loaded by it, a session keeps a variable's value
under it (or under the op's ``shared_name``: :func:`key_of`), and an optimiser trains one weight
per uid. One key at several paths is therefore one op placed several times, shared on purpose:
the same layer applied twice (renamed ``dense_1`` in the second place) or a weight tied with
``layers.tie``. Such places hold the same content; they may differ only in their own name
(:func:`~amanda.containers.identity.same_content`). Two array-holding ops of one key whose
content differs are a *clash*: two layers built apart that were given one identity, or one
place of a shared weight changed alone. ``validate`` reports clashes, and ``Session``,
``save_weights`` and ``optim.minimize`` refuse a model that has one, since each would silently
keep one of the two. (Other nodes may share a uid freely: nothing is keyed by it.)

>>> import numpy as np
>>> from amanda.containers.container import Container, op
>>> w = op("Constant", "w", outputs=["output"], attrs={"value": np.zeros(2)}, uid="k")
>>> other = op("Constant", "v", outputs=["output"], attrs={"value": np.ones(3)}, uid="k")
>>> twice = Container("M", "m", children=[w, w.with_name("w2")])
>>> uid_clashes(twice), uid_places(twice)["k"]
([], (('w',), ('w2',)))
>>> clash = uid_clashes(Container("M", "m", children=[w, other]))[0]
>>> clash.path, clash.found
(('v',), "uid 'k' on `w` and `v`, which differ in shape (2,) and (3,)")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from amanda.containers.identity import same_content
from amanda.containers.records import Path
from amanda.errors import InvariantError, Problem, format_path

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["key_of", "refuse_uid_clashes", "uid_clashes", "uid_places"]

_HINT = ("two nodes built apart hold one identity: build each layer anew (every layer instance has uids of its "
         "own) and seed the whole model once with layers.seeded(model, seed); to share a weight on purpose, "
         "apply one layer object twice or use layers.tie")


def _nodes(container: Container) -> list[tuple[Path, Container]]:
    """Every node with its path, pre-order (children, not bodies held in attributes)."""
    out: list[tuple[Path, Container]] = []
    stack: list[tuple[Path, Container]] = [((), container)]
    while stack:
        path, node = stack.pop()
        out.append((path, node))
        stack.extend((path + (c.name,), c) for c in reversed(node.children))
    return out


def uid_places(container: Container) -> dict[str, tuple[Path, ...]]:
    """Each uid of ``container``'s tree with the paths that hold it, in document order."""
    places: dict[str, list[Path]] = {}
    for path, node in _nodes(container):
        places.setdefault(node.uid, []).append(path)
    return {uid: tuple(paths) for uid, paths in places.items()}


def _difference(a: Container, b: Container) -> str:
    """How two nodes differ, in a few words."""
    if a.type != b.type:
        return f"type ({a.type} and {b.type})"
    for key in sorted(set(a.attrs) | set(b.attrs)):
        x, y = a.attrs.get(key), b.attrs.get(key)
        if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
            if x.shape != y.shape or x.dtype != y.dtype:
                return f"{'shape' if x.shape != y.shape else 'dtype'} {x.shape if x.shape != y.shape else x.dtype} " \
                       f"and {y.shape if x.shape != y.shape else y.dtype}"
            if not np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"):
                return f"the values of {key!r}"
        elif (x is None) != (y is None) or (not isinstance(x, np.ndarray) and not isinstance(y, np.ndarray)
                                              and type(x) is type(y) and x != y):
            return f"attribute {key!r}"
    return "ports, edges or children" if a.children or b.children else "ports or attributes"


def key_of(op: Container) -> str:
    """The key an op's state is kept under: its ``shared_name`` attribute, else its uid."""
    shared = op.attrs.get("shared_name")
    return str(shared) if shared else op.uid


def _keyed(node: Container) -> bool:
    """Whether something is kept by ``node``'s key: an op holding an array."""
    return node.is_op and any(isinstance(v, np.ndarray) for v in node.attrs.values())


def _build(container: Container) -> tuple[Problem, ...]:
    seen: dict[str, list[tuple[Path, Container]]] = {}
    problems: list[Problem] = []
    for path, node in _nodes(container):
        if not _keyed(node):
            continue
        keys = [("uid", node.uid)] + ([("shared_name", key_of(node))] if node.attrs.get("shared_name") else [])
        for label, key in keys:
            kept = seen.setdefault(f"{label}:{key}", [])
            if any(node is other or same_content(node, other) for _, other in kept):
                continue
            if kept:
                first, other = kept[0]
                shown, here = format_path(first), format_path(path)
                problems.append(Problem(
                    path, f"a {label} of its own, or the content of `{shown}`, which has {label} {key!r} (a shared op)",
                    f"{label} {key!r} on `{shown}` and `{here}`, which differ in {_difference(other, node)}", _HINT))
            kept.append((path, node))
    return tuple(problems)


def uid_clashes(container: Container) -> list[Problem]:
    """One problem per array-holding op whose uid (or ``shared_name``) an earlier such op of
    other content holds, naming both paths; empty when every shared key is shared on purpose.
    Computed once per container."""
    return list(container._cached("uid_clashes", _build))


def refuse_uid_clashes(container: Container, action: str) -> None:
    """Raise ``InvariantError`` when ``container`` has a uid clash; ``action`` says who refuses."""
    problems = uid_clashes(container)
    if problems:
        raise InvariantError(problems, f"{action} refuses a model in which different nodes share a uid")
