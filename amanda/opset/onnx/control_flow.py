"""Control flow: If and Loop, each op's session kernel, type rule and gradient side by side
(Scan and SequenceMap are in :mod:`amanda.opset.onnx.scan`).

Kernels. A body is a container stored in the op's attributes (``then_branch``, ``else_branch``,
``body``). It runs with a nested plan of the same session (same runner, same variable state),
compiled once per body and cached; the machinery (ports, captured values, prepared bodies) is
:mod:`amanda.exec.control_flow`'s.

Type rules. Both branches of an If are inferred, each output fits both; a Loop's carried
values fit their initial and body types, its scan outputs gain a first axis.

Gradients (:mod:`amanda.autodiff.rules_control` has the machinery, :func:`body_vjp`). **If**:
an If on the same condition whose branches are the two branches' products: the taken branch is
differentiated, at run time; gradients reach the values the branches read from outside
(``captured`` ports). **Loop**: the forward Loop again with its iteration numbers and carried
values stacked, and a backward Loop over as many iterations that reads them backwards. The
loop's trip count and condition get no gradient; the condition a body computes is followed as
it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import numpy as np

from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import zeros_like
from amanda.autodiff.rules_control import (
    FLOAT_TYPES,
    body_vjp,
    captured_inputs,
    captured_name,
    control_op,
    gradient_per_input,
    input_parts,
    inputs_like,
    reverse_body,
    stacked_type,
    with_extra_outputs,
)
from amanda.build import Input, ops
from amanda.build.values import Value
from amanda.containers import Container
from amanda.errors import ExecutionError
from amanda.exec.control_flow import body_ports, formal_names, prepared_body, regular_inputs, truth
from amanda.exec.dispatch import OpContext
from amanda.ops import define
from amanda.types.node import Node
from amanda.types.rules.control import BOOL, body_types, insert
from amanda.types.tensor_type import TensorType, merge


@define("If").session_kernel
def run_if(ctx: OpContext, attrs: Mapping[str, Any], *values: Any) -> tuple:
    """ONNX If: run ``then_branch`` or ``else_branch``; its outputs are the op's."""
    first = ctx.bodies.get("cond")
    if first is None:  # where the condition is among the inputs (the first port not captured)
        first = ctx.bodies["cond"] = body_ports(ctx.op)[0].index(None)
    body = attrs["then_branch"] if truth(values[first]) else attrs["else_branch"]
    run, at = prepared_body(ctx, body, ())
    return tuple(run([values[i] for i in at]))

@define("Loop").session_kernel
def run_loop(ctx: OpContext, attrs: Mapping[str, Any], *values: Any) -> tuple:
    """ONNX Loop: run ``body`` while ``cond`` holds and fewer than ``M`` iterations ran.

    Outputs: the final loop-carried values, then each scan output stacked along a new
    first axis.
    """
    regular = regular_inputs(ctx, values)
    trips, cond, carried = regular[0], regular[1], list(regular[2:])
    body = attrs["body"]
    formal = formal_names(body, 2 + len(carried))
    run, at = prepared_body(ctx, body, formal)
    caps = [values[i] for i in at]
    n, k = len(carried), len(body.output_names) - 1 - len(carried)
    width = len(formal)
    limit = None if trips is None else int(np.asarray(trips).reshape(-1)[0])
    going = True if cond is None else truth(cond)
    counter_dtype = np.int64 if trips is None else np.asarray(trips).dtype
    scans: list[list[Any]] = [[] for _ in range(k)]
    iteration = ctx.iteration
    i = 0
    while going and (limit is None or i < limit):
        iteration(i)
        given = [np.array(i, dtype=counter_dtype), np.array(going), *carried]
        result = run([*given[:width], *caps] if len(given) != width else [*given, *caps])
        if result[0] is None:
            raise ExecutionError.at(ctx.path, "a condition output from the loop body", "None")
        going = truth(result[0])
        carried = result[1:1 + n]
        for j in range(k):
            scans[j].append(result[1 + n + j])
        i += 1
    stacked = [np.stack(s) if s else np.empty((0,), dtype=np.float32) for s in scans]
    return tuple(carried + stacked)


