"""ONNX ``ModelProto`` -> container (see ``docs/onnx.md`` for the mapping).

Graph inputs and outputs become the container's ports, initializers ``Constant`` ops with
``initializer: true``, nodes leaf ops whose ports carry the schema's formal names, and graph
attributes (If/Loop/Scan bodies) containers inside the op's attributes. Text fields that are
not UTF-8 are refused (``amanda.io.onnx.text``); attribute strings are bytes and may hold anything. Every value name is
resolved once through a dict per graph, so importing is linear in the model's size.
"""

from __future__ import annotations

import math
from typing import Any

from amanda.containers.container import Container
from amanda.containers.edge import Port
from amanda.errors import FormatError
from amanda.io.onnx.functions import FunctionReader
from amanda.io.onnx.hierarchy import check_hierarchy, nest_graph, takes_scopes
from amanda.io.onnx.metadata import read_metadata
from amanda.io.onnx.module_functions import inline_modules
from amanda.io.onnx.ports import Schemas, namespace_of_domain
from amanda.io.onnx.shared_attrs import SharedAttributes
from amanda.io.onnx.spans import raw_spans, spans_pay
from amanda.io.onnx.text import check_text, check_text_outside_nodes
from amanda.io.onnx.values import require_onnx
from amanda.parse_guards import gc_paused

__all__ = ["MIN_IR_VERSION", "check_model_header", "check_text", "from_onnx"]

MIN_IR_VERSION = 3  # the first IR version with opset_import
_ITEM_SIZES = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 14: 8, 15: 16, 16: 2}


class _Importer(FunctionReader):
    """One conversion: the model's opsets, a schema cache and port-name caches."""

    def __init__(self, model: Any, source: str | None) -> None:
        self.prefix = f"{source}: " if source else ""
        self.proto, self.source = model, source
        self.schemas = Schemas()
        self.names: dict[tuple[int, str, int], tuple[str, ...]] = {}
        self.ports: dict[str, Port] = {}
        self.in_ports: dict[tuple[int, int], tuple[tuple[str, ...], tuple[Port, ...]]] = {}
        self.shared = SharedAttributes()
        self.opsets = self._opsets(model)
        self.default = self.opsets.get("")
        self.read_functions(model)

    def _opsets(self, model: Any) -> dict[str, str]:
        from amanda.namespaces.onnx_vocab import onnx_domains

        opsets: dict[str, str] = {}
        known = onnx_domains()
        for entry in model.opset_import:
            domain = "" if entry.domain == "ai.onnx" else entry.domain
            if domain in opsets:
                raise self.fail(
                    f"opset_import lists domain {domain or 'ai.onnx'!r} twice", path="opset_import"
                )
            if entry.version < 1:
                raise self.fail(
                    f"opset_import gives domain {domain or 'ai.onnx'!r} version {entry.version}",
                    path="opset_import",
                    expected="a version >= 1",
                    found=str(entry.version),
                )
            if domain in known and entry.version > known[domain][1]:
                raise self.fail(
                    f"opset {entry.version} of {domain or 'ai.onnx'} is newer than the installed onnx "
                    f"package knows ({known[domain][1]}); upgrade onnx",
                    path="opset_import",
                    expected=f"a version up to {known[domain][1]}",
                    found=str(entry.version),
                )
            opsets[domain] = namespace_of_domain(domain, entry.version)
        return opsets

    def model(self, model: Any, hierarchy: Any = "auto", serialized: bytes | None = None,
              spans: list[tuple[int, int]] | None = None) -> Container:
        self.scope_texts = {} if takes_scopes(hierarchy) else None
        if serialized is not None and spans is not None:
            # the message holds no raw data where a span says where it is: always used (those
            # past the walk kept theirs)
            unwalked = len(model.graph.initializer) - len(spans)
            self.serialized, self.spans = serialized, spans + [(0, 0)] * unwalked if unwalked > 0 else spans
        elif serialized is not None:
            self._find_spans(model.graph, serialized)
        # main-graph ops inside modules are built as their level opens (a graph with no scope-path
        # name and no node metadata imports flat: nothing to defer)
        self.defer = hierarchy is not False and _may_nest(model.graph)
        fields, _ = self.graph(model.graph, None, (model.graph.name or "graph",))
        self.defer = False
        fields = nest_graph(fields, hierarchy, self.prefix, self.scope_texts)
        meta, extra, uid = read_metadata(model.metadata_props, self.prefix)
        info: dict[str, Any] = {"ir_version": int(model.ir_version)}
        for field in ("producer_name", "producer_version", "domain", "doc_string"):
            if getattr(model, field):
                info[field] = getattr(model, field)
        if model.model_version:
            info["model_version"] = int(model.model_version)
        if meta:
            info["metadata_props"] = meta
        info["opset_import"] = {e.domain: int(e.version) for e in model.opset_import}
        graph_info = fields["info"]
        for key, value in graph_info.items():
            info[f"graph_{key}"] = value
        uncalled = self.uncalled()  # called functions live in their calls
        if uncalled:
            info["functions"] = uncalled
        if model.training_info:
            info["training_info"] = tuple(t.SerializeToString() for t in model.training_info)
        attrs: dict[str, Any] = {**fields["extra"], **extra}
        if self.default is not None:
            attrs["namespace"] = self.default
        attrs["onnx"] = info
        fields["uid"] = uid or fields["uid"]
        return self._container(fields, fields["inputs"], attrs, (model.graph.name,), trusted=True)


    def _find_spans(self, g: Any, serialized: bytes) -> None:
        """Find where the weights lie in the bytes the model was parsed from, where that pays."""
        sizes = _ITEM_SIZES
        weights = sum(math.prod(t.dims) * sizes.get(t.data_type, 0) for t in g.initializer
                      if t.data_location != 1)  # external data is not in these bytes
        if not spans_pay(weights, len(g.node) + len(g.initializer) + len(g.value_info)):
            return
        spans = raw_spans(serialized, len(g.initializer))
        if spans is not None and len(spans) == len(g.initializer):
            self.serialized, self.spans = serialized, spans


