"""Control flow over sequences: Scan and SequenceMap, each op's session kernel, type rule and
gradient (or the reason it has none) side by side (If and Loop are in
:mod:`amanda.opset.onnx.control_flow`, whose machinery these share).

Type rules. A Scan's states fit their initial and body types, its scan outputs are stacked body
outputs; a SequenceMap's body runs on elements and each output is a sequence of its body output.

Gradients. **Scan**: the forward Scan again with each step's states as extra scan outputs, then
a Scan over the steps in reverse order whose state is the states' cotangents (and the sums of
the captured values' gradients) and whose scan outputs are the scan inputs' gradients. Every
scan axis and direction; all states and scan inputs must be floating point. SequenceMap's
values are sequences: it has no gradient.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import zeros_like
from amanda.autodiff.rules_control import (
    FLOAT_TYPES,
    body_vjp,
    control_op,
    expect_floats,
    gradient_per_input,
    input_parts,
    inputs_like,
    reverse_body,
    stacked_type,
    with_extra_outputs,
    without_axis,
)
from amanda.build import Input
from amanda.build.values import Value
from amanda.containers import Container
from amanda.exec.control_flow import formal_names, prepared_body, regular_inputs
from amanda.exec.dispatch import OpContext
from amanda.ops import define
from amanda.opset.onnx.sequences import NOT_A_TENSOR
from amanda.types.node import Node
from amanda.types.rules.control import body_types, drop_axis, insert
from amanda.types.tensor_type import SequenceType, TensorType, merge


def _scan_once(
    ctx: OpContext, attrs: Mapping[str, Any], body: Any, states: list[Any], scanned: list[np.ndarray],
    inputs: Sequence[Any], axes: Sequence[int], directions: Sequence[int], length: int | None = None,
) -> tuple[list[Any], list[np.ndarray]]:
    n = len(states)
    formal = formal_names(body, n + len(scanned))
    run, at = prepared_body(ctx, body, formal)
    caps = [inputs[i] for i in at]
    k = len(body.output_names) - n
    moved = [np.moveaxis(x, a % x.ndim, 0) for x, a in zip(scanned, axes)]
    steps = moved[0].shape[0] if moved else 0
    if length is not None:
        steps = length
    slices: list[list[Any]] = [[] for _ in range(k)]
    for t in range(steps):
        given = [*states, *(x[steps - 1 - t if d else t] for x, d in zip(moved, directions))]
        result = run([*given[:len(formal)], *caps])
        states = result[:n]
        for j in range(k):
            slices[j].append(result[n + j])
    out_axes = list(attrs.get("scan_output_axes") or [0] * k)
    out_dirs = list(attrs.get("scan_output_directions") or [0] * k)
    stacked = []
    for j in range(k):
        parts = slices[j][::-1] if (out_dirs[j] if j < len(out_dirs) else 0) else slices[j]
        y = np.stack(parts) if parts else np.empty((0,), dtype=np.float32)
        axis = out_axes[j] if j < len(out_axes) else 0
        stacked.append(np.moveaxis(y, 0, axis % y.ndim) if y.ndim else y)
    return states, stacked

@define("Scan").session_kernel(since=9)
def run_scan(ctx: OpContext, attrs: Mapping[str, Any], *values: Any) -> tuple:
    """ONNX Scan (opset 9 on): iterate ``body`` over slices of the scan inputs."""
    regular = regular_inputs(ctx, values)
    m = int(attrs["num_scan_inputs"])
    states, scanned = list(regular[: len(regular) - m]), list(regular[len(regular) - m:])
    axes = list(attrs.get("scan_input_axes") or [0] * m)
    directions = list(attrs.get("scan_input_directions") or [0] * m)
    states, stacked = _scan_once(ctx, attrs, attrs["body"], states, scanned, values, axes, directions)
    return tuple(states + stacked)

@define("Scan").session_kernel(since=8)
def run_scan_v8(ctx: OpContext, attrs: Mapping[str, Any], *values: Any) -> tuple:
    """ONNX Scan opset 8: a leading batch axis, optional ``sequence_lens``, scan along axis 1."""
    regular = regular_inputs(ctx, values)
    lens, rest = regular[0], regular[1:]
    m = int(attrs["num_scan_inputs"])
    states, scanned = rest[: len(rest) - m], rest[len(rest) - m:]
    directions = list(attrs.get("directions") or [0] * m)
    batch = (scanned[0] if scanned else states[0]).shape[0]
    finals: list[list[Any]] = [[] for _ in states]
    outs: list[list[Any]] = []
    for b in range(batch):
        length = None if lens is None else int(np.asarray(lens).reshape(-1)[b])
        s, y = _scan_once(ctx, {}, attrs["body"], [x[b] for x in states], [x[b] for x in scanned],
                          values, [0] * m, directions, length)
        for j, v in enumerate(s):
            finals[j].append(v)
        if not outs:
            outs = [[] for _ in y]
        for j, v in enumerate(y):
            outs[j].append(v)
    return tuple([np.stack(f) for f in finals] + [np.stack(o) for o in outs])

@define("SequenceMap").session_kernel(since=17)
def run_sequence_map(ctx: OpContext, attrs: Mapping[str, Any], *values: Any) -> tuple:
    """ONNX SequenceMap: run ``body`` once per element of the input sequence; sequence inputs
    give their i-th element, tensor inputs themselves; each output is a sequence."""
    regular = regular_inputs(ctx, values)
    body = attrs["body"]
    formal = formal_names(body, len(regular))
    run, at = prepared_body(ctx, body, formal)
    caps = [values[i] for i in at]
    count = len(regular[0])
    results: list[list[Any]] = [[] for _ in body.output_names]
    for i in range(count):
        given = [v[i] if isinstance(v, list) else v for v in regular[:len(formal)]]
        for j, value in enumerate(run([*given, *caps])):
            results[j].append(value)
    return tuple(results)


def scan_type(node: Node) -> list:
    """States fit their initial and body types; scan outputs are stacked body outputs."""
    m = int(node.attr("num_scan_inputs", 0))
    if node.opset < 9:
        return _scan8(node, m)
    states = node.types[: len(node.types) - m]
    scanned = list(range(len(node.types) - m, len(node.types)))
    axes = list(node.attr("scan_input_axes") or [0] * m)
    slices, length = [], None
    for i, a in zip(scanned, axes):
        t = node.tensor(i)
        if t is not None and t.shape is not None:
            a = node.axis(int(a), len(t.shape))
            length = node.same(length, t.shape[a], "the scan lengths")  # type: ignore[index]
            slices.append(drop_axis(t, a))  # type: ignore[arg-type]
        else:
            slices.append(TensorType(node.dtype(i), None))
    outs = body_types(node, "body", [*states, *slices])
    n = len(states)
    finals = [merge(a, b) for a, b in zip(states, outs[:n])]
    out_axes = list(node.attr("scan_output_axes") or [0] * (len(outs) - n))
    return finals + [insert(t, int(a), length) for t, a in zip(outs[n:], out_axes)]

def _scan8(node: Node, m: int) -> list:
    """Scan of opset 8: a leading batch axis on every input and output, scanning along axis 1."""
    rest = list(range(1, len(node.types)))
    states, scanned = rest[: len(rest) - m], rest[len(rest) - m:]
    batch = length = None
    inner_states = []
    for i in states:
        t = node.tensor(i)
        if t is not None and t.shape:
            batch = node.same(batch, t.shape[0], "the batch dims")
        inner_states.append(drop_axis(t, 0))
    slices = []
    for i in scanned:
        t = node.tensor(i)
        if t is not None and t.shape is not None and len(t.shape) >= 2:
            batch = node.same(batch, t.shape[0], "the batch dims")
            length = node.same(length, t.shape[1], "the scan lengths")
        slices.append(drop_axis(drop_axis(t, 0), 0))
    outs = body_types(node, "body", [*inner_states, *slices])
    n = len(states)
    finals = [insert(t, 0, batch) for t in outs[:n]]
    return finals + [insert(insert(t, 0, length), 0, batch) for t in outs[n:]]

def sequence_map_type(node: Node) -> list:
    """The body runs on elements; each output is a sequence of its body output."""
    elems = [t.elem if isinstance(t, SequenceType) else t for t in node.types]
    return [SequenceType(t) for t in body_types(node, "body", elems)]


def _scan_spec(n: GradNode) -> SimpleNamespace:
    """What the Scan rule reads off the op: states, scan inputs, axes, directions, body types."""
    if n.opset is not None and n.opset < 9:
        raise n.fail("Scan of opset 9 or later", f"opset {n.opset}")
    f = SimpleNamespace(body=n.op.attrs["body"])
    f.regular, f.caps = input_parts(n)
    m = int(n.attr("num_scan_inputs"))
    f.count = count = len(f.regular) - m
    f.states, f.xs = [n.inputs[i] for i in f.regular[:count]], [n.inputs[i] for i in f.regular[count:]]
    expect_floats(n, [*f.states, *f.xs], "states and scan inputs")
    f.formal = [p.name for p in f.body.inputs if not p.attrs.get("captured")]
    k = len(n.outputs) - count
    f.in_axes, f.in_dirs, f.out_axes, f.out_dirs = _scan_axes(n, m, k)
    f.types = {name: v.type for name, v in zip(f.formal, f.states)}
    f.types.update({name: without_axis(v.type, a) for name, v, a in zip(f.formal[count:], f.xs, f.in_axes)})
    f.types.update({name: n.inputs[i].type for i, name in f.caps})
    f.ys = [j for j in range(k) if n.outputs[count + j].type.dtype in FLOAT_TYPES]
    f.wrt_caps = [name for i, name in f.caps if n.need(i)]
    f.captured = [(name, n.inputs[i]) for i, name in f.caps]
    return f

def _scan_axes(n: GradNode, m: int, k: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """The Scan's axes and directions of its ``m`` scan inputs and ``k`` scan outputs (0:
    the first axis, forward, where the op does not say)."""
    return ([int(a) for a in (n.attr("scan_input_axes") or [0] * m)],
            [int(d) for d in (n.attr("scan_input_directions") or [0] * m)],
            [int(a) for a in (n.attr("scan_output_axes") or [0] * k)],
            [int(d) for d in (n.attr("scan_output_directions") or [0] * k)])

def _scan_reverse(n: GradNode, f: SimpleNamespace) -> Container:
    """The backward Scan's body: this step's states and inputs, the cotangents carried."""
    g = body_vjp(n, f.body, f.types, list(range(f.count)) + [f.count + j for j in f.ys], f.formal + f.wrt_caps)
    dc = inputs_like("dc_in", [v.type for v in f.states])
    acc = inputs_like("acc_in", [f.types[name] for name in f.wrt_caps])
    s_in = inputs_like("s", [v.type for v in f.states])
    x_in = inputs_like("x", [f.types[name] for name in f.formal[f.count:]])
    dy = [Input(f"dy_{j}", n.outputs[f.count + j].type.dtype, None) for j in f.ys]
    cap_in = [Input(name, f.types[name].dtype, f.types[name].shape) for _, name in f.caps]
    feed = {**dict(zip(f.formal, s_in + x_in)), **{v.name: v for v in cap_in}}
    feed.update({f"d:{j}": v for j, v in enumerate(dc)})
    feed.update({f"d:{f.count + j}": v for j, v in zip(f.ys, dy)})
    return reverse_body(n, g, feed, dc + acc + s_in + x_in + dy + cap_in, acc,
                         {"carried": f.formal[:f.count], "caps": f.wrt_caps, "scanned": f.formal[f.count:],
                          "captured": [v.name for v in cap_in]})

def scan_vjp(n: GradNode) -> list:
    """Scan (opset 9 on): the steps again with their states stacked, then a Scan over the steps
    in reverse (module doc)."""
    f = _scan_spec(n)
    count = f.count
    # the forward again, each step's states stacked as extra scan outputs
    again = control_op(n, "Scan", [(f"in_{j}", v) for j, v in enumerate([*f.states, *f.xs])], f.captured,
                [(f"out_{j}", o.type) for j, o in enumerate(n.outputs)]
                + [(f"st_{j}", stacked_type(v.type)) for j, v in enumerate(f.states)],
                {**n.own_attrs(), "body": with_extra_outputs(f.body, f.formal[:count]),
                 "scan_output_axes": f.out_axes + [0] * count, "scan_output_directions": f.out_dirs + [0] * count})
    # the backward Scan: its states are the cotangents and the captured sums, its steps reversed
    init = [n.grad(j) for j in range(count)] + [zeros_like(n.inputs[i]) for i, name in f.caps if name in f.wrt_caps]
    scans = again[len(n.outputs):] + f.xs + [n.grad(count + j) for j in f.ys]
    outs = control_op(n, "Scan", [(f"in_{j}", v) for j, v in enumerate(init + scans)], f.captured,
               [(f"dc_{j}", v.type) for j, v in enumerate(f.states)]
               + [(f"acc_{c}", f.types[name]) for c, name in enumerate(f.wrt_caps)]
               + [(f"dx_{j}", v.type) for j, v in enumerate(f.xs)],
               {"body": _scan_reverse(n, f), "num_scan_inputs": len(scans),
                "scan_input_axes": [0] * count + f.in_axes + [f.out_axes[j] for j in f.ys],
                "scan_input_directions": [1] * count + [1 - d for d in f.in_dirs] + [1 - f.out_dirs[j] for j in f.ys],
                "scan_output_axes": f.in_axes, "scan_output_directions": [1 - d for d in f.in_dirs]})
    found: dict[Any, Value] = dict(zip(f.regular, outs[:count] + outs[count + len(f.wrt_caps):]))
    found.update(zip(f.wrt_caps, outs[count:count + len(f.wrt_caps)]))
    return gradient_per_input(n, found)


define("Scan", type_rule=scan_type, vjp=scan_vjp)
define("SequenceMap", type_rule=sequence_map_type,
       no_gradient=NOT_A_TENSOR)
