"""Function calls on export: call containers become call nodes plus one ``FunctionProto`` each.

:func:`collapse_calls` replaces every call container (a container with children and an
``onnx_function`` attr, as import makes them) by a leaf of the same name, type, ports and
attributes, so the graph writer writes it as one node, and gathers the function definitions:
calls whose bodies are equal (attribute references included, as they are written back) are one
function; a call whose body differs (an edited call) is written as a function of its own, named
``<type>_<k>``. Bodies are collapsed too (functions
calling functions), and so are If/Loop/Scan bodies held in attributes. A call that an edge or
tombstone from above reaches into (an ``amanda.edit`` wrapper editing inside a body) is not a
call any more: its ops are written inline, their attribute references resolved.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from amanda.containers.container import Container
from amanda.containers.edge import Port
from amanda.containers.refs import resolve_references
from amanda.errors import FormatError, InvariantError, Problem

__all__ = [
    "FUNCTION_ATTR", "Definition", "collapse_calls", "function_domain", "is_call", "shared_body", "with_body",
    "write_function",
]

FUNCTION_ATTR = "onnx_function"


class Definition(NamedTuple):
    """One function to write: its name, its body (calls inside collapsed), the details kept
    from import (domain, opset_import, attribute defaults …) and the namespace the body's ops
    inherit."""

    name: str
    body: Container
    info: Any
    namespace: str | None


def function_domain(info: Any, path: tuple) -> tuple[str, int]:
    """The ``(domain, opset version)`` a call's ``onnx_function`` attr names, or FormatError.

    >>> function_domain({"domain": "local", "version": 2}, ("call",))
    ('local', 2)
    """
    domain = info.get("domain", "") if isinstance(info, Mapping) else None
    version = info.get("version", 1) if isinstance(info, Mapping) else None
    if not isinstance(domain, str) or type(version) is not int or version < 1:
        raise FormatError(
            f"call {'/'.join(map(str, path)) or '<root>'}: onnx_function must be a mapping with a "
            f"domain (a string) and a version (an int >= 1), found {info!r}",
            path=path, expected="{domain: str, version: int}", found=repr(info),
        )
    return domain, version


def is_call(node: Container) -> bool:
    """Whether ``node`` is a call of a model-local function (children plus ``onnx_function``)."""
    return bool(node.children) and FUNCTION_ATTR in node._attrs


def with_body(call: Container, body: Container) -> Container:
    """``call`` (its name, type, ports, attributes, uid) holding ``body``'s very children, edges
    and tombstones, which must address ports of the same names; no per-call copy is made.

    >>> from amanda.containers.container import op
    >>> body = Container("F", "f", inputs=["x"], outputs=["y"], children=[op("Relu", "r", ["X"], ["Y"])],
    ...                  edges=[("f:x", "r:X"), ("r:Y", "f:y")])
    >>> a = with_body(op("F", "a", ["x"], ["y"]), body)
    >>> a.children is body.children, a.child("r") is body.child("r")
    (True, True)
    """
    if (call.input_names, call.output_names) != (body.input_names, body.output_names) or call.name in body._index:
        raise InvariantError([Problem(
            (call.name,) if call.name else (), f"ports {body.input_names} -> {body.output_names} and a name "
            "no body op has", f"ports {call.input_names} -> {call.output_names}, name {call.name!r}",
        )])
    return Container._trusted(
        call.type, call.name, call.inputs, call.outputs, call.controls, body.children,
        body.edges, body.tombstones, call._attrs, call.uid, body._index,
    )


def shared_body(call: Container, bodies: dict) -> Container:
    """``call`` sharing its body with an equal body seen before (kept in ``bodies``, a dict the
    caller keeps for one load), or ``call`` itself: a document names no shared objects, so
    loading gives each call its own copy of the body until this puts them back together."""
    key = (call.input_names, call.output_names, tuple(call.children), tuple(c.uid for c in call.children),
           tuple(call.edges), tuple(call.tombstones))
    first = bodies.setdefault(key, call)
    return call if first is call else with_body(call, first)


class _Collapser:
    def __init__(self) -> None:
        self.definitions: list[Definition] = []
        self.kinds: dict[tuple, list[tuple[Container, str]]] = {}  # function key -> (template, name)
        self.templates: dict[int, tuple[Any, Container]] = {}  # id(children) -> (children, template)
        self.done: dict[int, tuple[Container, Container]] = {}  # id(node) -> (node, collapsed)
        self.reached: set[tuple] = set()  # paths of containers that edges from above reach into

    def collapse(self, node: Container, ns: str | None, where: tuple) -> Container:
        if where in self.reached:  # this path is inlined, another of the same object may not be
            return self._collapse(node, ns, where)
        found = self.done.get(id(node))
        if found is not None:
            return found[1]
        result = self._collapse(node, ns, where)
        self.done[id(node)] = (node, result)
        return result

    def _collapse(self, node: Container, ns: str | None, where: tuple) -> Container:
        ns = node._attrs.get("namespace", ns)
        if is_call(node):
            if where not in self.reached:
                return self._stub(node, ns, where)
            # written inline: a block, no longer a call, so its values replace its references
            node = resolve_references(node).without_attrs(FUNCTION_ATTR)
        if node.children:
            for edge in (*node.edges, *node.tombstones):  # an edit wrapper's edges reach inside:
                for end in (edge[0][0], edge[1][0]):  # the calls they enter are written inline
                    if isinstance(end, tuple):
                        self.reached.update((*where, *end[:k]) for k in range(1, len(end)))
            kids = [self.collapse(c, ns, (*where, c.name)) for c in node.children]
            if all(a is b for a, b in zip(kids, node.children)):
                return node
            return node.evolve(children=kids)
        return self._collapse_bodies(node, ns, where)

    def _collapse_bodies(self, node: Container, ns: str | None, where: tuple) -> Container:
        """A leaf op with the calls in its graph attributes (If branches, Loop bodies) collapsed."""
        changes: dict[str, Any] = {}
        for key, value in node._attrs.items():
            if isinstance(value, Container):
                inner = value._attrs.get("namespace", ns)
                new = self.collapse(value, inner, (*where, key))
                if new is not value:
                    changes[key] = new
            elif isinstance(value, tuple) and value and all(isinstance(v, Container) for v in value):
                bodies = tuple(self.collapse(v, v._attrs.get("namespace", ns), (*where, key)) for v in value)
                if any(a is not b for a, b in zip(bodies, value)):
                    changes[key] = bodies
        return node.with_attrs(**changes) if changes else node

    def _template(self, call: Container) -> Container:
        found = self.templates.get(id(call.children))
        if found is None:
            body = Container(
                call.type, None, inputs=[Port(p.name) for p in call.inputs], outputs=[Port(p.name) for p in call.outputs],
                children=call.children, edges=call.edges, tombstones=call.tombstones,
            )
            found = self.templates[id(call.children)] = (call.children, body)
        return found[1]

    def _stub(self, call: Container, ns: str | None, where: tuple) -> Container:
        info = call._attrs[FUNCTION_ATTR]
        domain, _ = function_domain(info, where)
        if call.type is None:
            raise FormatError(f"call {'/'.join(map(str, where))} has no type (the function's name)", path=where)
        key = (domain, call.type, info.get("overload", ""))
        template = self._template(call)
        kinds = self.kinds.setdefault(key, [])
        name = next((n for t, n in kinds if t == template), None)
        if name is None:
            name, k = call.type, 0
            taken = {n for (d, _, _), found in self.kinds.items() if d == domain for _, n in found}
            taken |= {t for (d, t, _) in self.kinds if d == domain and t != call.type}
            while name in taken:  # an edited body: a function of its own, named apart
                k += 1
                name = f"{call.type}_{k}"
            kinds.append((template, name))
            body = Container(
                None, name, inputs=template.inputs, outputs=template.outputs,
                children=[self.collapse(c, ns, (*where, c.name)) for c in call.children], edges=call.edges,
                tombstones=call.tombstones,
            )
            self.definitions.append(Definition(name, body, info, ns))  # after its callees
        stub = Container(name, call.name, inputs=call.inputs, outputs=call.outputs, attrs=call._attrs, uid=call.uid)
        return stub


def collapse_calls(root: Container) -> tuple[Container, list[Definition]]:
    """``root`` with every call replaced by a leaf, and the functions to write (callees first).

    >>> c, defs = collapse_calls(Container(None, "g"))
    >>> defs
    []
    """
    collapser = _Collapser()
    result = collapser.collapse(root, None, ())
    return result, collapser.definitions


def _domains(graph: Any, found: set[str]) -> set[str]:
    for node in graph.node:
        found.add(node.domain)
        for attr in node.attribute:
            for g in [attr.g] if attr.HasField("g") else attr.graphs:
                _domains(g, found)
    return found


def write_function(writer: Any, target: Any, definition: Definition) -> None:
    """Fill the ``FunctionProto`` ``target`` with ``definition``, through the exporter's graph
    writer (``writer.opsets`` gives each domain's version)."""
    from amanda.io.onnx.attrs import fill_attr
    from amanda.io.onnx.metadata import write_metadata
    from amanda.io.onnx.write_graph import Names

    saved = writer.node_names
    writer.node_names, writer.in_function = set(), True  # node names are unique per function
    try:
        g = writer.graph(definition.body, Names(), {}, (definition.name,), False)
    finally:
        writer.node_names, writer.in_function = saved, False
    info = definition.info
    target.name, target.domain = definition.name, info.get("domain", "")
    if info.get("overload"):
        target.overload = info["overload"]
    target.input.extend(vi.name for vi in g.input)
    target.output.extend(vi.name for vi in g.output)
    target.node.extend(g.node)
    target.value_info.extend(g.value_info)
    opsets = dict(info.get("opset_import") or {})
    for domain in _domains(g, set()):
        if domain in writer.opsets:
            opsets[domain] = writer.opsets[domain][0]
    for domain, version in sorted(opsets.items()):
        target.opset_import.add(domain=domain, version=int(version))
    target.attribute.extend(info.get("attributes") or ())
    types = info.get("default_types") or {}
    for name, value in (info.get("defaults") or {}).items():
        fill_attr(target.attribute_proto.add(), name, value, types.get(name, ""))
    if info.get("doc_string"):
        target.doc_string = info["doc_string"]
    write_metadata(target.metadata_props, info.get("metadata_props"), None, {})
