"""One-node ONNX models run by onnxruntime and by amanda: the oracle the kernel tests share."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import amanda
from amanda.io.onnx.importer import from_onnx


def one_node(node: onnx.NodeProto, feeds: dict[str, Any], opset: int) -> onnx.ModelProto:
    """A model of ``node`` alone, its inputs typed from ``feeds`` (object arrays as strings)."""
    def info(name: str, value: Any) -> onnx.ValueInfoProto:
        value = np.asarray(value)
        kind = TensorProto.STRING if value.dtype == object else helper.np_dtype_to_tensor_dtype(value.dtype)
        return helper.make_tensor_value_info(name, kind, value.shape)

    graph = helper.make_graph([node], "one", [info(k, v) for k, v in feeds.items()],
                              [onnx.ValueInfoProto(name=n) for n in node.output])
    opsets = [helper.make_opsetid("", opset)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))


def onnxruntime_outputs(model: onnx.ModelProto, feeds: dict[str, Any]) -> list:
    """What onnxruntime computes (raises what onnxruntime raises for a node it refuses)."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def amanda_outputs(model: onnx.ModelProto, feeds: dict[str, Any]) -> list:
    """What amanda computes for the same model, on the sequential interpreter."""
    with amanda.Session(from_onnx(model), threads=1) as session:
        return session.run([o.name for o in model.graph.output], feeds)


def both(node: onnx.NodeProto, feeds: dict[str, Any], opset: int) -> tuple[list, list]:
    """onnxruntime's and amanda's outputs for ``node`` alone."""
    model = one_node(node, feeds, opset)
    return onnxruntime_outputs(model, feeds), amanda_outputs(model, feeds)
