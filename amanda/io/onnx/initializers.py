"""The Constant ops of an ONNX graph's initializers (a part of the graph reader,
``amanda.io.onnx.read_graph``): each weight's array (a view of the file's bytes, a lazy
tensor of an external file, or a copy), under a unique op name, with the tensor's metadata,
doc string and whether it is also a graph input; in a nested import, kept as a
:class:`~amanda.io.onnx.pending.PendingOp` until its module's level opens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amanda.containers.container import Container
from amanda.containers.edge import Endpoint, Port
from amanda.errors import FormatError
from amanda.io.onnx.hierarchy import take_scope
from amanda.io.onnx.metadata import read_metadata
from amanda.io.onnx.pending import make_pending, pending_op
from amanda.io.onnx.scope import Scope, fresh_name
from amanda.io.onnx.values import tensor_to_array

__all__ = ["CONSTANT_OUTPUT", "InitializerReader"]

CONSTANT_OUTPUT = "output"  # the output of ONNX Constant in every opset
_OUT_NAMES, _UNTYPED = (CONSTANT_OUTPUT,), (None,)
_endpoint = tuple.__new__


class InitializerReader:
    """The initializer part of :class:`~amanda.io.onnx.read_graph.GraphReader` (which supplies
    the fields and methods declared here)."""

    prefix: str
    in_function: bool
    defer: bool
    serialized: bytes
    spans: list[tuple[int, int]] | None

    fail: Callable[..., FormatError]  # the FormatError of a message (GraphReader.fail)
    _scope_texts_of: Callable[[Scope | None, int], dict | None]
    _build: Callable[..., Container]  # a leaf op of valid fields

    def _initializers(self, g: Any, parent: Scope | None, values: dict, taken: set[str], overridable: set[str],
                      here: str) -> list[Container]:
        """The Constant ops of ``g``'s dense initializers (the main graph's weights are views of
        the bytes the model was parsed from, where their spans were found)."""
        taking = self._scope_texts_of(parent, 1)
        main = parent is None and not self.in_function
        spans = self.spans if main else None
        return [self._initializer(tensor, tensor.name,
                                  {"value": tensor_to_array(tensor, self.prefix, spans[i] if spans else None,
                                                            self.serialized)},
                                  values, taken, overridable, here, taking, main and self.defer)
                for i, tensor in enumerate(g.initializer)]

    def _initializer(
        self,
        tensor: Any,
        name: str,
        value: dict[str, Any],
        values: dict,
        taken: set[str],
        overridable: set[str],
        here: str,
        taking: dict | None = None,
        wait: bool = False,
    ) -> Any:
        if not name or name in values:
            raise self.fail(
                f"{here} defines initializer {name!r} twice or without a name",
                path=name,
                expected="unique initializer names",
                found=repr(name),
            )
        op_name = fresh_name(name if name not in taken else f"{name}_initializer", taken)
        taken.add(op_name)
        attrs: dict[str, Any] = {**value, "initializer": True}
        props, uid = tensor.metadata_props, None
        if props:
            meta, extra, uid = read_metadata(props, self.prefix)
            if meta and taking is not None:
                take_scope(meta, op_name, taking)
            attrs.update(extra)
            if meta:
                attrs["metadata"] = meta
        node_info: dict[str, Any] = {}
        if tensor.doc_string:
            node_info["doc_string"] = tensor.doc_string
        if name in overridable:
            node_info["graph_input"] = True
        if node_info:
            attrs["onnx_node"] = node_info
        values[name] = _endpoint(Endpoint, ((op_name,), CONSTANT_OUTPUT))  # valid by construction
        if wait and not props and op_name.isascii():  # what pending_op makes of it, its checks passed
            return make_pending(("Constant", op_name, (), _OUT_NAMES, (name,), _UNTYPED, attrs, None))
        waiting = pending_op("Constant", op_name, [], _OUT_NAMES, (name,), {}, attrs, uid) if wait else None
        if waiting is not None:
            return waiting  # a weight of a nested import: built when its level opens
        output = Port(CONSTANT_OUTPUT, attrs={"onnx_name": name})
        return self._build("Constant", op_name, (), (output,), attrs, uid, here)