def if_type(node: Node) -> list:
    """Both branches are inferred; each output fits both (dims that differ become unknown)."""
    if node.dtype(0) not in (None, "bool"):
        raise node.fail("a bool condition", str(node.dtype(0)))
    then = body_types(node, "then_branch", [])
    other = body_types(node, "else_branch", [])
    if len(then) != len(other):
        raise node.fail(f"branches with {len(then)} outputs each", f"{len(then)} and {len(other)}")
    return [merge(a, b) for a, b in zip(then, other)]

def loop_type(node: Node) -> list:
    """Loop-carried values fit their initial and body types; scan outputs gain a first axis."""
    carried = [node.type(i) for i in range(2, len(node.types))]
    outs = body_types(node, "body", [TensorType("int64", ()), BOOL, *carried])
    n = len(carried)
    finals = [merge(a, b) for a, b in zip(carried, outs[1:1 + n])]
    trips = node.dims(0) if not node.present(1) else None
    count = trips[0] if trips else None
    return finals + [insert(t, 0, count) for t in outs[1 + n:]]


def if_vjp(n: GradNode) -> list:
    """If: an If of the branches' products on the same condition (module doc)."""
    cond = n.given(0)
    caps = captured_inputs(n)
    types = {name: n.inputs[i].type for i, name in caps}
    wanted = [k for k, o in enumerate(n.outputs) if o.type.dtype in FLOAT_TYPES]
    wrt = [name for i, name in caps if n.need(i)]
    branches = {key: body_vjp(n, n.op.attrs[key], types, wanted, wrt) for key in ("then_branch", "else_branch")}
    grads = [n.grad(k) for k in wanted]
    captured = [(name, n.inputs[i]) for i, name in caps] + [(f"d:{k}", g) for k, g in zip(wanted, grads)]
    outputs = [("loss", TensorType(grads[0].type.dtype, ()))] + [(f"grad_{j}", types[w]) for j, w in enumerate(wrt)]
    found = dict(zip(wrt, control_op(n, "If", [("cond", cond)], captured, outputs, branches)[1:]))
    return [found.get(name) if n.need(i) else None for i, name in ((i, captured_name(p)) for i, p in enumerate(n.op.inputs))]

def _loop_spec(n: GradNode) -> SimpleNamespace:
    """What the Loop rule reads off the op: carried values, which are float, body types."""
    f = SimpleNamespace(body=n.op.attrs["body"])
    f.regular, f.caps = input_parts(n)
    f.carried = [n.inputs[i] for i in f.regular[2:]]
    f.count = count = len(f.carried)
    f.formal = [p.name for p in f.body.inputs if not p.attrs.get("captured")]
    k = len(n.outputs) - count
    f.diff = [j for j, v in enumerate(f.carried) if v is not None and v.type.dtype in FLOAT_TYPES]
    f.ys = [j for j in range(k) if n.outputs[count + j].type.dtype in FLOAT_TYPES]
    f.types = {f.formal[0]: TensorType("int64", ()), f.formal[1]: TensorType("bool", ())}
    f.types.update({name: v.type for name, v in zip(f.formal[2:], f.carried)})
    f.types.update({name: n.inputs[i].type for i, name in f.caps})
    f.wrt_caps = [name for i, name in f.caps if n.need(i)]
    f.wrt = [f.formal[2 + j] for j in f.diff]
    f.captured = [(name, n.inputs[i]) for i, name in f.caps]
    return f

