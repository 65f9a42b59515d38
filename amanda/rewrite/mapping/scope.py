"""One container level while a table is applied: a private working copy, rebuilt once at the end.

The driver maps each container level separately. A ``Scope`` is the rewrite engine's working
copy of that level (:class:`amanda.rewrite.replace.WorkingLevel`: children, edges and input
ports with their indexes, replacements spliced in), which also tracks the namespace each op
will be in; ``build`` makes the new container once, in its namespace, reusing every child that
did not change, and returns the original container itself when nothing changed at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Port
from amanda.errors import InvariantError, MappingError
from amanda.rewrite.replace import WorkingLevel, end_name

if TYPE_CHECKING:
    from amanda.rewrite.mapping.driver import Context

__all__ = ["Scope", "end_name"]


def plain(value: Any) -> Any:
    """An attribute value as expressions see it: maps as dicts, sequences as lists, arrays kept."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Container):
        return {"name": value.name, "type": value.type}
    return value


class Scope(WorkingLevel):
    """The working state of one container level (see the module docstring): the engine's
    :class:`~amanda.rewrite.replace.WorkingLevel`, plus the namespace each child will be in, the
    enclosing level's scope, and the input ports added for hoisting."""

    def __init__(self, container: Container, path: tuple[str, ...], inherited: str | None,
                 ctx: Context, parent: Scope | None = None) -> None:
        super().__init__(container)
        self.path = path
        self.ctx = ctx
        self.parent = parent  # the enclosing level's scope (values followed up through input ports)
        self.added_inputs: list[Port] = []
        self.source_level: Any = None  # the source model at this level, as values follow it (values.py)
        self.old_namespace = container.attrs.get("namespace", inherited)
        self.ns: dict[str, str | None] = {
            name: op.attrs.get("namespace", self.old_namespace) for name, op in self.ops.items()
        }

    def namespace_of(self, name: str) -> str | None:
        """The namespace the child ``name`` is in now (targets count once a rule mapped it)."""
        return self.ns.get(name)

    def op_view(self, name: Any, path: tuple[str, ...] | None = None) -> dict[str, Any]:
        """The plain-data view of one op for expressions: the child ``name``, or an op of another
        level (given as the op, with its ``path``; its consumers are not counted)."""
        op = self.ops[name] if isinstance(name, str) else name
        local = isinstance(name, str)
        return {
            "name": op.name,
            "type": op.type,
            "path": [*self.path, name] if path is None else list(path),
            "namespace": self.ns.get(name) if local else op.attrs.get("namespace", self.old_namespace),
            "attrs": plain(op.attrs),
            "inputs": list(op.input_names),
            "outputs": list(op.output_names),
            "input_attrs": {p.name: plain(p.attrs) for p in op.inputs},
            "output_attrs": {p.name: plain(p.attrs) for p in op.outputs},
            "consumers": {p.name: len(self.consumers(name, p.name)) if local else 0 for p in op.outputs},
        }

    def drop_op(self, name: str) -> None:
        """Remove the child ``name`` and its namespace (its edges are the caller's business)."""
        super().drop_op(name)
        self.ns.pop(name, None)

    def replace_child(self, name: str, new: Container) -> None:
        """Put a mapped nested container in place of its original."""
        if self.ops[name] is not new:
            self.ops[name] = new
            self.changed = True

    def add_input(self, port: Port) -> str:
        """Add an input port to this container (a fresh name if taken), to be hoisted; its final name."""
        name = super().add_input(port)
        self.added_inputs.append(self.inputs[-1])
        return name

    def hoist(self, child: str, port: Port) -> None:
        """Feed the new input ``port`` of the nested container ``child`` from a new input here."""
        name = self.add_input(port)
        self.add_edge(Edge((SELF, name), ((child,), port.name)))
        inner = self.ctx.endpoint((*self.path, child), port.name, container=True)
        self.ctx.rename_value(inner, self.ctx.endpoint(self.path, name, container=True))

    # -- the result ---------------------------------------------------------------------------

    def build(self, namespace: str | None = None, root: bool = False) -> Container:  # type: ignore[override]
        """The container of this level, in namespace ``namespace``; the original if unchanged."""
        children = []
        for name in self.names:
            op = self.ops[name]
            if not op.children:
                op = _with_namespace(op, self.ns.get(name), namespace)
            children.append(op)
        container = self.container
        attrs = container.attrs
        own = attrs.get("namespace")
        if (root or own is not None) and own != namespace and namespace is not None:
            attrs = attrs.set("namespace", namespace)
        if not self.changed and attrs is container.attrs and all(
                a is b for a, b in zip(children, container.children)):
            return container
        try:
            return Container(container.type, container.name, inputs=self.inputs, outputs=container.outputs,
                             children=children, edges=self.edges, tombstones=container.tombstones, attrs=attrs, uid=container.uid,
                             controls=container.controls)
        except InvariantError as exc:
            where = "/".join(self.path) or container.name or "<root>"
            raise MappingError(
                f"mapping left {where} inconsistent: {exc}; if tombstones of an enclosing "
                "container name edges a rule rewrote, consolidate the model first",
                path=self.path) from exc


def _with_namespace(op: Container, wanted: str | None, inherited: str | None) -> Container:
    """``op`` with its own ``namespace`` attribute set only where it differs from the inherited one."""
    own = op.attrs.get("namespace")
    if own == wanted or wanted is None:
        return op
    if wanted == inherited:
        return op.without_attrs("namespace")
    return op.with_attrs(namespace=wanted)
