"""Reading one ONNX graph (the main graph or an If/Loop/Scan body) into container fields.

Two passes per graph: the first names every op and records which op output defines each value
(so nodes may appear in any order and lookups are one dict access), the second builds the ops,
their attributes (converting bodies, which see the enclosing graphs' values) and the edges.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Endpoint, Port
from amanda.containers.values import EMPTY
from amanda.errors import FormatError, InvariantError
from amanda.io.nest import built
from amanda.io.onnx.attrs import read_attributes
from amanda.io.onnx.hierarchy import take_scope, take_scope_only
from amanda.io.onnx.initializers import InitializerReader
from amanda.io.onnx.metadata import graph_info, node_info, read_metadata, read_pairs
from amanda.io.onnx.node_fields import read_node
from amanda.io.onnx.pending import pending_op
from amanda.io.onnx.ports import Schemas, port_names
from amanda.io.onnx.scope import Scope, capture_ports, fresh_name
from amanda.io.onnx.shared_attrs import SharedAttributes
from amanda.io.onnx.text import check_text, value_info_text_ok
from amanda.io.onnx.value_info import read_value_types
from amanda.io.onnx.values import sparse_to_value, type_to_attrs, typed_port
from amanda.progress import progress

__all__ = ["GraphReader", "Scope"]

# Edges and endpoints built from names already known to be well-formed skip the coercing
# constructors; the container's own checks still resolve and validate every edge.
_edge = _endpoint = tuple.__new__


class GraphReader(InitializerReader):
    """Reads graphs; the importer supplies ``prefix`` (for messages), ``schemas``, ``names``
    and ``ports`` (caches), ``opsets`` (domain -> namespace), ``default`` (the default
    domain's namespace) and ``fail``."""

    prefix: str
    schemas: Schemas
    names: dict[tuple[int, str, int], tuple[str, ...]]
    ports: dict[str, Port]
    in_ports: dict[tuple[int, int], tuple[tuple[str, ...], tuple[Port, ...]]]
    opsets: dict[str, str]
    default: str | None
    proto: Any  # the ModelProto being read
    source: str | None
    in_function: bool = False  # reading a function body: attribute references are kept
    shared: SharedAttributes  # attribute sets converted once per import (amanda.io.onnx.shared_attrs)
    defer: bool = False  # reading the main graph of a nested import: ops may be built later (onnx_pending)
    scope_texts: dict | None = None  # where the main graph's torch scope metadata is taken to
    serialized: bytes = b""  # the bytes the model was parsed from, where known
    spans: list[tuple[int, int]] | None = None  # where the main graph's weights lie in them
    function_of: Callable[[str, str, str], Any]  # a model-local function, or None
    call: Callable[..., Container]  # the container of a call of one (FunctionReader)

    def fail(
        self, message: str, path: Any = None, expected: str | None = None, found: str | None = None
    ) -> FormatError:
        return FormatError(f"{self.prefix}{message}", path=path, expected=expected, found=found)

    def text_fault(self) -> FormatError:
        """The FormatError naming the text field of the model that is not UTF-8 (found by the
        full walk, once a node's fast check has failed)."""
        check_text(self.proto, self.source)
        return self.fail("a text field is not UTF-8 text", expected="UTF-8 text")

    def _scope_texts_of(self, parent: Scope | None, depth: int) -> dict | None:
        """Where torch's scope metadata of a node of this graph goes: the main graph's (depth
        1, no parent, not a function body) to ``scope_texts``; a body's stays on its ops."""
        if parent is None and depth == 1 and not self.in_function:
            return self.scope_texts
        return None

    def _port_names(self, schema: Any, side: str, count: int) -> tuple[str, ...]:
        key = (id(schema), side, count)
        names = self.names.get(key)
        if names is None:
            formal = (
                None if schema is None else (schema.inputs if side == "input" else schema.outputs)
            )
            names = self.names[key] = port_names(formal, count, side)
        return names

    def _port(self, name: str) -> Port:
        port = self.ports.get(name)
        if port is None:
            port = self.ports[name] = Port(name)
        return port

    # -- graphs ----------------------------------------------------------------------------

    def graph(
        self, g: Any, parent: Scope | None, where: tuple[str, ...]
    ) -> tuple[dict[str, Any], Scope]:
        """The fields of the container for graph ``g`` (and its scope, to read captures)."""
        scope = Scope(parent)
        values = scope.values
        here = f"graph {'/'.join(where)!r}"
        gname = g.name or None
        taken: set[str] = {gname} if gname else set()
        children: list[Container] = []
        edges: list[Edge] = []
        init_names = {t.name for t in g.initializer} | {s.values.name for s in g.sparse_initializer}
        inputs: list[Port] = []
        overridable: set[str] = set()
        for vi in g.input:
            if vi.name in init_names:
                overridable.add(vi.name)  # an initializer that is also an input: a default value
                continue
            if not vi.name or vi.name in values:
                raise self.fail(
                    f"{here} declares input {vi.name!r} twice or without a name",
                    path=where,
                    expected="unique input names",
                    found=repr(vi.name),
                )
            inputs.append(Port(vi.name, attrs=type_to_attrs(vi)))
            values[vi.name] = Endpoint(SELF, vi.name)
        children += self._initializers(g, parent, values, taken, overridable, here)
        for sparse in g.sparse_initializer:
            value = {"sparse_value": sparse_to_value(sparse, self.prefix)}
            children.append(
                self._initializer(
                    sparse.values, sparse.values.name, value, values, taken, overridable, here
                )
            )
        plans = self._name_nodes(g, values, taken, here, where)
        types = self._value_types(g)
        main = parent is None and not self.in_function  # a bar for the main graph only
        wait = self.defer and main and len(where) == 1  # ops of a nested import's main graph may wait
        taking = self._scope_texts_of(parent, len(where))
        with progress(len(plans), "importing ONNX", quiet=not main) as bar:
            for plan in plans:
                children.append(self._node(plan, scope, types, edges, where, here, wait, taking))
                bar.update()
        outputs = self._graph_outputs(g, scope, edges, where, here)
        meta, extra, uid = read_metadata(g.metadata_props, self.prefix)
        fields = {"name": gname, "inputs": inputs, "outputs": outputs, "children": children, "edges": edges,
                  "info": graph_info(g, meta), "extra": extra, "uid": uid}
        return fields, scope

    def _value_types(self, g: Any) -> dict[str, dict[str, Any]]:
        """The port attributes of each value ``g``'s value_info types, its text checked here
        (``amanda.io.onnx.value_info``: each distinct type read once); value_info amanda's
        export inferred (amanda.types.onnx_info) is not a declared type."""
        return read_value_types(g.value_info, self._value_type)

    def _value_type(self, vi: Any) -> dict[str, Any] | None:
        """The port attributes of a ``ValueInfoProto`` read the general way (None: inferred)."""
        if not value_info_text_ok(vi):
            raise self.text_fault()
        if any(p.key == "amanda_inferred" for p in vi.metadata_props):
            return None
        return type_to_attrs(vi)

    def _graph_outputs(self, g: Any, scope: Scope, edges: list, where: tuple, here: str) -> list[Port]:
        """The output ports of graph ``g``, each with an edge (added to ``edges``) from its value."""
        outputs: list[Port] = []
        seen: set[str] = set()
        for vi in g.output:
            if vi.name in seen or not vi.name:
                raise self.fail(f"{here} declares output {vi.name!r} twice or without a name", path=where,
                                expected="unique output names", found=repr(vi.name))
            seen.add(vi.name)
            src = scope.get(vi.name)
            if src is None:
                raise self.fail(f"{here} has output {vi.name!r}, which no input, initializer or node defines",
                                path=(*where, vi.name), expected="a defined value", found=repr(vi.name))
            outputs.append(Port(vi.name, attrs=type_to_attrs(vi)))
            edges.append(Edge(src, Endpoint(SELF, vi.name)))
        return outputs

    def _name_nodes(
        self, g: Any, values: dict, taken: set[str], here: str, where: tuple
    ) -> list[tuple]:
        """First pass: every node's fields read once (``amanda.io.onnx.node_fields``), op names,
        namespaces, schemas (worked out once per kind of node), and every value the nodes define."""
        plans = []
        kinds: dict[tuple, tuple] = {}
        for index, node in enumerate(g.node):
            fields = read_node(node)
            if fields is None:
                raise self.text_fault()
            op_type, domain, name, overload, _, outs, _, _, _ = fields
            kind = kinds.get((op_type, domain, overload, len(outs)))
            if kind is None:
                kind = kinds[(op_type, domain, overload, len(outs))] = self._kind(fields, index, here, where)
            own, schema, out_names, fn = kind
            original = None
            if not name or name in taken or (fn and name in fn.names):
                original = name
                name = fresh_name(f"{op_type}_{index}", taken)
            taken.add(name)
            key = (name,)
            for port, value in zip(out_names, outs):
                if not value:
                    continue
                if value in values:
                    raise self.fail(
                        f"{here}: value {value!r} is defined twice (again by node {name!r}, "
                        f"{op_type}); ONNX graphs assign each name once",
                        path=(*where, name),
                        expected="one definition per value",
                        found=repr(value),
                    )
                values[value] = _endpoint(Endpoint, (key, port))
            plans.append((node, name, original, own, schema, out_names, fn, fields))
        return plans

    def _kind(self, fields: tuple, index: int, here: str, where: tuple) -> tuple:
        """(own namespace or None, schema, output port names, model-local function or None) of
        the nodes of one type, domain, overload and output count (the first one at ``index``)."""
        op_type, domain, name, overload, _, outs, _, _, _ = fields
        if domain in ("", "ai.onnx"):
            namespace, own = self.default, None
            if namespace is None:
                raise self.fail(
                    f"{here}: node {name or index!r} ({op_type}) is in the default "
                    "domain, which opset_import does not list",
                    path=(*where, name),
                    expected="an opset_import for the default domain",
                    found="none",
                )
        else:
            namespace = own = self.opsets.get(domain)
            if namespace is None:
                raise self.fail(
                    f"{here}: node {name or index!r} ({op_type}) is in domain {domain!r}, "
                    "which opset_import does not list",
                    path=(*where, name),
                    expected=f"an opset_import for {domain!r}",
                    found="none",
                )
        fn = self.function_of(domain, op_type, overload)
        schema = None if fn else self.schemas.get(namespace, op_type)
        return own, schema, fn.outputs if fn else self._port_names(schema, "output", len(outs)), fn

    def _node(self, plan: tuple, scope: Scope, types: dict, edges: list, where: tuple, here: str, wait: bool,
              taking: dict | None) -> Any:  # a Container, or a PendingOp (amanda.io.onnx.pending) where ``wait``
        node, name, original, own_ns, schema, out_names, fn, fields = plan
        op_type, outs, ins, has_attrs = fields[0], fields[5], fields[6], fields[8]
        key = (name,)
        attrs: dict[str, Any] = {}
        hints: dict[str, str] = {}
        captured: list[str] = []
        if fn:
            in_names = self._call_inputs(fn, len(ins), name, where, here)
            inputs: Any = tuple(map(self._port, in_names))
        else:
            in_names, inputs = self._input_ports(schema, len(ins))
        values, get = scope.values, scope.get
        for port, value in zip(in_names, ins):  # an edge into each input port from the value it reads
            if value:
                src = values.get(value) or get(value)  # (an outer graph's value: captured)
                if src is None:
                    raise self._undefined(op_type, name, value, where, here)
                edges.append(_edge(Edge, (src, _endpoint(Endpoint, (key, port)), EMPTY)))

        # most ops have no attributes: nothing to set up for them
        shared = self._node_attributes(node, schema, scope, (*where, name), here, captured, attrs,
                                       hints) if has_attrs else None
        attrs, uid = self._own_attrs(plan, attrs, hints, shared, taking)
        if captured:
            inputs = [*inputs, *capture_ports(captured, in_names, key, scope, edges)]
        elif wait and not fn:  # a main-graph op of a nested import:
            plain = shared is not None and shared.plain and attrs is shared.frozen()
            waiting = pending_op(op_type, name, inputs, out_names, outs, types, attrs, uid, checked=True, plain=plain)
            if waiting is not None:
                return waiting  # checked now, built when its level opens
        outputs = self._outputs(outs, out_names, types, fn is not None)
        if fn:
            return self.call(fn, name, inputs, outputs, attrs, uid, here)
        return self._build(op_type, name, inputs, outputs, attrs, uid, here)

    def _input_ports(self, schema: Any, count: int) -> tuple[tuple[str, ...], tuple[Port, ...]]:
        """The names of an op's first ``count`` input ports under ``schema``, and the ports
        (both made once per import for each schema and count)."""
        key = (id(schema), count)
        found = self.in_ports.get(key)
        if found is None:
            names = self._port_names(schema, "input", count)
            found = self.in_ports[key] = (names, tuple(map(self._port, names)))
        return found

    def _own_attrs(self, plan: tuple, attrs: dict, hints: dict, shared: Any, taking: dict | None
                   ) -> tuple[Any, str | None]:
        """The op's attributes (its set's values and what the node says of itself: namespace,
        metadata, onnx_node) and uid. An op with nothing of its own takes its set's shared map.
        ``taking``: where torch's scope metadata goes (the main graph's ``scope_texts``), or None."""
        _, name, original, own_ns, _, _, fn, fields = plan
        overload, doc, pairs = fields[3], fields[4], fields[7]
        if own_ns is not None and not fn:
            attrs["namespace"] = own_ns
        uid = None
        if pairs and (taking is None or not take_scope_only(pairs, name, taking)):
            uid = self._node_metadata(pairs, attrs, name, taking)
        else:  # none, or torch's scope entries alone (a dynamo export's nodes): nothing of its own
            pairs = ()
        if original is not None or doc or overload or hints:
            attrs["onnx_node"] = node_info(original, doc, overload, hints)
        elif shared is not None and not pairs and own_ns is None and not fn:
            return shared.frozen(), uid  # the set's map, frozen once
        return attrs, uid

    def _node_attributes(self, node: Any, schema: Any, scope: Scope, where: tuple, here: str, captured: list,
                         attrs: dict, hints: dict) -> Any:
        """Fill ``attrs`` and ``hints`` for the node at ``where``: its attribute set converted
        here, or found converted (``amanda.io.onnx.shared_attrs``); the set's shared entry or None."""
        set_key = None if self.in_function else self.shared.key(node, schema)
        shared = self.shared.get(set_key)
        if shared is not None:
            attrs.update(shared.values)
            hints.update(shared.hints)
            return shared

        def body(g: Any, label: str) -> Container:
            return self._body(g, scope, (*where, label), captured)

        if not read_attributes(node, schema, body, f"{self.prefix}{here}: node {where[-1]!r}: ", attrs, hints,
                               self.in_function):
            raise self.text_fault()
        return self.shared.keep(set_key, attrs, hints)

    def _undefined(self, op_type: str, name: str, value: str, where: tuple, here: str) -> FormatError:
        """The error for node ``name`` reading ``value``, which nothing defines."""
        return self.fail(f"{here}: node {name!r} ({op_type}) reads {value!r}, which no input, "
                         "initializer or node output defines", path=(*where, name),
                         expected="a defined value", found=repr(value))

    def _node_metadata(self, pairs: Any, attrs: dict, name: str, taking: dict | None) -> str | None:
        """Read a node's metadata_props (as (key, value) pairs) into ``attrs`` (its scope names
        aside); returns its uid."""
        meta, extra, uid = read_pairs(pairs, self.prefix)
        if meta and taking is not None:
            take_scope(meta, name, taking)  # the module tree holds them from now on
        if extra:
            attrs.update(extra)
        if meta:
            attrs["metadata"] = meta
        return uid

    def _call_inputs(self, fn: Any, count: int, name: str, where: tuple, here: str) -> tuple[str, ...]:
        if count > len(fn.inputs):
            raise self.fail(f"{here}: call {name!r} passes {count} inputs to function "
                            f"{fn.proto.name}, which takes {len(fn.inputs)}", path=(*where, name))
        return fn.inputs[:count]

    @staticmethod
    def _outputs(values: Any, names: tuple[str, ...], types: dict, call: bool) -> list[Port]:
        """Output ports of the values a node names (a call: of all its function's outputs, the
        ones it leaves unnamed with ``onnx_name: ''``), typed by the graph's value_info."""
        outputs = []
        for port, value in zip(names, [*values, *[""] * (len(names) - len(values))] if call else values):
            if value or call:
                outputs.append(typed_port(port, value, types.get(value)))
        return outputs

    def _body(
        self, g: Any, parent: Scope, where: tuple[str, ...], captured: list[str]
    ) -> Container:
        fields, scope = self.graph(g, parent, where)
        captured.extend(scope.captured)
        inputs = fields["inputs"] + [Port(n, attrs={"captured": True}) for n in scope.captured]
        attrs: dict[str, Any] = dict(fields["extra"])
        if self.default is not None:
            attrs["namespace"] = self.default  # a body is a value, not a child: it inherits nothing
        if fields["info"]:
            attrs["onnx"] = fields["info"]
        return self._container(fields, inputs, attrs, where)

    def _container(self, fields: dict, inputs: list, attrs: dict, where: tuple, trusted: bool = False) -> Container:
        """The graph's container; ``trusted``: its fields are the reader's (or the nesting's), valid
        by construction, so only what came from the file is checked (``amanda.io.nest.built``)."""
        try:
            if trusted:
                name = fields["name"]
                return built(fields.get("type"), name, tuple(inputs), tuple(fields["outputs"]), fields["children"],
                             fields["edges"], attrs, fields["uid"], (name,) if name else ())
            return Container(
                fields.get("type"),
                fields["name"],
                inputs=inputs,
                outputs=fields["outputs"],
                children=fields["children"],
                edges=fields["edges"],
                attrs=attrs,
                uid=fields["uid"],
            )
        except InvariantError as exc:
            raise self.fail(
                f"graph {'/'.join(where)!r} does not make a valid container: {exc}", path=where
            ) from None

    def _build(
        self,
        op_type: str,
        name: str,
        inputs: Any,
        outputs: Any,
        attrs: Any,
        uid: str | None,
        here: str,
    ) -> Container:
        try:  # attrs: a dict, or a map freeze_attrs made (shared between ops)
            return built(op_type, name, tuple(inputs), tuple(outputs), (), (), attrs, uid, (name,))
        except InvariantError as exc:
            raise self.fail(
                f"{here}: node {name!r} ({op_type}) does not make a valid op: {exc}", path=name
            ) from None

