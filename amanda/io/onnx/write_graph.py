"""Writing one graph (the top one or an If/Loop/Scan body) of an ONNX export.

Value names come from the output ports' ``onnx_name`` (else ``<op path>:<port>``), made unique
across the graph and every enclosing graph, since ONNX forbids shadowing an outer name. The
graph's own output names win; an output whose value already has a name (an input, a second
output of one value) is written through an ``Identity`` node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from amanda.containers.container import Container
from amanda.containers.edge import CONTROL, SELF
from amanda.containers.flatten import flatten
from amanda.containers.records import Path
from amanda.containers.refs import AttrRef
from amanda.errors import AmandaError, FormatError
from amanda.io.onnx.attrs import fill_attr, infer_attr_type
from amanda.io.onnx.hierarchy_export import LeafScope, scoped_metadata
from amanda.io.onnx.metadata import write_metadata
from amanda.io.onnx.ports import port_positions
from amanda.io.onnx.values import array_to_tensor, attrs_to_type, value_to_sparse

__all__ = ["BOOKKEEPING_ATTRS", "GraphWriter", "Names", "is_initializer", "where_of"]

BOOKKEEPING_ATTRS = frozenset({"namespace", "initializer", "metadata", "onnx_node", "onnx", "onnx_function"})
"""Op attributes that describe the ONNX encoding, not ONNX attributes."""
_TENSOR_KEYS = BOOKKEEPING_ATTRS | {"value", "sparse_value"}  # what an initializer holds itself


class Names:
    """Value names of one graph, unique in it and in every enclosing graph (ONNX forbids
    shadowing an outer name)."""

    __slots__ = ("parent", "taken")

    def __init__(self, parent: Names | None = None) -> None:
        self.taken: set[str] = set()
        self.parent = parent

    def is_taken(self, name: str) -> bool:
        scope: Names | None = self
        while scope is not None:
            if name in scope.taken:
                return True
            scope = scope.parent
        return False

    def claim(self, name: str) -> str:
        candidate, n = name, 0
        while self.is_taken(candidate):
            n += 1
            candidate = f"{name}_{n}"
        self.taken.add(candidate)
        return candidate


def where_of(path: Path) -> str:
    return "/".join(str(p) for p in path) or "<root>"


def is_initializer(op: Container) -> bool:
    attrs = op.attrs
    return (
        op.type == "Constant"
        and attrs.get("initializer") is True
        and ("value" in attrs or "sparse_value" in attrs)
    )


class GraphWriter:
    """Writes graphs; the exporter supplies ``onnx``, ``schemas``, ``spaces`` (leaf namespaces
    per container), ``fallback`` (the namespace of ops that name none), ``node_names``,
    ``node_paths`` (node name -> op path below the top graph) and ``_opset(namespace, path)``."""

    onnx: Any
    schemas: Any
    spaces: dict
    fallback: str
    node_names: set
    node_paths: dict
    positions: dict  # (schema id, side, port names) -> ONNX positions
    in_function = False  # writing a function body: attribute references stay references
    scopes: Mapping[tuple, LeafScope] = {}  # the main graph's leaves in module containers

    def fail(self, message: str, path: Any = None) -> FormatError:
        return FormatError(message, path=path)

    def _mapping(self, attrs: Mapping[str, Any], key: str, path: Any) -> Mapping[str, Any]:
        """The bookkeeping attribute ``key`` (``onnx_node``, ``metadata``), which must be a
        mapping: {} when absent, a FormatError naming the op otherwise."""
        value = attrs.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(f"op {where_of(path)}: expected its {key} attribute to be a mapping, "
                            f"found {type(value).__name__}", path)
        return value

    def _opset(self, ns: str, path: Path) -> tuple[str, int]:
        raise NotImplementedError

    def _scope(self, path: Path, where: tuple) -> LeafScope | None:
        """Where the leaf at ``path`` of the main graph sits in the module tree, if it does."""
        return self.scopes.get(path) if self.scopes and not self.in_function and len(where) == 1 else None

    def graph(self, c: Container, names: Names, captured: Mapping[str, str], where: tuple, top: bool,
              target: Any = None) -> Any:
        g = target if target is not None else self.onnx.GraphProto()
        g.name = c.name or (where[-1] if where else "graph")
        spaces = self.spaces.get(id(c)) or {}
        if c.children:
            flat = flatten(c)
            ops, order = flat.ops, self._order(flat)
            sources = dict(flat.outputs)
            producers = flat.producers
        else:  # a graph without ops: only boundary edges (flatten would see an op)
            ops, order, producers = {}, [], None
            sources = {e[1][1]: e[0] for e in c.edges if e[1][0] is SELF and e[1][1] != CONTROL}
        value_of: dict[tuple, str] = {}
        self._inputs(c, g, names, captured, value_of, where, top)
        identities = self._outputs(c, g, names, sources, value_of, where, top)
        inits = {path for path in order if is_initializer(ops[path])}
        self._name_values(ops, order, value_of, names)
        for path in order:
            op = ops[path]
            if path in inits:
                self._initializer(
                    g, op, value_of[(path, op.outputs[0].name)] if op.outputs else where_of(path),
                    self._scope(path, where),
                )
            else:
                entry = spaces.get(path)
                if entry is None:  # pragma: no cover - every leaf was collected
                    entry = (None, op, dict(op.attrs.items()))
                self._node(g, op, path, entry[0], entry[2], producers, value_of, names, where)
            self._value_info(g, op, path, value_of, path in inits)
        if identities:
            self._opset(self.fallback, (*where, "Identity"))  # Identity needs the default domain
        for src, dst in identities:
            node = g.node.add(op_type="Identity", name=self._node_name(None, (f"{dst}_identity",)))
            node.input.append(src)
            node.output.append(dst)
        self._graph_info(g, c, top)
        return g

    @staticmethod
    def _name_values(ops: Mapping, order: list, value_of: dict[tuple, str], names: Names) -> None:
        """Name (in ``value_of``) each op output the graph's outputs did not already name."""
        for path in order:
            for port in ops[path].outputs:
                if (path, port.name) not in value_of:
                    name = port.attrs.get("onnx_name")
                    if name == "":  # an output the call leaves unnamed
                        value_of[(path, port.name)] = ""
                        continue
                    value_of[(path, port.name)] = names.claim(name or f"{where_of(path)}:{port.name}")

    @staticmethod
    def _order(flat: Any) -> list:
        paths = list(flat.ops)
        position = {p: i for i, p in enumerate(paths)}
        for edge in flat.edges:
            a, b = edge[0][0], edge[1][0]
            if a is not SELF and b is not SELF and position[a] >= position[b]:
                return list(flat.topological_order())
        return paths

    def _inputs(
        self,
        c: Container,
        g: Any,
        names: Names,
        captured: Mapping[str, str],
        value_of: dict,
        where: tuple,
        top: bool,
    ) -> None:
        for port in c.inputs:
            if port.attrs.get("captured"):
                outer = captured.get(port.name)
                if outer is None:
                    if not names.is_taken(port.name):
                        raise self.fail(
                            f"body {where_of(where)} reads captured value {port.name!r}, which "
                            "no enclosing graph defines",
                            where,
                        )
                    outer = port.name
                value_of[(SELF, port.name)] = outer
                continue
            name = names.claim(port.name)
            value_of[(SELF, port.name)] = name
            vi = g.input.add(name=name)
            self._typed(vi, port.attrs, top, f"input port {port.name!r} of {where_of(where)}")

    def _typed(self, vi: Any, attrs: Mapping[str, Any], required: bool, what: str) -> bool:
        try:
            proto = attrs_to_type(attrs)
        except (AmandaError, KeyError, TypeError, ValueError) as exc:  # ValueError: protobuf's range checks
            raise self.fail(f"{what} has a type ONNX cannot hold: {exc}") from None
        if attrs.get("doc_string"):
            vi.doc_string = attrs["doc_string"]
        if proto is None:
            if required:
                raise self.fail(
                    f"{what} has no dtype; ONNX graph inputs need one "
                    "(give the port attrs such as {dtype: float32, shape: [1, 4]})"
                )
            return False
        vi.type.CopyFrom(proto)
        return True

    def _outputs(
        self,
        c: Container,
        g: Any,
        names: Names,
        sources: Mapping,
        value_of: dict,
        where: tuple,
        top: bool,
    ) -> list[tuple[Any, str]]:
        identities: list[tuple[Any, str]] = []
        for port in c.outputs:
            src = sources.get(port.name)
            if src is None:
                raise self.fail(
                    f"output port {port.name!r} of {where_of(where)} has no producer", where
                )
            key = (src[0], src[1])
            if src[0] is SELF:
                inner = value_of[key]
                if top and inner == port.name:
                    name = inner
                else:
                    name = self._claim_output(names, port.name, where, top)
                    identities.append((key, name))
            elif key in value_of:
                name = self._claim_output(names, port.name, where, top)
                identities.append((key, name))
            else:
                name = self._claim_output(names, port.name, where, top)
                value_of[key] = name
            vi = g.output.add(name=name)
            self._typed(vi, port.attrs, False, f"output port {port.name!r}")
        return [(value_of[key], name) for key, name in identities]

    def _claim_output(self, names: Names, name: str, where: tuple, top: bool) -> str:
        if top and names.is_taken(name):
            raise self.fail(
                f"output port {name!r} of {where_of(where)} has the name of an input but "
                "another value; ONNX names values, so rename one of the ports",
                where,
            )
        return names.claim(name)

    def _initializer(self, g: Any, op: Container, name: str, scope: LeafScope | None = None) -> None:
        attrs = op.attrs
        try:
            if "sparse_value" in attrs:
                sparse = value_to_sparse(attrs["sparse_value"], name)
                g.sparse_initializer.append(sparse)
                tensor = g.sparse_initializer[-1].values
            else:
                g.initializer.append(array_to_tensor(attrs["value"], name))
                tensor = g.initializer[-1]
        except (TypeError, ValueError) as exc:
            raise self.fail(f"initializer {op.name!r} cannot be written: {exc}", op.name) from None
        info = self._mapping(attrs, "onnx_node", (op.name,))
        if info.get("doc_string"):
            tensor.doc_string = info["doc_string"]
        extra = {k: v for k, v in attrs.items() if k not in _TENSOR_KEYS}
        write_metadata(tensor.metadata_props, scoped_metadata(self._mapping(attrs, "metadata", (op.name,)), scope), op.uid, extra)
        if info.get("graph_input"):
            vi = g.input.add(name=name)
            vi.type.tensor_type.elem_type = tensor.data_type
            vi.type.tensor_type.shape.SetInParent()
            for dim in tensor.dims:
                vi.type.tensor_type.shape.dim.add(dim_value=dim)

    def _node(self, g: Any, op: Container, path: Path, ns: str | None, own: dict[str, Any], producers: Any,
              value_of: dict, names: Names, where: tuple) -> None:
        if op.type is None:
            raise self.fail(f"op {where_of(where + path)} has no type", where + path)
        ns = ns or self.fallback
        function = own.get("onnx_function")  # a call of a model-local function (onnx_calls)
        domain = function["domain"] if function is not None else self._opset(ns, where + path)[0]
        schema = self.schemas.get(ns, op.type) if function is None else None
        info = self._mapping(own, "onnx_node", where + path)
        scope = self._scope(path, where)
        if scope is not None and scope.name is not None:  # a scope-path name, as TorchScript's
            node = g.node.add(op_type=op.type, name=self._node_name(None, path, scope.name))
        else:
            node = g.node.add(op_type=op.type, name=self._node_name(info.get("name"), path))
        self.node_paths.setdefault(node.name, (where + path)[1:])
        if domain:
            node.domain = domain
        if info.get("overload"):
            node.overload = info["overload"]
        if info.get("doc_string"):
            node.doc_string = info["doc_string"]
        captured: dict[str, str] = {}
        ins = self._node_inputs(op, path, producers, value_of, captured, where)
        node.input.extend(self._positional(schema, "input", ins))
        outs = [(p.name, value_of[(path, p.name)]) for p in op.outputs]
        # a call names every output of its function, "" for the unused ones (as ONNX asks)
        node.output.extend(self._positional(schema, "output", outs) if function is None else [v for _, v in outs])
        self._attributes(node, op, own, path, schema, info, captured, names, where)

    def _node_inputs(self, op: Container, path: Path, producers: Any, value_of: dict, captured: dict[str, str],
                     where: tuple) -> list[tuple[str, str]]:
        """``(port, value)`` for each input of ``op`` (its captures go to ``captured`` instead)."""
        ins = []
        for port in op.inputs:
            fed = [e for e in producers(path, port.name) if e[0][1] != CONTROL] if producers else []
            if len(fed) > 1:
                raise self.fail(
                    f"input {port.name!r} of op {where_of(where + path)} has {len(fed)} producers "
                    "(one per phase); bind the model to a phase first (amanda.bind)",
                    where + path,
                )
            value = value_of[(fed[0][0][0], fed[0][0][1])] if fed else ""
            port_attrs = port.attrs
            if port_attrs and port_attrs.get("captured"):
                if value:
                    captured[port_attrs.get("onnx_name", port.name)] = value
                continue
            ins.append((port.name, value))
        return ins

    def _node_name(self, original: str | None, path: Path, scoped: str | None = None) -> str:
        """The name the op had in its ONNX file, else its scope-path name or its path, made
        unique."""
        if original is not None:
            self.node_names.add(original)
            return original
        name = candidate = scoped or where_of(path)
        n = 0
        while candidate in self.node_names:
            n += 1
            candidate = f"{name}_{n}"
        self.node_names.add(candidate)
        return candidate

    def _positional(self, schema: Any, side: str, pairs: list[tuple[str, str]]) -> list[str]:
        key = (id(schema), side, tuple(name for name, _ in pairs))
        positions = self.positions.get(key)
        if positions is None:
            formal = (
                None if schema is None else (schema.inputs if side == "input" else schema.outputs)
            )
            positions = self.positions[key] = port_positions(formal, key[2], side)
        values = [""] * (max(positions) + 1 if positions else 0)
        for position, (_, value) in zip(positions, pairs):
            values[position] = value
        while values and not values[-1]:
            values.pop()
        return values

    def _attributes(
        self,
        node: Any,
        op: Container,
        own: dict[str, Any],
        path: Path,
        schema: Any,
        info: Mapping,
        captured: Mapping[str, str],
        names: Names,
        where: tuple,
    ) -> None:
        hints = info.get("attr_types") or {}
        known = schema.attrs if schema is not None else None
        extra: dict[str, Any] = {}
        refs = sorted(k for k, v in own.items() if isinstance(v, AttrRef))
        if refs and not self.in_function:
            raise self.fail(f"op {where_of(where + path)} ({op.type}) refers to attribute(s) of a function call "
                            f"({', '.join(refs)}) outside any function body", where + path)
        for key in refs:
            attr = node.attribute.add(name=key, ref_attr_name=own[key].name)
            attr.type = self.onnx.AttributeProto.AttributeType.Value((own[key].type or "undefined").upper())

        def body(container: Container, label: str) -> Any:
            return self.graph(container, Names(names), captured, where + path + (label,), False)

        for key in sorted(own):
            value = own[key]
            if key in BOOKKEEPING_ATTRS or value is None or isinstance(value, AttrRef):
                continue
            kind = hints.get(key)
            if kind is None and known is not None:
                found = known.get(key)
                if found is None:
                    extra[key] = value  # not an attribute of this op type: keep it as metadata
                    continue
                kind = found.type
            kind = kind or infer_attr_type(value)
            try:
                if kind is None:
                    raise TypeError(
                        f"cannot tell the ONNX attribute type of a {type(value).__name__}"
                    )
                fill_attr(node.attribute.add(), key, value, kind, body)
            except (TypeError, ValueError) as exc:
                raise self.fail(
                    f"attribute {key!r} of op {where_of(where + path)} ({op.type}) cannot be "
                    f"written as ONNX {kind or 'attribute'}: {exc}",
                    where + path,
                ) from None
        metadata = scoped_metadata(self._mapping(own, "metadata", where + path), self._scope(path, where))
        write_metadata(node.metadata_props, metadata, op.uid, extra)

    def _value_info(
        self, g: Any, op: Container, path: Path, value_of: dict, initializer: bool
    ) -> None:
        if initializer:
            return
        for port in op.outputs:
            attrs = port.attrs
            if len(attrs) == 1 and "onnx_name" in attrs:
                continue  # the usual case, answered without three lookups
            if "dtype" in attrs or "shape" in attrs or "type" in attrs:
                vi = g.value_info.add(name=value_of[(path, port.name)])
                self._typed(vi, attrs, False, f"output port {port.name!r} of {where_of(path)}")

    def _graph_info(self, g: Any, c: Container, top: bool) -> None:
        info = c.attrs.get("onnx") or {}
        prefix = "graph_" if top else ""
        if info.get(prefix + "doc_string"):
            g.doc_string = info[prefix + "doc_string"]
        for blob in info.get(prefix + "quantization_annotation") or ():
            g.quantization_annotation.add().ParseFromString(blob)
        extra = {} if top else {k: v for k, v in c.attrs.items() if k not in BOOKKEEPING_ATTRS}
        write_metadata(
            g.metadata_props, info.get(prefix + "metadata_props"), None if top else c.uid, extra
        )
