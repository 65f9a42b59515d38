"""``NodeDef`` lists (a GraphDef's, or a function body's) -> flat leaf ops and edges.

Input syntax: in a graph ``x`` or ``x:<k>`` (the k-th flat output of node ``x``); in a function
body ``x`` (an argument of the function) or ``node:<output arg>:<index>``; ``^x`` anywhere is a
control input, an edge between the control ports (``-1``). Ports are named by
:mod:`amanda.io.tensorflow.op_args`. An op's own attributes are the NodeDef's attrs that do not
start with ``_``; the rest, the device, the original name where the tree cannot say it (see
``docs/tensorflow.md``, "Names") and the ``AttrValue`` field of attrs the vocabulary does not
type go into one attribute, ``tf_node``. Function-valued attrs of ``While``/``If`` and their
stateless forms hold the body containers; ``PartitionedCall``/``StatefulPartitionedCall`` nodes
become call containers whose children are the function's body (:mod:`.functions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Endpoint, Port
from amanda.errors import FormatError, suggest
from amanda.io.tensorflow.op_args import OpArgs, op_args
from amanda.io.tensorflow.tensors import attr_from_proto

__all__ = ["BODY_ATTRS", "CALL_TYPES", "INITIAL_VALUE", "INITIAL_VALUE_ATTR", "NODE_ATTR", "Flat", "read_nodes",
           "schema_kind", "scope_prefixes"]

NODE_ATTR = "tf_node"
INITIAL_VALUE = "initial_value"  # a variable's value from its checkpoint (an own attribute)
INITIAL_VALUE_ATTR = "_amanda_initial_value"  # where a GraphDef keeps it (TensorFlow ignores `_` attrs)
#: attrs holding a function that runs as a body of the op (kept as containers in the attr)
BODY_ATTRS = {"While": ("cond", "body"), "StatelessWhile": ("cond", "body"),
              "If": ("then_branch", "else_branch"), "StatelessIf": ("then_branch", "else_branch")}
#: op types that call a function: call containers holding its body
CALL_TYPES = ("PartitionedCall", "StatefulPartitionedCall")
_CALL_ARGS = OpArgs((("args", True),), (("output", True),))
_SCHEMA_KINDS = {"dtype": "type", "shape": "shape", "tensor": "tensor", "func": "func", "int": "i",
                 "float": "f", "bool": "b", "string": "s"}


def schema_kind(amanda_type: str) -> str | None:
    """The ``AttrValue`` field of an attribute the vocabulary types ``amanda_type``.

    >>> schema_kind("dtype"), schema_kind("ints"), schema_kind("any")
    ('type', 'list(i)', None)
    """
    if amanda_type in _SCHEMA_KINDS:
        return _SCHEMA_KINDS[amanda_type]
    if amanda_type[:-1] in _SCHEMA_KINDS:
        return f"list({_SCHEMA_KINDS[amanda_type[:-1]]})"
    return None


class Flat(NamedTuple):
    """One graph's ops (in file order), its data edges, and its control edges (by op name)."""

    ops: list[Container]
    edges: list[Edge]
    controls: list[tuple[str | None, str | None]]  # (source op, target op); None is SELF


class _Ref(NamedTuple):
    node: str | None  # None: an argument of the function
    key: Any  # graph: flat output index; body: (output arg, index); argument: (name, index)


def scope_prefixes(names: Sequence[str]) -> set[str]:
    """Every scope a name lies in (``a/b/c`` -> ``a``, ``a/b``).

    >>> sorted(scope_prefixes(["dense/MatMul", "dense/MatMul/ReadVariableOp"]))
    ['dense', 'dense/MatMul']
    """
    found: set[str] = set()
    for name in names:
        cut = name.rfind("/")
        while cut > 0:
            prefix = name[:cut]
            if prefix in found:
                break
            found.add(prefix)
            cut = name.rfind("/", 0, cut)
    return found


