"""Container -> ONNX ``ModelProto``: the effective view, written as one flat graph.

Leaves go out in document order when that order is topological (so imported models come back
as they were) and in ``flatten(c).topological_order()`` otherwise; ``Constant`` ops marked
``initializer: true`` become initializers; control edges are dropped (ONNX has none).
"""

from __future__ import annotations

from typing import Any

from amanda.containers.container import Container
from amanda.errors import FormatError
from amanda.io.onnx_metadata import write_metadata
from amanda.io.onnx_ports import Schemas, domain_of_namespace, namespace_of_domain
from amanda.io.onnx_values import require_onnx
from amanda.io.onnx_write_graph import BOOKKEEPING_ATTRS, GraphWriter, Names, where_of

__all__ = ["BOOKKEEPING_ATTRS", "DEFAULT_OPSET", "MAX_IR_VERSION", "to_onnx"]

MAX_IR_VERSION = 13  # the newest IR version onnxruntime 1.31 loads (onnx 1.23 writes 14)
MIN_WRITTEN_IR = 10  # node and tensor metadata_props (where uids live) arrived in IR 10
DEFAULT_OPSET = 18  # for ops that declare no namespace at all


Leaf = tuple  # (effective namespace, op, own attributes as a dict)


def _leaves(container: Container, inherited: str | None) -> dict[tuple, Leaf]:
    """Every leaf's effective namespace, the leaf and its own attributes, by path, in document
    order. A leaf's attributes are read into a dict once: pmap lookups cost microseconds each."""
    found: dict[tuple, Leaf] = {}
    stack: list[tuple[tuple, Container, str | None]] = [((), container, inherited)]
    while stack:
        path, node, ns = stack.pop()
        if not node.children:
            own = dict(node.attrs.items()) if node.attrs else {}
            found[path] = (own.get("namespace", ns), node, own)
            continue
        ns = node.attrs.get("namespace", ns) if node.attrs else ns
        for child in reversed(node.children):
            stack.append((path + (child.name,), child, ns))
    return found


class _Exporter(GraphWriter):
    def __init__(self, root: Container) -> None:
        self.onnx = require_onnx()
        self.schemas = Schemas()
        self.opsets: dict[str, tuple[int, tuple]] = {}  # domain -> (version, first op path)
        self.spaces: dict[int, dict[tuple, Leaf]] = {}
        self.unclaimed: list[tuple] = []
        self.domains: dict[str, tuple[str, int] | None] = {}
        self.positions: dict = {}
        self.node_names: set[str] = set()  # onnxruntime refuses two nodes of one name
        self._collect(root, None, ())
        version = self.opsets.get("", (DEFAULT_OPSET, ()))[0]
        self.fallback = namespace_of_domain("", version)
        if any(leaf[0] is None for spaces in self.spaces.values() for leaf in spaces.values()):
            self.opsets.setdefault("", (version, ()))

    # -- namespaces and opsets -------------------------------------------------------------

    def _collect(self, container: Container, inherited: str | None, where: tuple) -> None:
        spaces = _leaves(container, inherited)
        self.spaces[id(container)] = spaces
        for path, (ns, _, own) in spaces.items():
            if ns is not None:
                self._opset(ns, where + path)
            for key, value in own.items():
                for i, body in enumerate(value if isinstance(value, tuple) else (value,)):
                    if isinstance(body, Container):
                        label = key if not isinstance(value, tuple) else f"{key}[{i}]"
                        self._collect(
                            body, body.attrs.get("namespace", ns), where + path + (label,)
                        )

    def _opset(self, ns: str, path: tuple) -> tuple[str, int]:
        found = self.domains.get(ns)
        if found is None:
            found = self.domains[ns] = domain_of_namespace(ns)  # type: ignore[assignment]
        if found is None:
            raise self.fail(
                f"op {where_of(path)} is in namespace {ns!r}, which is not an ONNX opset; "
                "convert the model to amanda/onnx/<opset> first",
                path,
            )
        domain, version = found
        seen = self.opsets.get(domain)
        if seen is None:
            self.opsets[domain] = (version, path)
        elif seen[0] != version:
            raise self.fail(
                f"ops {where_of(seen[1])} and {where_of(path)} use opsets {seen[0]} and {version} "
                f"of {domain or 'ai.onnx'}; one model imports one opset per domain",
                path,
            )
        return found

    # -- the model -------------------------------------------------------------------------

    def model(self, root: Container) -> Any:
        onnx = self.onnx
        model = onnx.ModelProto()
        self.graph(root, Names(), {}, (root.name or "graph",), True, model.graph)
        from amanda.types.onnx_info import add_value_info  # types sit above io: imported when used

        add_value_info(model.graph, root)
        info = root.attrs.get("onnx")
        stored = dict(info.get("opset_import") or {}) if info else {}
        opsets = {d: v for d, (v, _) in self.opsets.items()}
        for domain, version in stored.items():
            if ("" if domain == "ai.onnx" else domain) not in opsets:
                opsets[domain] = version
        for domain, version in opsets.items():
            model.opset_import.add(domain=domain, version=version)
        least = onnx.helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
        if info:
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
        else:
            from amanda import __version__

            wanted = MIN_WRITTEN_IR
            model.producer_name, model.producer_version = "amanda", __version__
        model.ir_version = min(max(wanted, least), MAX_IR_VERSION)
        extra = {k: v for k, v in root.attrs.items() if k not in BOOKKEEPING_ATTRS}
        write_metadata(
            model.metadata_props, info.get("metadata_props") if info else None, root.uid, extra
        )
        if self.unclaimed:
            self._infer_output_types(model)
        return model

    def _infer_output_types(self, model: Any) -> None:
        """Fill graph outputs that carry no type from their producers, or by shape inference."""
        missing = {vi.name for vi, _, _ in self.unclaimed}
        known = {vi.name: vi.type for vi in model.graph.value_info if vi.name in missing}
        if len(known) < len(missing):
            try:
                inferred = self.onnx.shape_inference.infer_shapes(model)
            except Exception as exc:  # noqa: BLE001 - onnx raises many kinds; say which output
                raise self.fail(
                    f"graph outputs {sorted(missing)} have no type and shape inference "
                    f"failed: {exc}"
                ) from None
            for vi in (*inferred.graph.value_info, *inferred.graph.output):
                if vi.name in missing and vi.HasField("type") and vi.name not in known:
                    known[vi.name] = vi.type
        for vi in model.graph.output:
            if vi.name in missing:
                if vi.name not in known:
                    raise self.fail(
                        f"graph output {vi.name!r} has no type and none can be inferred; "
                        "give its port attrs such as {dtype: float32}"
                    )
                vi.type.CopyFrom(known[vi.name])


def to_onnx(container: Container) -> Any:
    """The ``onnx.ModelProto`` for ``container``'s effective view (which is left unchanged).

    >>> import amanda
    >>> relu = amanda.op("Relu", "relu", inputs=["X"], outputs=["Y"])
    >>> g = amanda.Container(None, "g", inputs=[amanda.Port("x", {"dtype": "float32", "shape": (2,)})],
    ...     outputs=[amanda.Port("y", {"dtype": "float32", "shape": (2,)})], children=[relu],
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
    return _Exporter(container).model(container)
