"""Pure updates with structural sharing: ``replace`` and ``with_attrs`` at paths or selections.

Replacing a descendant rebuilds only the containers on its path; every other subtree
is shared. Each rebuilt container re-checks exactly the invariants the change can
break (its edges and tombstones that reach into the replaced child), so an update
deep inside a model of N ops costs O(depth · log N).

>>> from amanda.containers.container import Container, op
>>> g = Container(children=[op("Relu", "r", ["x"], ["y"]), op("Exp", "e", ["x"], ["y"])],
...               edges=[("r:y", "e:x")])
>>> g2 = replace(g, "r", lambda old: old.with_attrs(debug=True))
>>> g2.child("r").attrs["debug"], g2.child("e") is g.child("e"), "debug" in g.child("r").attrs
(True, True, False)
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from amanda.containers.arguments import brief, expect_container, shown
from amanda.containers.container import Container
from amanda.containers.edge import SELF
from amanda.containers.frames import at, step, with_child
from amanda.containers.invariants import resolve_path
from amanda.errors import ArgumentError, InvariantError, PathError, Problem

__all__ = ["expect_child_path", "replace", "target_paths", "with_attrs", "with_child"]


def target_paths(container: Container, target: Any) -> list[tuple[str, ...]]:
    """Paths named by ``target``: a Selection (anything with ``.paths``), a path, or a list of paths."""
    expect_container(container, "container")
    if not isinstance(target, (str, int, tuple, list)) and not hasattr(target, "paths") or isinstance(target, bool):
        raise ArgumentError.at("target", "a path, a list of paths or a Selection", shown(target))
    if hasattr(target, "paths"):
        return [tuple(p) for p in target.paths]
    if isinstance(target, list):
        # a list inside the list is one path (a list of names), not more paths: no recursion
        return [p for item in target for p in target_paths(container, tuple(item) if isinstance(item, list) else item)]
    if isinstance(target, tuple):
        return _tuple_target(container, target)
    return _resolved_target(container, target)


def _is_name(part: Any) -> bool:
    """Whether ``part`` can be one step of a path: a child name or an index (not a bool)."""
    return isinstance(part, (str, int)) and not isinstance(part, bool)


def _tuple_target(container: Container, target: tuple) -> list[tuple[str, ...]]:
    """A path given as a tuple: of names, checked step by step, else resolved with indexes."""
    if not all(_is_name(p) for p in target):
        raise ArgumentError.at("target", "a path: a tuple of child names (or indexes)", shown(target))
    if all(isinstance(p, str) for p in target):
        node = container
        for part in target:
            node = step(node, part)
        return [target]
    return _resolved_target(container, target)


def _resolved_target(container: Container, target: Any) -> list[tuple[str, ...]]:
    """A path given as a string or with indexes, resolved; a PathError where it leads nowhere."""
    resolved = resolve_path(container, target)
    if resolved is None:
        stop = _stop(container, tuple(target.split("/"))) if isinstance(target, str) else None
        if stop is not None and stop[1]:  # the path enters the body of a control-flow op
            raise PathError.at(stop[0], "a path through children", brief(target), stop[1])
        raise PathError.at(container.name, "an existing descendant path", brief(target))
    return [() if resolved is SELF else resolved]


def _stop(model: Container, path: tuple) -> tuple[tuple, str] | None:
    """Where ``path`` stops leading through children (the path of the last node reached) and,
    when it enters the body of an If, Loop or Scan there (a graph held in an attribute, which a
    selector reaches), a hint; None when it leads through children all the way."""
    node = model
    for depth, name in enumerate(path):
        if isinstance(name, str) and node.has_child(name):
            node = node.child(name)
            continue
        key = name.split("[")[0] if isinstance(name, str) else None
        held = node.attrs.get(key) if key is not None else None
        hint = ""
        if isinstance(held, Container) or (isinstance(held, tuple) and any(isinstance(h, Container) for h in held)):
            hint = (f"{name!r} is a body of {node.type} {node.name!r}, held in its attributes: work inside the body "
                    f"(amanda.fuse(body, ...)) and set it back with amanda.with_attrs")
        return ((model.name, *path[:depth]) if model.name else tuple(path[:depth])), hint
    return None


def expect_child_path(model: Container, path: tuple) -> None:
    """PathError unless ``path`` leads from ``model`` through children (not into a body)."""
    stop = _stop(model, path)
    if stop is not None:
        raise PathError.at(stop[0], "a path through children", brief("/".join(map(str, path))), stop[1])


def replace(container: Container, target: Any, new: Container | Callable[[Container], Container]) -> Container:
    """A container where each target is replaced by ``new`` (or by ``new(old)``).

    Targets are handled deepest and last first, so replacing both a container and one
    of its descendants sees the replaced descendant. An update that changes nothing
    returns ``container`` itself.
    """
    if not isinstance(new, Container) and not callable(new):
        raise ArgumentError.at("new", "a Container or a function old -> Container", shown(new))
    result = container
    for path in sorted(set(target_paths(container, target)), key=_reverse_document_key):
        result = at(result, path, partial(_replacement, new, path=path))
    return result


def _reverse_document_key(path: tuple[str, ...]) -> Any:
    # descendants before their ancestors: only that order matters between targets
    return (-len(path), path)


def with_attrs(container: Container, target: Any, **attrs: Any) -> Container:
    """Attributes set on every target (a path, a list of paths, or a Selection)."""
    return replace(container, target, lambda node: node.with_attrs(**attrs))


def _replacement(new: Container | Callable[[Container], Container], old: Container, *, path: tuple) -> Container:
    replacement = new if isinstance(new, Container) else new(old)
    if not isinstance(replacement, Container):
        raise InvariantError([Problem(path, "a Container to put in place", type(replacement).__name__)])
    return replacement
