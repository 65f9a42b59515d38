"""A container -> a ``GraphDef`` (the inverse of :mod:`.read_graph`).

Each leaf op (and each call container, written as one call node) becomes a ``NodeDef`` named by
its TensorFlow name: ``tf_node.name`` where import kept one, else its container's ``scope``
attribute (or the path of container names) joined to its own name by ``/``. Data inputs are
written in the order of the op's input ports, from the effective view (``effective_edges``, which
allows the cycles of lowered loops), so edits and wrappers are written as their result; control
edges become ``^name`` inputs. Attribute
values are written to the ``AttrValue`` field import read them from (``tf_node.kinds``), else
the one the vocabulary's type says, else one guessed from the value. Function bodies held in
``While``/``If`` attributes and the bodies of call containers are written to the library once
per function name; ``tf_function`` gives each its signature and attributes back.
"""

from __future__ import annotations

from typing import Any

from amanda.containers.container import Container
from amanda.containers.edge import CONTROL, SELF
from amanda.containers.flatten import effective_edges
from amanda.errors import FormatError
from amanda.io.tensorflow.functions import FUNCTION_ATTR, is_call
from amanda.io.tensorflow.names import tf_names
from amanda.io.tensorflow.op_args import op_args, split_port
from amanda.io.tensorflow.protos import message
from amanda.io.tensorflow.read_graph import GRAPH_ATTR, PRODUCERS
from amanda.io.tensorflow.read_nodes import CALL_TYPES, INITIAL_VALUE, INITIAL_VALUE_ATTR, NODE_ATTR, schema_kind
from amanda.io.tensorflow.tensors import attr_to_proto, guess_kind

__all__ = ["to_graph_def"]


def _collapsed(node: Container) -> Container:
    """``node`` with every call container inside it (not ``node`` itself) replaced by a leaf of
    the same name, type, ports, attributes and uid, so that the effective view stops at calls."""
    if not node.children:
        return node
    kids = [Container(c.type, c.name, inputs=c.inputs, outputs=c.outputs, attrs=c._attrs, uid=c.uid)
            if is_call(c) else _collapsed(c) for c in node.children]
    if all(a is b for a, b in zip(kids, node.children, strict=True)):
        return node
    return Container(node.type, node.name, inputs=node.inputs, outputs=node.outputs, children=kids,
                     edges=node.edges, tombstones=node.tombstones, attrs=node._attrs, uid=node.uid)