def _may_nest(g: Any) -> bool:
    """Whether some node of ``g`` has a scope-path name or metadata (where the module tree
    comes from); a name that is not text is left to the reader, which refuses it."""
    for node in g.node:
        name = node.name
        if node.metadata_props or (type(name) is str and "/" in name):
            return True
    return False


def check_model_header(model: Any, source: str | None = None) -> None:
    """Raise FormatError unless ``model`` is a ModelProto of a readable IR version, with a
    graph and opset imports (checked before anything else is read from it).

    >>> import onnx
    >>> check_model_header(onnx.ModelProto(ir_version=99), "m.onnx")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    amanda.errors.FormatError: m.onnx: unsupported ONNX IR version 99: amanda reads IR versions 3 to ...
    """
    onnx = require_onnx()
    prefix = f"{source}: " if source else ""
    if not isinstance(model, onnx.ModelProto):
        raise FormatError(
            f"{prefix}expected an onnx.ModelProto, found {type(model).__name__}",
            expected="onnx.ModelProto",
            found=type(model).__name__,
        )
    if not MIN_IR_VERSION <= model.ir_version <= onnx.IR_VERSION:
        raise FormatError(
            f"{prefix}unsupported ONNX IR version {model.ir_version}: amanda reads IR versions "
            f"{MIN_IR_VERSION} to {onnx.IR_VERSION}"
            + (" (is this an ONNX file?)" if model.ir_version == 0 else ""),
            path="ir_version",
            expected=f"{MIN_IR_VERSION}..{onnx.IR_VERSION}",
            found=str(model.ir_version),
        )
    if not model.HasField("graph"):
        raise FormatError(
            f"{prefix}the model has no graph", path="graph", expected="a graph", found="none"
        )
    if not model.opset_import:
        raise FormatError(
            f"{prefix}the model imports no opset",
            path="opset_import",
            expected="at least one opset_import",
            found="none",
        )


def from_onnx(model: Any, *, source: str | None = None, hierarchy: Any = "auto",
              serialized: bytes | None = None, spans: list[tuple[int, int]] | None = None) -> Container:
    """The container for an ``onnx.ModelProto`` (which is left unchanged).

    ``serialized``: the bytes ``model`` was parsed from, where at hand; weights are then
    read-only views of them (kept alive by the weights) rather than copies. ``spans``: for a
    model parsed from ``serialized`` without its weights' raw bytes
    (:func:`amanda.io.onnx.spans.stripped`), where each initializer's raw bytes lie in it.

    ``source`` (a file name) prefixes error messages. Raises ``FormatError`` for an
    unsupported IR version, a missing graph or opset import, or a value no one defines.
    ``hierarchy`` says whether the exporter's module tree is rebuilt as nested containers
    (``docs/onnx.md``, "Module hierarchy"): ``"auto"`` (from torch's scope metadata, else from
    scope-path node names, else flat), ``True`` (the same), ``False`` (flat), ``"metadata"`` or
    ``"names"`` (from that source only). Calls of the module functions that
    ``dump(..., functions="modules")`` writes are first put back as the nodes they stand for
    (:func:`~amanda.io.onnx.module_functions.inline_modules`), so the tree comes back whole.

    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])])
    >>> c = from_onnx(helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)]))
    >>> c.namespace, c.input_names, c.inputs[0].attrs["shape"], c.child("relu").input_names
    ('amanda/onnx/17', ('x',), ('n', 4), ('X',))
    """
    check_hierarchy(hierarchy)
    check_model_header(model, source)
    check_text_outside_nodes(model, source)  # the nodes' text is checked as they are read
    model = inline_modules(model, f"{source}: " if source else "")  # dump(..., functions="modules")
    with gc_paused(promote=True):  # one container per node, nothing cyclic, kept: the collector's passes are waste
        return _Importer(model, source).model(model, hierarchy, serialized, spans)