class _Reader:
    def __init__(self, nodes: Sequence[Any], namespace: Any, where: str, library: Any,
                 args: Sequence[str] | None, arg_ports: Sequence[str] | None) -> None:
        self.nodes, self.namespace, self.where, self.library = nodes, namespace, where, library
        self.body = args is not None
        self.args = list(args or ())
        self.arg_ports = dict(zip(self.args, arg_ports or self.args, strict=True))
        self.names: dict[str, Any] = {}
        for i, node in enumerate(nodes):
            if not node.name:
                raise FormatError.at(f"{where}.node[{i}].name", "a node name", "''")
            if node.name in self.names:
                raise FormatError.at(f"{where}/{node.name}", "unique node names", "a second node of this name")
            self.names[node.name] = node
        self.used: dict[str, set] = {}

    def parse(self, text: str, node: str, i: int) -> _Ref | None:
        """The data source an input string names (None for a control input)."""
        where = f"{self.where}/{node}.input[{i}]"
        if text.startswith("^"):
            self._known(text[1:], where)
            return None
        parts = text.split(":")
        if self.body:
            if len(parts) == 3 and parts[2].isdigit():
                self._known(parts[0], where)
                return _Ref(parts[0], (parts[1], int(parts[2])))
            if len(parts) <= 2 and parts[0] in self.arg_ports:
                index = int(parts[1]) if len(parts) == 2 and parts[1].isdigit() else 0
                return _Ref(None, (parts[0], index))
            raise FormatError.at(where, f"a function argument ({', '.join(self.args) or 'none'}) or "
                                 "node:output:index", repr(text), suggest(parts[0], [*self.args, *self.names]))
        if len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
            raise FormatError.at(where, "node or node:index", repr(text))
        self._known(parts[0], where)
        return _Ref(parts[0], int(parts[1]) if len(parts) == 2 else 0)

    def _known(self, name: str, where: str) -> None:
        if name not in self.names:
            raise FormatError.at(where, "the name of a node of this graph", repr(name),
                                 suggest(name, self.names))

    def port(self, args: OpArgs, ref: _Ref, names: list[str]) -> str:
        """The output port name a reference reads."""
        if not self.body:
            return names[ref.key]
        arg, index = ref.key
        for name, listed in args.outputs:
            if name == arg and not listed and index:
                raise FormatError.at(f"{self.where}/{ref.node}:{arg}", f"index 0 of the single output {arg!r}",
                                     str(index))
            if name == arg:
                return f"{arg}_{index}" if listed else arg
        if args.known:
            raise FormatError.at(f"{self.where}/{ref.node}", f"an output arg of {self.names[str(ref.node)].op} "
                                 f"({', '.join(n for n, _ in args.outputs)})", repr(arg),
                                 suggest(arg, [n for n, _ in args.outputs]))
        return f"{arg}_{index}"

    def outputs(self, name: str, args: OpArgs) -> list[str]:
        used = self.used.get(name, set())
        if not self.body:
            count = max(used, default=-1) + 1
            if not args.known:
                shapes = self.names[name].attr.get("_output_shapes")
                count = max(count, len(shapes.list.shape) if shapes is not None else 0)
                return [f"output_{i}" for i in range(count)]
            return args.output_names(args.output_count(count))
        fixed = [n for n, listed in args.outputs if not listed]
        extra = sorted({self.port(args, _Ref(name, key), []) for key in used} - set(fixed),
                       key=lambda p: (p.rpartition("_")[0], int(p.rpartition("_")[2] or 0)))
        return fixed + extra


def _attrs(reader: _Reader, node: Any, schema: Any, tf_name: str | None) -> tuple[dict, dict]:
    """(the op's own attributes, its ``tf_node`` entry)."""
    own: dict[str, Any] = {}
    hidden: dict[str, Any] = {}
    kinds: dict[str, str] = {}
    bodies = BODY_ATTRS.get(node.op, ())
    where = f"{reader.where}/{node.name}"
    for key in sorted(node.attr):
        value, kind = attr_from_proto(node.attr[key], f"{where}.attr.{key}")
        if key == INITIAL_VALUE_ATTR and kind == "tensor":
            own[INITIAL_VALUE] = value
            continue
        if key in bodies and kind == "func" and reader.library is not None:
            value = reader.library.body(value if isinstance(value, str) else value["name"], f"{where}.attr.{key}")
        (hidden if key.startswith("_") else own)[key] = value
        typed = schema.attrs.get(key) if schema is not None and not key.startswith("_") else None
        if typed is None or schema_kind(typed.type) != kind:
            kinds[key] = kind
    entry: dict[str, Any] = {}
    if tf_name is not None:
        entry["name"] = tf_name
    if node.device:
        entry["device"] = node.device
    if hidden:
        entry["attr"] = hidden
    if kinds:
        entry["kinds"] = kinds
    return own, entry