class _Writer:
    """Writes nodes and gathers the functions they use."""

    def __init__(self, namespace: Any) -> None:
        self.namespace = namespace
        self.functions: dict[str, Any] = {}  # name -> FunctionDef
        self.bodies: dict[str, Container] = {}

    def nodes(self, root: Container, where: str, args: dict[str, str] | None = None) -> tuple[list, dict, list]:
        """(NodeDefs, source text by SELF output port, control-output node names) of ``root``;
        ``args`` maps a body's input ports to its argument names (None: a graph)."""
        names = tf_names(root)
        # the effective view before ordering: a lowered loop (NextIteration -> Merge) is a cycle
        ops, edges = effective_edges(_collapsed(root))
        sources: dict[tuple, Any] = {}
        controls: dict[tuple, list[str]] = {}
        rets: dict[str, str] = {}
        control_rets: list[str] = []
        for edge in edges:
            src, dst = edge.src, edge.dst
            if src.port == CONTROL or dst.port == CONTROL:
                if src.op is SELF:
                    continue  # the container's own control input orders nothing inside
                if dst.op is SELF:
                    control_rets.append(names[src.op][0])
                else:
                    controls.setdefault(dst.op, []).append("^" + names[src.op][0])
                continue
            text = self.source(src, names, args, where)
            if dst.op is SELF:
                rets[dst.port] = text
            else:
                sources[(dst.op, dst.port)] = text
        out = []
        for path in ops:
            name, op = names[path]
            node = self.node(name, op, where)
            for port in op.input_names:
                source = sources.get((path, port))
                if source is None:
                    raise FormatError.at(f"{where}/{name}:{port}", "an edge into every input port", "none")
                node.input.append(source)
            node.input.extend(dict.fromkeys(controls.get(path, ())))
            out.append(node)
        return out, rets, control_rets

    def source(self, src: Any, names: dict, args: dict[str, str] | None, where: str) -> str:
        if src.op is SELF:
            if args is None:
                raise FormatError.at(f"{where}:{src.port}", "no graph inputs (a GraphDef feeds "
                                     "Placeholder ops)", f"input port {src.port!r} in use")
            return args.get(src.port, src.port)
        name, op = names[src.op]
        if args is None:
            index = op.output_names.index(src.port)
            return name if index == 0 else f"{name}:{index}"
        arg, index = split_port(op_args(self.namespace, op.type) if op.type not in CALL_TYPES
                                else op_args(None, ""), src.port)
        return f"{name}:{arg}:{index}"

    def node(self, name: str, op: Container, where: str) -> Any:
        proto = message("tensorflow.NodeDef")(name=name, op=op.type or "")
        entry = op._attrs.get(NODE_ATTR) or {}
        if entry.get("device"):
            proto.device = entry["device"]
        kinds = entry.get("kinds") or {}
        schema = self.namespace.schema(op.type) if op.type in self.namespace else None
        attrs = {k: v for k, v in op._attrs.items() if k not in (NODE_ATTR, FUNCTION_ATTR, INITIAL_VALUE)}
        attrs.update(entry.get("attr") or {})
        if INITIAL_VALUE in op._attrs:
            attrs[INITIAL_VALUE_ATTR] = op._attrs[INITIAL_VALUE]
            kinds = {**kinds, INITIAL_VALUE_ATTR: "tensor"}
        for key, value in attrs.items():
            if isinstance(value, Container):
                value = self.function(value, str(value.name), f"{where}/{name}.attr.{key}")
            elif key == "f" and is_call(op):
                self.function(op.children[0], value if isinstance(value, str) else value["name"], f"{where}/{name}")
            proto.attr[key].CopyFrom(attr_to_proto(value, _kind(key, value, kinds, schema),
                                                   f"{where}/{name}.attr.{key}"))
        return proto

    def function(self, body: Container, name: str, where: str) -> str:
        """Write ``body`` (a function container or a call) to the library as ``name``."""
        seen = self.bodies.get(name)
        if seen is not None:
            if seen.children != body.children or seen.edges != body.edges:
                raise FormatError.at(where, f"one body for function {name!r}", "two different bodies")
            return name
        info = body._attrs.get(FUNCTION_ATTR)
        if info is None:
            raise FormatError.at(where, f"a function container (with a {FUNCTION_ATTR!r} attribute)",
                                 f"container {body.name!r} without one")
        self.bodies[name] = body
        fn = message("tensorflow.FunctionDef").FromString(info["extra"])
        fn.signature.ParseFromString(info["signature"])
        fn.signature.name = name
        arg_names = [a.name for a in fn.signature.input_arg]
        out_names = [a.name for a in fn.signature.output_arg]
        if len(arg_names) != len(body.inputs) or len(out_names) != len(body.outputs):
            raise FormatError.at(where, f"the ports of function {name!r}'s signature "
                                 f"({len(arg_names)} in, {len(out_names)} out)",
                                 f"{len(body.inputs)} in, {len(body.outputs)} out")
        self.functions[name] = fn  # before the body: a body using this function finds it written
        nodes, rets, control_rets = self.nodes(body, f"{where}/{name}",
                                               dict(zip(body.input_names, arg_names, strict=True)))
        fn.node_def.extend(nodes)
        for port, arg in zip(body.output_names, out_names, strict=True):
            if port not in rets:
                raise FormatError.at(f"{where}/{name}:{port}", "an edge into every output port", "none")
            fn.ret[arg] = rets[port]
        for node_name in control_rets:
            fn.control_ret[node_name] = node_name
        return name


def to_graph_def(graph: Container) -> Any:
    """The ``GraphDef`` message of ``graph`` (see the module's docstring)."""
    from amanda.namespaces.namespace import namespace

    vocabulary = graph.namespace or "amanda/tensorflow/2.21.0"
    if not str(vocabulary).startswith("amanda/tensorflow"):
        raise FormatError.at("namespace", "a graph in amanda/tensorflow/<version> (convert it first)",
                             repr(vocabulary))
    ns = namespace(vocabulary)
    writer = _Writer(ns)
    nodes, _, _ = writer.nodes(graph, graph.name or "graph")
    out = message("tensorflow.GraphDef")()
    out.node.extend(nodes)
    out.library.function.extend(writer.functions.values())
    info = graph._attrs.get(GRAPH_ATTR) or {}
    out.versions.producer = info.get("producer", PRODUCERS.get(ns.name, max(PRODUCERS.values())))
    out.versions.min_consumer = info.get("min_consumer", 0)
    out.versions.bad_consumers.extend(info.get("bad_consumers", ()))
    return out


def _kind(key: str, value: Any, kinds: dict, schema: Any) -> str:
    """The TensorFlow attribute kind of ``value``: as imported, else as the schema says, else
    guessed from the value."""
    kind = kinds.get(key)
    if kind == "list" and value:  # an empty list at import, given items since
        kind = None
    typed = schema.attrs.get(key) if schema is not None else None
    return kind or (schema_kind(typed.type) if typed is not None else None) or guess_kind(value)
