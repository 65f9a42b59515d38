"""Functional composition: ``chain`` (sequential) and ``named_merge`` (wired by patches).

Children are shared, not copied. Ports left unbound inside are exposed on the parent
under qualified names ``child.port`` (marked with the port attribute ``unbound: true``,
so that chaining the parent again wires only its main ports).

>>> from amanda.containers.container import op
>>> dense, relu = op("Dense", "dense", ["x"], ["y"]), op("Relu", "relu", ["x"], ["y"])
>>> model = chain(dense, relu, inputs=["image"], outputs=["features"])
>>> model.input_names, model.output_names
(('image',), ('features',))
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from amanda.containers.arguments import brief, expect_list, shown
from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Endpoint, Port
from amanda.errors import AmandaError, ArgumentError

__all__ = ["CompositionError", "chain", "exposed_controls", "named_merge", "wrapped_namespace"]

_UNBOUND = "unbound"


class CompositionError(AmandaError):
    """Containers cannot be composed as asked (ports do not line up, bad patch …)."""


def _unique_children(containers: Iterable[Container]) -> list[Container]:
    """The containers with names made unique: a reused or unnamed one gets a suffix.

    Reusing one container twice keeps its uid in both places, which is what layer
    reuse means for weights (both places load the same trained arrays).
    """
    out: list[Container] = []
    taken: set[str] = set()
    for position, item in enumerate(containers):
        if not isinstance(item, Container):
            raise CompositionError.at(f"[{position}]", "a Container", type(item).__name__)
        base = item.name or f"{item.type or 'op'}_{position}"
        name, count = base, 1
        # a child may not be named like one of its own children (a >> b >> c nests unnamed chains)
        while name in taken or (name != item.name and item.has_child(name)):
            name = f"{base}_{count}"
            count += 1
        taken.add(name)
        out.append(item if name == item.name else item.with_name(name))
    return out


def wrapped_namespace(containers: Iterable[Container]) -> dict[str, str]:
    """``{"namespace": n}`` when the wrapped containers that declare a namespace all declare
    ``n`` (and at least one does), else ``{}``: what a wrapper around them declares, so that
    ops added beside them run in the same namespace."""
    found: set[str] = {c.attrs["namespace"] for c in containers if c.attrs.get("namespace") is not None}
    return {"namespace": found.pop()} if len(found) == 1 else {}


def exposed_controls(children: Iterable[Container], taken: Iterable[str] = ()) -> list[Port]:
    """The named control ports a composition exposes: one per name any child declares (the
    "all" computation: fetching ``train`` on the parent runs every child's ``train``), except
    names ``taken`` by the parent's data ports.

    >>> from amanda.containers.container import op
    >>> [p.name for p in exposed_controls([op("A", "a", controls=["train"]), op("B", "b", controls=["train", "log"])])]
    ['train', 'log']
    """
    names: dict[str, None] = {}
    skip = set(taken)
    for child in children:
        names.update((n, None) for n in child.control_names if n not in skip)
    return [Port(n) for n in names]


def _controls_wired(kids: list[Container], inputs: list[Port], outputs: list[Port]) -> tuple[list[Port], list[Edge]]:
    """The exposed control ports and the control edges from each child's port to them."""
    controls = exposed_controls(kids, [p.name for p in (*inputs, *outputs)])
    names = {p.name for p in controls}
    return controls, [Edge(((k.name,), n), (SELF, n)) for k in kids for n in k.control_names if n in names]


def _main(ports: Sequence[Port]) -> list[Port]:
    return [p for p in ports if not p.attrs.get(_UNBOUND)]


def _pairing(a: Container, b: Container) -> list[tuple[str, str]]:
    """(output of a, input of b) pairs: by equal names when every input of b has one,
    otherwise one to one by position over a's main outputs."""
    names = {p.name for p in a.outputs}
    if b.inputs and all(p.name in names for p in b.inputs):
        return [(p.name, p.name) for p in b.inputs]
    outs = _main(a.outputs)
    if len(outs) == len(b.inputs):
        return [(o.name, i.name) for o, i in zip(outs, b.inputs)]
    raise CompositionError(
        f"cannot chain {a.name!r} into {b.name!r}: outputs {[p.name for p in a.outputs]} "
        f"do not match inputs {[p.name for p in b.inputs]} one to one or by name",
        path=(b.name,),
        expected=f"{len(b.inputs)} outputs or outputs named {[p.name for p in b.inputs]}",
        found=str([p.name for p in a.outputs]),
    )


def _check_types(kids: list[Container], pairs: list[list[tuple[str, str]]]) -> None:
    """Refuse a chain whose declared types show it can never run (layers whose widths differ);
    a chain whose first child declares no input types passes unchecked."""
    first = kids[0]
    if len(kids) < 2 or not first.inputs or not all(p.attrs.get("dtype") is not None for p in first.inputs):
        return  # nothing to type it with: the check would cost without telling anything
    from amanda.engines import engine

    found = engine("chain_problem")(kids, pairs)  # installed by amanda.types, above containers
    if found is not None:
        k, problem = found
        a, b = kids[k - 1], kids[k]
        raise CompositionError(f"cannot chain {a.name!r} into {b.name!r} (children {k} and {k + 1} of the chain): "
                               f"{problem}", path=(b.name,), expected=f"inputs {b.name!r} can take", found=problem)


def _renamed(ports: Sequence[Port], names: Sequence[str] | Mapping[str, str] | None, what: str) -> list[Port]:
    if names is None:
        return list(ports)
    if isinstance(names, Mapping):
        if not all(isinstance(k, str) and isinstance(v, str) and v for k, v in names.items()):
            raise ArgumentError.at(what, "a mapping of port names to new names", shown(names))
        unknown = [k for k in names if k not in {p.name for p in ports}]
        if unknown:
            raise CompositionError.at(what, f"names among {[p.name for p in ports]}", str(unknown))
        return [Port(names.get(p.name, p.name), attrs=p.attrs) for p in ports]
    names = expect_list(names, what, "a list of new port names or a mapping old -> new")
    if not all(isinstance(n, str) for n in names):
        raise ArgumentError.at(what, "new port names (strings)", shown(names))
    if len(names) != len(ports):
        raise CompositionError.at(what, f"{len(ports)} names for {[p.name for p in ports]}", str(names))
    return [Port(n, attrs=p.attrs) for n, p in zip(names, ports)]


def _qualified(child: Container, port: Port) -> Port:
    name = port.name if port.attrs.get(_UNBOUND) and "." in port.name else f"{child.name}.{port.name}"
    return Port(name, attrs={**port.attrs, _UNBOUND: True})


def chain(
    *containers: Container,
    inputs: Sequence[str] | Mapping[str, str] | None = None,
    outputs: Sequence[str] | Mapping[str, str] | None = None,
    name: str | None = None,
    type: str = "Chain",
) -> Container:
    """Wire each container's outputs to the next one's inputs.

    The parent exposes the first child's inputs and the last child's outputs, renamed by
    ``inputs=``/``outputs=`` (a list of new names, or a mapping old -> new); outputs left
    unbound inside are exposed as ``child.port``. ``b(a)`` and ``a >> b`` mean ``chain(a, b)``.
    The parent declares the children's namespace when that is unambiguous (see
    :func:`wrapped_namespace`).
    """
    if not containers:
        raise CompositionError.at("containers", "at least one container to chain", "none")
    kids = _unique_children(containers)
    first, last = kids[0], kids[-1]
    parent_inputs = _renamed(first.inputs, inputs, "inputs")
    parent_outputs = _renamed(last.outputs, outputs, "outputs")
    edges: list[Edge] = [
        Edge((SELF, new.name), ((first.name,), old.name)) for new, old in zip(parent_inputs, first.inputs)
    ]
    side: list[Port] = []
    links = [_pairing(a, b) for a, b in zip(kids, kids[1:])]
    _check_types(kids, links)
    for (a, b), pairs in zip(zip(kids, kids[1:]), links):
        used = {out for out, _ in pairs}
        edges.extend(Edge(((a.name,), out), ((b.name,), into)) for out, into in pairs)
        for port in a.outputs:
            if port.name not in used:
                side.append(_qualified(a, port))
                edges.append(Edge(((a.name,), port.name), (SELF, side[-1].name)))
    edges.extend(Edge(((last.name,), old.name), (SELF, new.name)) for new, old in zip(parent_outputs, last.outputs))
    controls, wired = _controls_wired(kids, parent_inputs, parent_outputs + side)
    return Container(type, name, inputs=parent_inputs, outputs=parent_outputs + side, children=kids, edges=edges + wired,
                     attrs=wrapped_namespace(kids), controls=controls)


def _patch_end(parent_kids: dict[str, Container], text: Any, side: str) -> tuple[str, str]:
    """Resolve ``"child:port"`` against the children (names with '/' resolve as a whole first)."""
    end = Endpoint.of(text)
    op = end.op
    if isinstance(op, tuple):
        if len(op) != 1:
            raise CompositionError.at(str(text), "a direct child of the merge", str(op))
        op = op[0]
    if isinstance(op, int):
        names = list(parent_kids)
        if not 0 <= op < len(names):
            raise CompositionError.at(str(text), f"a child index below {len(names)}", str(op))
        op = names[op]
    if op not in parent_kids:
        raise CompositionError.at(str(text), f"a child among {list(parent_kids)}", brief(op))
    child = parent_kids[op]
    ports = child.outputs if side == "src" else child.inputs
    port = end.port
    if isinstance(port, int) and 0 <= port < len(ports):
        port = ports[port].name
    if not any(p.name == port for p in ports):
        kind = "output" if side == "src" else "input"
        raise CompositionError.at(str(text), f"an {kind} port of {op!r} among {[p.name for p in ports]}", brief(end.port))
    return op, port  # type: ignore[return-value]


def _expose(kids: list[Container], side: str, used: set, renamed: dict[str, str], edges: list[Edge]) -> list[Port]:
    """Parent ports for the children's ports no patch uses, named ``child.port`` unless
    ``renamed`` (whose entries are consumed) says otherwise; their edges go to ``edges``."""
    exposed = []
    for kid in kids:
        for port in getattr(kid, side):
            if (kid.name, port.name) in used:
                continue
            qualified = _qualified(kid, port)
            new = Port(renamed.pop(qualified.name, qualified.name), attrs=qualified.attrs)
            exposed.append(new)
            inside = ((kid.name,), port.name)
            edges.append(Edge((SELF, new.name), inside) if side == "inputs" else Edge(inside, (SELF, new.name)))
    return exposed


def named_merge(
    containers: Sequence[Container],
    patches: Iterable[tuple[Any, Any]],
    name: str | None = None,
    inputs: Mapping[str, str] | None = None,
    outputs: Mapping[str, str] | None = None,
    type: str = "Merge",
) -> Container:
    """Several containers wired by ``("child:out_port", "child:in_port")`` patches.

    Every port no patch uses is exposed on the parent as ``child.port``, unless
    ``inputs=``/``outputs=`` map that qualified name to another. The parent declares the
    children's namespace when that is unambiguous (see :func:`wrapped_namespace`).

    >>> from amanda.containers.container import op
    >>> a, b = op("A", "a", ["i"], ["o", "p"]), op("B", "b", ["i"], ["o"])
    >>> m = named_merge([a, b], patches=[("a:o", "b:i")])
    >>> m.input_names, m.output_names
    (('a.i',), ('a.p', 'b.o'))
    """
    kids = _unique_children(expect_list(containers, "containers", "a list of containers"))
    patches = expect_list(patches, "patches", "a list of (output, input) pairs")
    for label, renames in (("inputs", inputs), ("outputs", outputs)):
        if renames is not None and not isinstance(renames, Mapping):
            raise ArgumentError.at(label, "a mapping from qualified port names to new names", shown(renames))
    by_name: dict[str, Container] = {k.name: k for k in kids if k.name is not None}
    edges: list[Edge] = []
    fed: set[tuple[str, str]] = set()
    read: set[tuple[str, str]] = set()
    for number, patch in enumerate(patches):
        try:
            src_text, dst_text = patch
        except (TypeError, ValueError):
            raise CompositionError.at(f"patches[{number}]", "a pair (output, input)", brief(patch)) from None
        src = _patch_end(by_name, src_text, "src")
        dst = _patch_end(by_name, dst_text, "dst")
        if dst in fed:
            raise CompositionError.at(f"patches[{number}]", "one patch per input port", f"{dst[0]}:{dst[1]} twice")
        fed.add(dst)
        read.add(src)
        edges.append(Edge(((src[0],), src[1]), ((dst[0],), dst[1])))
    renamed_in = dict(inputs or {})
    renamed_out = dict(outputs or {})
    parent_inputs = _expose(kids, "inputs", fed, renamed_in, edges)
    parent_outputs = _expose(kids, "outputs", read, renamed_out, edges)
    if renamed_in or renamed_out:
        unknown = sorted(renamed_in) + sorted(renamed_out)
        raise CompositionError.at("inputs/outputs", "qualified names of unbound ports (child.port)", str(unknown))
    controls, wired = _controls_wired(kids, parent_inputs, parent_outputs)
    return Container(type, name, inputs=parent_inputs, outputs=parent_outputs, children=kids, edges=edges + wired,
                     attrs=wrapped_namespace(kids),
                     controls=controls)
