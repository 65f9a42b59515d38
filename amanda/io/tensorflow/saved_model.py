"""SavedModel folders, read-only: one signature's graph with its variables' values.

A SavedModel is ``saved_model.pb`` (a ``SavedModel`` message: meta graphs, each a ``GraphDef``
with signatures and a ``SaverDef``) and a checkpoint under ``variables/``. The meta graph is
chosen by its tags (``serve`` by default), the signature by its key (``serving_default`` by
default). The graph is pruned to the nodes the signature's outputs need (through data and
control inputs), which drops the saver's own nodes. Each variable (``VarHandleOp``,
``VariableV2``) gets the checkpoint value the SavedModel's restore step assigns it as its
``initial_value`` attribute: the restore op (``SaverDef.restore_op_name``) is followed to the
``AssignVariableOp``/``Assign`` nodes that store ``RestoreV2`` outputs, in the graph (TF1) or
in the restore function it calls (TF2), and each ``RestoreV2`` output is named by its
``tensor_names`` constant. The top container's ``tf_saved_model`` attribute says which
signature, tags and tensors (``{"inputs": {key: "node:0"}, "outputs": {...}}``) were read.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from amanda.containers.arguments import expect_file
from amanda.containers.container import Container
from amanda.errors import ArgumentError, FormatError, suggest
from amanda.io.onnx.hierarchy import check_hierarchy
from amanda.io.tensorflow.bundle import Bundle
from amanda.io.tensorflow.files import graph_name, read_bytes
from amanda.io.tensorflow.protos import message, parse
from amanda.io.tensorflow.read_graph import from_graph_def
from amanda.io.tensorflow.read_nodes import INITIAL_VALUE_ATTR
from amanda.io.tensorflow.tensors import tensor_from_proto, tensor_to_proto
from amanda.ops.catalog import TENSORFLOW, VARIABLE
from amanda.ops.registry import fact

__all__ = ["SAVED_MODEL_ATTR", "is_saved_model", "load_saved_model"]

SAVED_MODEL_ATTR = "tf_saved_model"
_ASSIGNS = ("AssignVariableOp", "Assign")


def is_saved_model(path: str | Path) -> bool:
    """Whether ``path`` is a folder holding a ``saved_model.pb``."""
    path = Path(expect_file(path))
    return path.is_dir() and (path / "saved_model.pb").is_file()


def _node_name(text: str) -> str:
    return text.lstrip("^").split(":", 1)[0]


def _meta_graph(saved: Any, tags: Sequence[str], where: str) -> Any:
    for meta in saved.meta_graphs:
        if set(tags) <= set(meta.meta_info_def.tags):
            return meta
    found = [sorted(m.meta_info_def.tags) for m in saved.meta_graphs]
    raise FormatError.at(f"{where}.meta_graphs", f"a meta graph tagged {sorted(tags)}", str(found))


def _prune(graph_def: Any, outputs: Sequence[str]) -> Any:
    """``graph_def`` with only the nodes ``outputs`` need (data and control inputs)."""
    nodes = {node.name: node for node in graph_def.node}
    keep: set[str] = set()
    stack = [_node_name(t) for t in outputs]
    while stack:
        name = stack.pop()
        if name in keep or name not in nodes:
            continue
        keep.add(name)
        stack += [_node_name(t) for t in nodes[name].input]
    out = message("tensorflow.GraphDef")()
    out.versions.CopyFrom(graph_def.versions)
    out.library.CopyFrom(graph_def.library)
    out.node.extend(node for node in graph_def.node if node.name in keep)
    return out


class _Restore:
    """Follows a SavedModel's restore step to (variable node -> checkpoint key)."""

    def __init__(self, graph_def: Any) -> None:
        self.graph = {node.name: node for node in graph_def.node}
        self.functions = {fn.signature.name: fn for fn in graph_def.library.function}

    def keys(self, restore_op: str) -> dict[str, str]:
        found: dict[str, str] = {}
        root = self.graph.get(_node_name(restore_op))
        if root is not None and root.op in ("StatefulPartitionedCall", "PartitionedCall"):
            fn = self.functions.get(root.attr["f"].func.name)
            if fn is None:
                return found
            nodes = {node.name: node for node in fn.node_def}
            args = [a.name for a in fn.signature.input_arg]
            outer = [_node_name(t) for t in root.input if not t.startswith("^")]
            for node in fn.node_def:
                if node.op in _ASSIGNS and len(node.input) >= 2:
                    key = self._key(nodes, node.input[1])
                    target = _node_name(node.input[0])
                    if key is not None and target in args and args.index(target) < len(outer):
                        found[self._variable(outer[args.index(target)])] = key
            return found
        for node in self.graph.values():
            if node.op in _ASSIGNS and len(node.input) >= 2:
                key = self._key(self.graph, node.input[1])
                if key is not None:
                    found[self._variable(_node_name(node.input[0]))] = key
        return found

    def _variable(self, name: str) -> str:
        """The variable a handle or reference comes from (through Identity nodes)."""
        for _ in range(len(self.graph) + 1):
            node = self.graph.get(name)
            if node is None or node.op != "Identity" or not node.input:
                return name
            name = _node_name(node.input[0])
        return name

    def _key(self, nodes: dict[str, Any], text: str) -> str | None:
        """The checkpoint key of the RestoreV2 output ``text`` reads (through Identity nodes)."""
        for _ in range(len(nodes) + 1):
            parts = text.split(":")
            node = nodes.get(parts[0])
            if node is None:
                return None
            if node.op == "Identity" and node.input:
                text = node.input[0]
                continue
            if node.op not in ("RestoreV2", "Restore") or len(node.input) < 2:
                return None
            index = int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 0
            names = nodes.get(_node_name(node.input[1]))
            if names is None or names.op != "Const":
                return None
            values = tensor_from_proto(names.attr["value"].tensor, f"{names.name}.value").ravel()
            return values[index].decode("utf-8", "replace") if index < len(values) else None
        return None


