"""Container -> ONNX ``ModelProto``: the effective view, written as one flat graph.

Leaves go out in document order when that order is topological (so imported models come back
as they were) and in ``flatten(c).topological_order()`` otherwise; ``Constant`` ops marked
``initializer: true`` become initializers; control edges are dropped (ONNX has none). A
container without declared outputs exports the values no op reads; every model is checked by
ONNX's checker before it is handed out (see ``docs/onnx.md``).
"""

from __future__ import annotations

import re
from typing import Any

from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Port
from amanda.containers.flatten import flatten
from amanda.containers.records import Path
from amanda.errors import FormatError
from amanda.io.onnx.calls import FUNCTION_ATTR, Definition, collapse_calls, function_domain, write_function
from amanda.io.onnx.external import referencing
from amanda.io.onnx.hierarchy import CONTAINERS_KEY
from amanda.io.onnx.hierarchy_export import scope_table
from amanda.io.onnx.metadata import write_metadata
from amanda.io.onnx.module_functions import check_functions, fold_modules
from amanda.io.onnx.ports import Schemas, domain_of_namespace, namespace_of_domain
from amanda.io.onnx.values import DTYPE_NAMES, require_onnx
from amanda.io.onnx.write_graph import (
    BOOKKEEPING_ATTRS,
    GraphWriter,
    Names,
    is_initializer,
    where_of,
)
from amanda.namespaces.core_vocab import CORE
from amanda.version import __version__

__all__ = [
    "BOOKKEEPING_ATTRS",
    "DEFAULT_OPSET",
    "MAX_IR_VERSION",
    "PROTO_LIMIT",
    "to_onnx",
    "with_dangling_outputs",
]

MAX_IR_VERSION = 13  # the newest IR version onnxruntime 1.31 loads (onnx 1.23 writes 14)
MIN_WRITTEN_IR = 10  # node and tensor metadata_props (where uids live) arrived in IR 10
DEFAULT_OPSET = 18  # for ops that declare no namespace at all
PROTO_LIMIT = 2**31 - 2**24  # protobuf cannot write a message of 2 GiB; keep a margin


Leaf = tuple  # (effective namespace, op, own attributes as a dict)


def _leaves(container: Container, inherited: str | None) -> dict[tuple, Leaf]:
    """Every leaf's effective namespace, the leaf and its own attributes, by path, in document
    order. A leaf's attributes are read into a dict once: pmap lookups cost microseconds each."""
    found: dict[tuple, Leaf] = {}
    stack: list[tuple[tuple, Container, str | None]] = [((), container, inherited)]
    while stack:
        path, node, ns = stack.pop()
        if node.is_op or FUNCTION_ATTR in node._attrs:  # a call is one node
            own = dict(node.attrs.items()) if node.attrs else {}
            found[path] = (own.get("namespace", ns), node, own)
            continue
        ns = node.attrs.get("namespace", ns) if node.attrs else ns
        for child in reversed(node.children):
            stack.append((path + (child.name,), child, ns))
    return found


def _not_onnx(ns: str, path: Path) -> str:
    """Why an op of namespace ``ns`` cannot be exported, and the fix: session state
    (``amanda/core`` variables, which no namespace conversion removes) is frozen into
    initializers by ``layers.freeze``; any other vocabulary is converted to an ONNX opset."""
    if ns == CORE:
        return (f"op {where_of(path)} is session state ({CORE}: a variable, its reads and updates, "
                "such as BatchNorm's running statistics or an optimiser's slots), which ONNX has no op for; "
                "freeze it first: amanda.layers.freeze(model, session.state) turns each Variable into an "
                "initializer holding its trained value and drops the updates (updates=False for a training "
                "computation)")
    return (f"op {where_of(path)} is in namespace {ns!r}, which is not an ONNX opset; "
            "convert the model to amanda/onnx/<opset> first (amanda.convert)")