def read_nodes(nodes: Sequence[Any], namespace: Any, where: str, library: Any = None,
               args: Sequence[str] | None = None, arg_ports: Sequence[str] | None = None,
               rets: Sequence[tuple[str, str]] = (), control_rets: Sequence[str] = ()) -> Flat:
    """The flat ops and edges of ``nodes``. For a function body, ``args`` are its argument names,
    ``arg_ports`` the input port each arrives on, ``rets`` (output port, input string) its
    results and ``control_rets`` the nodes its control outputs name."""
    reader = _Reader(nodes, namespace, where, library, args, arg_ports)
    parsed: list[tuple[Any, list[_Ref], list[str]]] = []
    for node in nodes:
        data: list[_Ref] = []
        controls: list[str] = []
        for i, text in enumerate(node.input):
            ref = reader.parse(text, node.name, i)
            if ref is None:
                controls.append(text[1:])
            else:
                data.append(ref)
                if ref.node is not None:
                    reader.used.setdefault(ref.node, set()).add(ref.key)
        parsed.append((node, data, controls))
    results = [(port, reader.parse(text, "<ret>", i)) for i, (port, text) in enumerate(rets)]
    for _, ref in results:
        if ref is not None and ref.node is not None:
            reader.used.setdefault(ref.node, set()).add(ref.key)
    scopes = scope_prefixes(list(reader.names))
    ops: list[Container] = []
    out_ports: dict[str, list[str]] = {}
    arg_table: dict[str, OpArgs] = {}
    for node, _, _ in parsed:
        arg_table[node.name] = _CALL_ARGS if node.op in CALL_TYPES else op_args(namespace, node.op)
        out_ports[node.name] = reader.outputs(node.name, arg_table[node.name])
    edges: list[Edge] = []
    flat_controls: list[tuple[str | None, str | None]] = []
    for node, data, controls in parsed:
        args_of = arg_table[node.name]
        in_names = args_of.input_names(len(data))
        for ref, port in zip(data, in_names, strict=True):
            edges.append(Edge(_source(reader, ref, arg_table, out_ports), Endpoint((node.name,), port)))
        flat_controls += [(src, node.name) for src in controls]
        ops.append(_op(reader, node, in_names, out_ports[node.name], scopes))
    for port, ref in results:
        if ref is None:
            raise FormatError.at(f"{where}.ret.{port}", "a data input", "a control input")
        edges.append(Edge(_source(reader, ref, arg_table, out_ports), Endpoint(SELF, port)))
    for name in control_rets:
        reader._known(name, f"{where}.control_ret")
        flat_controls.append((name, None))
    return Flat(ops, edges, flat_controls)


def _source(reader: _Reader, ref: _Ref, table: dict[str, OpArgs], out_ports: dict[str, list[str]]) -> Endpoint:
    if ref.node is None:
        arg, index = ref.key
        port = reader.arg_ports[arg]
        return Endpoint(SELF, port if index == 0 else f"{port}_{index}")
    names = out_ports[ref.node]
    if not reader.body and ref.key >= len(names):
        node = reader.names[ref.node]
        raise FormatError.at(f"{reader.where}/{ref.node}", f"an output index of {node.op} "
                             f"(0..{len(names) - 1})", str(ref.key))
    return Endpoint((ref.node,), reader.port(table[ref.node], ref, names))


def _op(reader: _Reader, node: Any, in_names: list[str], out_names: list[str], scopes: set[str]) -> Container:
    leaf = node.name.rpartition("/")[2]
    parent = node.name.rpartition("/")[0].rpartition("/")[2]
    clash = node.name in scopes or (parent and leaf == parent)
    schema = reader.namespace.schema(node.op) if reader.namespace is not None and node.op in reader.namespace else None
    own, entry = _attrs(reader, node, schema, node.name if clash else None)
    arity = len(in_names) - (1 if "If" in node.op else 0)  # an If's first input is its condition
    for key in BODY_ATTRS.get(node.op, ()):
        body = own.get(key)
        if isinstance(body, Container) and len(body.inputs) != arity:
            raise FormatError.at(f"{reader.where}/{node.name}.attr.{key}", f"a function of {arity} arguments "
                                 f"(the {node.op}'s inputs)", f"{body.name!r} of {len(body.inputs)}")
    if entry:
        own[NODE_ATTR] = entry
    inputs = [Port(n) for n in in_names]
    outputs = [Port(n) for n in out_names]
    if node.op in CALL_TYPES and reader.library is not None and "f" in own:
        fname = own["f"] if isinstance(own["f"], str) else own["f"]["name"]
        return reader.library.call(node.op, node.name, fname, inputs, outputs, own,
                                   f"{reader.where}/{node.name}")
    if len(set(in_names)) < len(in_names) or len(set(out_names)) < len(out_names):
        raise FormatError.at(f"{reader.where}/{node.name}", f"ports that fit {node.op}'s args",
                             f"inputs {in_names}, outputs {out_names}")
    return Container(node.op, node.name, inputs=inputs, outputs=outputs, attrs=own)