def load_saved_model(path: str | Path, *, signature: str = "serving_default",
                     tags: Sequence[str] = ("serve",), hierarchy: Any = True) -> Container:
    """Read one signature of the SavedModel in folder ``path`` (or its ``saved_model.pb``; see
    the module's docstring)."""
    check_hierarchy(hierarchy)
    if type(signature) is not str or not signature:
        raise ArgumentError.at("signature", "a signature key (a non-empty str)", repr(signature)[:60])
    if isinstance(tags, (str, bytes)) or not all(type(t) is str for t in _items(tags, "tags")):
        raise ArgumentError.at("tags", "a sequence of tag strings", repr(tags)[:60])
    folder = Path(expect_file(path))
    if folder.name == "saved_model.pb" and folder.is_file():
        folder = folder.parent  # the model's own file named: the model is its folder
    if not is_saved_model(folder):
        raise ArgumentError.at("path", "a SavedModel folder (holding saved_model.pb)", repr(str(path)))
    where = str(folder / "saved_model.pb")
    saved = parse("tensorflow.SavedModel", read_bytes(folder / "saved_model.pb"), where)
    meta = _meta_graph(saved, tags, where)
    sig = meta.signature_def.get(signature)
    if sig is None:
        raise FormatError.at(f"{where}.signature_def", "a signature of the meta graph", repr(signature),
                             suggest(signature, meta.signature_def))
    inputs = {key: value.name for key, value in sorted(sig.inputs.items())}
    outputs = {key: value.name for key, value in sorted(sig.outputs.items())}
    graph = _prune(meta.graph_def, list(outputs.values()))
    present = {node.name for node in graph.node}
    for key, tensor in {**inputs, **outputs}.items():
        if _node_name(tensor) not in present:
            raise FormatError.at(f"{where}.signature_def[{signature!r}].{key}", "a tensor of the graph", repr(tensor))
    _set_values(graph, meta, folder, where)
    info = {"signature": signature, "tags": tuple(sorted(meta.meta_info_def.tags)), "inputs": inputs,
            "outputs": outputs, "method_name": sig.method_name}
    return from_graph_def(graph, graph_name(folder.name.removesuffix(".savedmodel") or "saved_model", graph),
                          hierarchy=hierarchy, where=folder.name, attrs={SAVED_MODEL_ATTR: info})


def _items(value: Any, where: str) -> list:
    try:
        return list(value)
    except TypeError:
        raise ArgumentError.at(where, "a sequence of tag strings", repr(value)[:60]) from None


def _set_values(graph: Any, meta: Any, folder: Path, where: str) -> None:
    """Put each variable's checkpoint value on its node (as ``_amanda_initial_value``)."""
    variables = [node for node in graph.node if fact(TENSORFLOW, node.op, VARIABLE, False)]
    if not variables:
        return
    keys = _Restore(meta.graph_def).keys(meta.saver_def.restore_op_name)
    missing = [node.name for node in variables if node.name not in keys]
    if missing:
        raise FormatError.at(f"{where}.saver_def", "a restore step that assigns every variable",
                             f"none for {missing[:5]}")
    bundle = Bundle(folder / "variables" / "variables")
    for node in variables:
        value = bundle.tensor(keys[node.name])
        node.attr[INITIAL_VALUE_ATTR].tensor.CopyFrom(tensor_to_proto(value))