class _Exporter(GraphWriter):
    def __init__(self, root: Container) -> None:
        self.onnx = require_onnx()
        self.schemas = Schemas()
        self.opsets: dict[str, tuple[int, tuple]] = {}  # domain -> (version, first op path)
        self.spaces: dict[int, dict[tuple, Leaf]] = {}
        self.domains: dict[str, tuple[str, int] | None] = {}
        self.positions: dict = {}
        self.node_names: set[str] = set()  # onnxruntime refuses two nodes of one name
        self.node_paths: dict[str, tuple] = {}  # node name -> op path, for checker messages
        self.root, self.calls = root, False
        self.definitions: list[Definition] = []
        self._collect(root, None, ())
        if self.calls:  # again, with the calls as leaves and their functions' bodies
            self.opsets, self.spaces = {}, {}
            self.root, self.definitions = collapse_calls(root)
            self._collect(self.root, None, ())
            for definition in self.definitions:
                self._collect(definition.body, definition.namespace, (definition.name,))
        self.tree = scope_table(self.root)
        self.scopes = self.tree.leaves if self.tree is not None else {}
        version = self.opsets.get("", (DEFAULT_OPSET, ()))[0]
        if "" not in self.opsets and not any(self.spaces.values()):  # no op (inputs passed to outputs)
            own = domain_of_namespace(root.attrs.get("namespace") or "")
            version = own[1] if own is not None and own[0] == "" else version
        self.fallback = namespace_of_domain("", version)
        if not any(self.spaces.values()) or any(
                leaf[0] is None for spaces in self.spaces.values() for leaf in spaces.values()):
            self.opsets.setdefault("", (version, ()))  # ONNX asks every model for its default opset

    # -- namespaces and opsets -------------------------------------------------------------

    def _collect(self, container: Container, inherited: str | None, where: tuple) -> None:
        spaces = _leaves(container, inherited)
        self.spaces[id(container)] = spaces
        for path, (ns, op, own) in spaces.items():
            function = own.get(FUNCTION_ATTR)
            if function is not None:
                self.calls = self.calls or bool(op.children)
                self._domain(*function_domain(function, where + path), where + path)
            elif ns is not None:
                self._opset(ns, where + path)
            for key, value in own.items():
                for i, body in enumerate(value if isinstance(value, tuple) else (value,)):
                    if isinstance(body, Container):
                        label = key if not isinstance(value, tuple) else f"{key}[{i}]"
                        self._collect(
                            body, body.attrs.get("namespace", ns), where + path + (label,)
                        )

    def _opset(self, ns: str, path: Path) -> tuple[str, int]:
        found = self.domains.get(ns)
        if found is None:
            found = self.domains[ns] = domain_of_namespace(ns)  # type: ignore[assignment]
        if found is None:
            raise self.fail(_not_onnx(ns, path), path)
        self._domain(*found, path)
        return found

    def _domain(self, domain: str, version: int, path: tuple) -> None:
        seen = self.opsets.get(domain)
        if seen is None:
            self.opsets[domain] = (version, path)
        elif seen[0] != version:
            raise self.fail(
                f"ops {where_of(seen[1])} and {where_of(path)} use opsets {seen[0]} and {version} "
                f"of {domain or 'ai.onnx'}; one model imports one opset per domain",
                path,
            )

    # -- the model -------------------------------------------------------------------------

    def model(self, root: Container) -> Any:
        onnx = self.onnx
        model = onnx.ModelProto()
        self.graph(self.root, Names(), {}, (root.name or "graph",), True, model.graph)
        if self.tree is not None:
            kept = [e for e in model.graph.metadata_props if e.key != CONTAINERS_KEY]
            del model.graph.metadata_props[:]
            model.graph.metadata_props.extend(kept)
            model.graph.metadata_props.add(key=CONTAINERS_KEY, value=self.tree.containers)
        for definition in self.definitions:
            write_function(self, model.functions.add(), definition)
        from amanda.types.onnx_info import add_value_info  # types sit above io: imported when used

        add_value_info(model.graph, root)
        info = root.attrs.get("onnx")
        self._write_opsets(model, info)
        least = onnx.helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
        wanted = _write_header(model, info)
        model.ir_version = min(max(wanted, least), MAX_IR_VERSION)
        extra = {k: v for k, v in root.attrs.items() if k not in BOOKKEEPING_ATTRS}
        write_metadata(
            model.metadata_props, info.get("metadata_props") if info else None, root.uid, extra
        )
        return model

    def _write_opsets(self, model: Any, info: Any) -> None:
        """The opsets the model imports: those its ops use, then those the imported model
        declared that none of them uses."""
        stored = dict(info.get("opset_import") or {}) if info else {}
        opsets = {d: v for d, (v, _) in self.opsets.items()}
        for domain, version in stored.items():
            if ("" if domain == "ai.onnx" else domain) not in opsets:
                opsets[domain] = version
        for domain, version in opsets.items():
            model.opset_import.add(domain=domain, version=version)

    # -- checking --------------------------------------------------------------------------

    def check_inputs(self, model: Any) -> None:
        """Every graph input has a rank: the ONNX checker refuses one whose type has no shape
        (a bare chain of layers declares only its dtype), with a message that cannot say which
        input or how to fix it."""
        initializers = {t.name for t in model.graph.initializer}
        for vi in model.graph.input:
            if vi.name not in initializers and _incomplete(vi.type):
                dtype = DTYPE_NAMES.get(vi.type.tensor_type.elem_type, "float32")
                raise FormatError(
                    f"graph input {vi.name!r} has no shape, and ONNX refuses a graph input of "
                    "unknown rank; give it a shape (named dims such as 'batch' stay dynamic), "
                    f"e.g. apply the layers to amanda.Input({vi.name!r}, {dtype!r}, ('batch', 784)) "
                    "and export amanda.model([that input], outputs), or give the port attrs "
                    f"{{dtype: {dtype}, shape: [batch, 784]}}",
                    path=vi.name,
                    expected="an input port with a shape",
                    found="a dtype only",
                )

    def check(self, model: Any) -> None:
        """Type untyped graph outputs by strict shape inference, then run the ONNX checker (so
        together ``check_model(full_check=True)``); a failure names the offending op's path."""
        onnx = self.onnx
        try:
            inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        except Exception as exc:  # noqa: BLE001 - InferenceError and the checker's errors
            raise self._rejected(exc, "shape inference") from None
        known = {vi.name: vi.type for vi in (*inferred.graph.value_info, *inferred.graph.output)}
        for vi in model.graph.output:
            found = known.get(vi.name)
            if _incomplete(vi.type) and found is not None and not _incomplete(found):
                vi.type.CopyFrom(found)
            if _incomplete(vi.type):
                raise self.fail(
                    f"graph output {vi.name!r} has no dtype or rank and shape inference finds "
                    "none; give its port attrs such as {dtype: float32, shape: [n, 4]}",
                    vi.name,
                )
        if referencing():
            return  # external data is checked from the written model's folder (dump_onnx)
        try:
            onnx.checker.check_model(model)
        except Exception as exc:  # noqa: BLE001 - ValidationError and friends
            raise self._rejected(exc, "checker") from None

    def _rejected(self, exc: Exception, what: str) -> FormatError:
        message = " ".join(str(exc).split())
        path = self._node_path(message)
        where = f"op {where_of(path)}" if path is not None else "the exported model"
        return FormatError(
            f"{where} is rejected by the ONNX {what}: {message}",
            path=path,
            expected="a model the ONNX checker accepts",
            found=message,
        )

    def _node_path(self, message: str) -> tuple | None:
        """The amanda path of the first exported node the message names."""
        for pattern in _NODE_MENTIONS:
            for found in pattern.finditer(message):
                path = self.node_paths.get(found.group(1).strip())
                if path is not None:
                    return path
        return None


