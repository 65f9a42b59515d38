"""Comparing amanda's inferred types with onnx.shape_inference (strict, with data propagation).

For every value an ONNX model names, onnx's type (where it infers one) and amanda's type of the
port holding that value are compared dim by dim. An onnx ``unk__`` symbol (a dim onnx made up)
counts as unknown. Verdicts: ``agree``; ``more`` (amanda more precise: it knows a dim or the
rank where onnx does not); ``unknown`` (amanda knows less); ``disagree`` (a dtype, rank or
concrete dim differs).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import onnx

from amanda.io.onnx import from_onnx
from amanda.io.onnx.values import type_to_value
from amanda.types import infer_types
from amanda.types.tensor_type import OptionalType, SequenceType, TensorType, from_attrs


def onnx_types(model: onnx.ModelProto) -> dict[str, Any]:
    """Value name -> amanda type of every value onnx's strict inference types."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    g = inferred.graph
    found = {}
    for vi in (*g.value_info, *g.output):
        if vi.HasField("type"):
            found[vi.name] = from_attrs({"type": type_to_value(vi.type)})
    return found


def _dim(d: Any) -> Any:
    return None if isinstance(d, str) and d.startswith("unk__") else d


def compare_one(ours: Any, theirs: Any) -> str:
    """The verdict for one value (see the module doc)."""
    if theirs is None:
        return "agree" if ours is None else "more"
    if ours is None:
        return "unknown"
    if isinstance(theirs, (SequenceType, OptionalType)):
        if type(ours) is not type(theirs):
            return "disagree"
        return compare_one(ours.elem, theirs.elem)
    if not isinstance(ours, TensorType):
        return "disagree"
    verdicts = []
    if theirs.dtype is not None and ours.dtype is not None and theirs.dtype != ours.dtype:
        return "disagree"
    verdicts.append("agree" if ours.dtype == theirs.dtype else ("more" if theirs.dtype is None else "unknown"))
    if theirs.shape is None:
        verdicts.append("agree" if ours.shape is None else "more")
    elif ours.shape is None:
        verdicts.append("unknown")
    elif len(ours.shape) != len(theirs.shape):
        return "disagree"
    else:
        for a, b in zip(ours.shape, theirs.shape):
            b = _dim(b)
            if a == b:
                verdicts.append("agree")
            elif b is None:
                verdicts.append("more")
            elif a is None:
                verdicts.append("unknown")
            elif isinstance(a, int) and isinstance(b, int):
                return "disagree"
            else:
                verdicts.append("more" if isinstance(a, int) else "unknown")
    if "unknown" in verdicts:
        return "unknown"
    return "more" if "more" in verdicts else "agree"


def amanda_types(model: onnx.ModelProto) -> tuple[dict[str, Any], Any]:
    """Value name -> amanda's inferred type (from the import of ``model``), and the TypeMap."""
    container = from_onnx(model)
    types = infer_types(container)
    found: dict[str, Any] = {}
    for path, port, side, t in types.entries():
        if side != "out" or not path or len(path) != 1:
            continue
        op = container.child(path[0])
        name = op.port(port).attrs.get("onnx_name", port)
        found[name] = t
    for port in container.outputs:
        found.setdefault(port.name, types.output((), port.name))
    return found, types


def strip_types(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy without value_info and without output types (so neither side copies them)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.value_info[:]
    for vi in m.graph.output:
        vi.ClearField("type")
    return m


def compare(model: onnx.ModelProto) -> tuple[Counter, list]:
    """Verdict counts over every value onnx types, and the disagreements."""
    model = strip_types(model)
    theirs = onnx_types(model)
    ours, _ = amanda_types(model)
    counts: Counter = Counter()
    bad = []
    for name, t in theirs.items():
        verdict = compare_one(ours.get(name), t)
        counts[verdict] += 1
        if verdict == "disagree":
            bad.append((name, ours.get(name), t))
    return counts, bad