def _loop_reverse(n: GradNode, f: SimpleNamespace) -> tuple[Container, list[Value]]:
    """The backward Loop's body (iteration s reads step T-1-s of what the forward stacked) and
    the values it captures, in order."""
    g = body_vjp(n, f.body, f.types, [1 + j for j in f.diff] + [1 + f.count + j for j in f.ys], f.wrt + f.wrt_caps)
    it, going = Input("it", "int64", ()), Input("going", "bool", ())
    dc = inputs_like("dc_in", [f.carried[j].type for j in f.diff])
    acc = inputs_like("acc_in", [f.types[name] for name in f.wrt_caps])
    seen = [Input("iters", "int64", (None,))] + inputs_like("st", [stacked_type(v.type) for v in f.carried])
    dys = [Input(f"dy_{j}", n.outputs[f.count + j].type.dtype, None) for j in f.ys]
    total = Input("trips", "int64", ())
    cap_in = [Input(name, f.types[name].dtype, f.types[name].shape) for _, name in f.caps]
    t = ops.Sub(ops.Sub(total, np.array(1, np.int64)), it)
    step = [ops.Gather(v, t, axis=0) for v in seen]
    feed: dict[str, Value] = {f.formal[0]: step[0], f.formal[1]: ops.Identity(going),
                              **dict(zip(f.formal[2:], step[1:]))}
    feed.update({v.name: v for v in cap_in})
    feed.update({f"d:{1 + j}": v for j, v in zip(f.diff, dc)})
    feed.update({f"d:{1 + f.count + j}": ops.Gather(v, t, axis=0) for j, v in zip(f.ys, dys)})
    extra = seen + dys + [total] + cap_in
    body = reverse_body(n, g, feed, [it, going] + dc + acc + extra, acc,
                         {"carried": f.wrt, "caps": f.wrt_caps, "scanned": [], "captured": [v.name for v in extra]},
                         lead={"cond": ops.Identity(going)})
    return body, extra

def loop_vjp(n: GradNode) -> list:
    """Loop: the iterations again with their numbers and carried values stacked, then a Loop
    over as many iterations that reads them backwards (module doc)."""
    f = _loop_spec(n)
    # the iterations again, each one's number and carried values stacked as extra scan outputs
    regular_in = [(p, n.inputs[i]) for p, i in zip(["M", "cond"], f.regular[:2]) if n.inputs[i] is not None]
    again = control_op(n, "Loop", regular_in + [(f"v_{j}", v) for j, v in enumerate(f.carried)], f.captured,
                [(f"out_{j}", o.type) for j, o in enumerate(n.outputs)] + [("iters", TensorType("int64", (None,)))]
                + [(f"st_{j}", stacked_type(v.type)) for j, v in enumerate(f.carried)],
                {**n.own_attrs(), "body": with_extra_outputs(f.body, f.formal[:1] + f.formal[2:])})
    iters, stacked = again[len(n.outputs)], again[len(n.outputs) + 1:]
    trips = ops.Reshape(ops.Shape(iters), np.array([], np.int64))
    reverse, extra = _loop_reverse(n, f)
    init = [n.grad(j) for j in f.diff] + [zeros_like(n.inputs[i]) for i, name in f.caps if name in f.wrt_caps]
    outside = [iters, *stacked] + [n.grad(f.count + j) for j in f.ys] + [trips] + [n.inputs[i] for i, _ in f.caps]
    outs = control_op(n, "Loop", [("M", trips), ("cond", ops.Constant(value=np.array(True)))]
               + [(f"v_{j}", v) for j, v in enumerate(init)], list(zip([v.name for v in extra], outside)),
               [(f"dc_{j}", f.carried[j].type) for j in f.diff]
               + [(f"acc_{c}", f.types[nm]) for c, nm in enumerate(f.wrt_caps)], {"body": reverse})
    found: dict[Any, Value] = dict(zip([f.regular[2 + j] for j in f.diff], outs[:len(f.diff)]))
    found.update(zip(f.wrt_caps, outs[len(f.diff):]))
    return gradient_per_input(n, found)


define("If", type_rule=if_type, vjp=if_vjp)
define("Loop", type_rule=loop_type, vjp=loop_vjp)