_NODE_MENTIONS = (  # how onnx's checker and shape inference name a node
    re.compile(r"node name: ([^)]*)\)"),
    re.compile(r"Name: (.*?) OpType:"),
    re.compile(r"in node \(([^)]*)\)"),
    re.compile(r"node:? '?([^' ]+)'?"),
)


def _incomplete(proto: Any) -> bool:
    """A graph input/output type the ONNX checker refuses: none, or a tensor without element
    type or rank."""
    kind = proto.WhichOneof("value")
    if kind is None:
        return True
    if kind in ("tensor_type", "sparse_tensor_type"):
        tensor = getattr(proto, kind)
        return not tensor.elem_type or not tensor.HasField("shape")
    return False


def with_dangling_outputs(container: Container) -> Container:
    """``container`` itself if it declares outputs; else with an output port for every value no
    op reads (what TensorFlow would fetch), named like the value, in document order.

    >>> import amanda
    >>> g = amanda.Container(None, "g", children=[amanda.op("Relu", "r", ["X"], ["Y"])])
    >>> [(p.name, str(e)) for p, e in zip(with_dangling_outputs(g).outputs, with_dangling_outputs(g).edges)]
    [('r:Y', "Edge('r:Y', 'SELF:r:Y')")]
    """
    if container.outputs:
        return container
    flat = flatten(container)
    read = {(e[0][0], e[0][1]) for e in flat.edges}
    ports: list[Port] = []
    edges = list(container.edges)
    for path, op in flat.ops.items():
        if is_initializer(op):
            continue  # an unused weight is not a result
        for port in op.outputs:
            if (path, port.name) not in read:
                name = port.attrs.get("onnx_name") or f"{where_of(path)}:{port.name}"
                ports.append(Port(name))
                edges.append(Edge((path, port.name), (SELF, name)))
    if not ports:
        raise FormatError(
            f"graph {container.name or '<root>'} declares no outputs and every op output is read "
            "inside it; an ONNX model needs outputs: give the container output ports, or pass "
            "outputs= to amanda.convert (--outputs on the command line)",
            path=(),
            expected="graph outputs",
            found="none",
        )
    return container.evolve(outputs=ports, edges=edges)


