"""Model-local functions on import: each call becomes a container whose children are the body.

A ``FunctionProto`` is read once, and every call shares the body: the call containers'
``children`` and ``edges`` are the very same objects, so a function called a thousand times
costs one body plus a few ports per call. An attribute of a body op that refers to a function
attribute (``ref_attr_name``) holds an :class:`~amanda.containers.refs.AttrRef`; the executor,
type inference and ``validate`` resolve it with each call's values
(:func:`~amanda.containers.refs.resolve_references`), and export writes it back as a reference.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from amanda.containers.container import Container
from amanda.containers.edge import Port
from amanda.errors import InvariantError
from amanda.io.onnx.attrs import ATTR_TYPE_NAMES, attr_to_value
from amanda.io.onnx.calls import FUNCTION_ATTR, with_body
from amanda.io.onnx.metadata import read_metadata
from amanda.io.onnx.ports import namespace_of_domain
from amanda.io.onnx.read_graph import GraphReader

__all__ = ["Function", "FunctionReader"]


class Function(NamedTuple):
    """One ``FunctionProto`` as the importer needs it."""

    proto: Any
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    graph: Any  # a GraphProto holding the body's nodes, inputs and outputs (untyped)
    opsets: dict[str, str]  # domain -> namespace, for the body
    names: frozenset[str]  # the names the body's ops get (a call may not be named like one)
    info: dict[str, Any]  # the call containers' ``onnx_function`` attr


def _op_names(proto: Any) -> frozenset[str]:
    """The op names the graph reader gives the body's nodes (its renaming rule, replayed)."""
    taken = {proto.name}
    for index, node in enumerate(proto.node):
        name = node.name
        if not name or name in taken:
            name = f"{node.op_type}_{index}"
            while name in taken:
                name = f"{name}_"
        taken.add(name)
    return frozenset(taken - {proto.name})


class FunctionReader(GraphReader):
    """Adds function calls to a graph reader; the importer calls :meth:`read_functions`."""

    def read_functions(self, model: Any) -> None:
        import onnx

        self.functions: dict[tuple[str, str, str], Function] = {}
        self.bodies: dict[tuple[str, str, str], Container] = {}
        self.called: set[tuple[str, str, str]] = set()
        self.active: list[tuple[str, str, str]] = []
        model_versions = {("" if e.domain == "ai.onnx" else e.domain): e.version for e in model.opset_import}
        for index, proto in enumerate(model.functions):
            key = (proto.domain, proto.name, proto.overload)
            where = f"functions[{index}]"
            if key in self.functions:
                raise self.fail(f"{where}: function {proto.domain}:{proto.name} is defined twice", path=where)
            opsets = dict(self.opsets)
            for entry in proto.opset_import:
                domain = "" if entry.domain == "ai.onnx" else entry.domain
                opsets[domain] = namespace_of_domain(domain, entry.version)
            graph = onnx.GraphProto(name=proto.name, node=proto.node, value_info=proto.value_info)
            graph.input.extend(onnx.ValueInfoProto(name=n) for n in proto.input)
            graph.output.extend(onnx.ValueInfoProto(name=n) for n in proto.output)
            defaults = {a.name: a for a in proto.attribute_proto}
            info: dict[str, Any] = {"domain": proto.domain}
            if proto.domain in model_versions:
                info["version"] = int(model_versions[proto.domain])
            if proto.overload:
                info["overload"] = proto.overload
            info["opset_import"] = {e.domain: int(e.version) for e in proto.opset_import}
            if proto.attribute:
                info["attributes"] = tuple(proto.attribute)
            if defaults:
                prefix = f"{self.prefix}{where}: "
                info["defaults"] = {n: attr_to_value(a, None, prefix)[0] for n, a in defaults.items()}
                info["default_types"] = {n: ATTR_TYPE_NAMES[a.type] for n, a in defaults.items()}
            if proto.doc_string:
                info["doc_string"] = proto.doc_string
            meta, _, _ = read_metadata(proto.metadata_props, self.prefix)
            if meta:
                info["metadata_props"] = meta
            self.functions[key] = Function(
                proto, tuple(proto.input), tuple(proto.output), graph, opsets, _op_names(graph), info,
            )

    def uncalled(self) -> tuple[bytes, ...]:
        """The functions no call uses, serialized (kept for export as they were)."""
        return tuple(f.proto.SerializeToString() for k, f in self.functions.items() if k not in self.called)

    def function_of(self, domain: str, op_type: str, overload: str) -> Function | None:
        return self.functions.get((domain, op_type, overload)) if self.functions else None

    def call(
        self, fn: Function, name: str, inputs: list, outputs: list, attrs: dict, uid: str | None, here: str,
    ) -> Container:
        """The call container: checked ports and attributes, the body shared with every call."""
        proto = fn.proto
        key = (proto.domain, proto.name, proto.overload)
        body = self.bodies.get(key)
        if body is None:
            body = self.bodies[key] = self._read_body(fn, key, here)
        self.called.add(key)
        own = fn.opsets.get("")
        if own is not None and own != self.default:
            attrs["namespace"] = own  # the body's default opset, when it is not the caller's
        attrs[FUNCTION_ATTR] = fn.info
        ports = [*inputs, *(Port(n) for n in fn.inputs[len(inputs):])]  # unfed inputs too
        return with_body(self._build(proto.name, name, ports, outputs, attrs, uid, here), body)

    def _read_body(self, fn: Function, key: tuple, here: str) -> Container:
        if key in self.active:
            chain = " -> ".join(k[1] for k in (*self.active, key))
            raise self.fail(f"{here}: model-local functions call each other in a cycle ({chain})",
                            path=key[1], expected="no recursion", found=chain)
        saved = (self.opsets, self.default, self.in_function)
        self.opsets, self.default, self.in_function = fn.opsets, fn.opsets.get(""), True
        self.active.append(key)
        try:
            fields, _ = self.graph(fn.graph, None, (f"function {key[0]}:{key[1]}",))
        finally:
            self.active.pop()
            self.opsets, self.default, self.in_function = saved
        try:
            return Container(
                key[1], None, inputs=[Port(n) for n in fn.inputs], outputs=[Port(n) for n in fn.outputs],
                children=fields["children"], edges=fields["edges"],
            )
        except InvariantError as exc:
            raise self.fail(f"function {key[0]}:{key[1]} does not make a valid container: {exc}",
                            path=key[1]) from None