def to_onnx(container: Container, *, check: bool = True, functions: str | None = None) -> Any:
    """The ``onnx.ModelProto`` for ``container``'s effective view (which is left unchanged).

    A container that declares no outputs exports every value no op reads as a graph output
    (:func:`with_dangling_outputs`). With ``check`` (the default) the model is run through
    ONNX's strict shape inference and checker first, and a ``FormatError`` naming the
    offending op's path is raised instead of returning a model ONNX would reject.
    ``functions="modules"`` writes each repeated module as a model-local function
    (:func:`~amanda.io.onnx.module_functions.fold_modules`); None (the default) writes every op.

    >>> import amanda
    >>> relu = amanda.op("Relu", "relu", inputs=["X"], outputs=["Y"])
    >>> g = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs={"dtype": "float32", "shape": (2,)})],
    ...     outputs=[amanda.Port("y", attrs={"dtype": "float32", "shape": (2,)})], children=[relu],
    ...     edges=[("g:x", "relu:X"), ("relu:Y", "g:y")], attrs={"namespace": "amanda/onnx/17"})
    >>> model = to_onnx(g)
    >>> [(n.op_type, list(n.input), list(n.output)) for n in model.graph.node]
    [('Relu', ['x'], ['y'])]
    """
    if not isinstance(container, Container):
        raise FormatError(
            f"expected a Container, found {type(container).__name__}",
            expected="Container",
            found=type(container).__name__,
        )
    check_functions(functions)
    container = with_dangling_outputs(container)
    exporter = _Exporter(container)
    model = exporter.model(container)
    if check:
        exporter.check_inputs(model)
        if model.ByteSize() <= PROTO_LIMIT:  # bigger ones are checked from their file
            exporter.check(model)
    if functions == "modules" and fold_modules(model) and check and not referencing() \
            and model.ByteSize() <= PROTO_LIMIT:
        try:  # the unfolded model passed; the functions are checked too
            exporter.onnx.checker.check_model(model)
        except Exception as exc:  # noqa: BLE001 - ValidationError and friends
            raise exporter._rejected(exc, "checker") from None
    return model


def _write_header(model: Any, info: Any) -> int:
    """The model's producer, version, doc string and kept functions and training info, from
    the imported model's ``onnx`` attribute (amanda as producer when there is none); returns
    the IR version that model had (at least the lowest amanda writes)."""
    if not info:
        model.producer_name, model.producer_version = "amanda", __version__
        return MIN_WRITTEN_IR
    wanted = int(info.get("ir_version") or MIN_WRITTEN_IR)
    for key in ("producer_name", "producer_version", "domain", "doc_string"):
        if info.get(key):
            setattr(model, key, info[key])
    if info.get("model_version"):
        model.model_version = int(info["model_version"])
    for blob in info.get("functions") or ():
        model.functions.add().ParseFromString(blob)
    for blob in info.get("training_info") or ():
        model.training_info.add().ParseFromString(blob)
    return wanted
