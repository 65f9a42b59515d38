"""Vector-Jacobian rules of control flow: If, Scan and Loop.

A body's vector-Jacobian product is itself a body: :func:`body_vjp` wraps the body with one
cotangent input per differentiated output and a loss ``sum(output * cotangent)``, and
``grad`` of that is a container whose outputs are the body inputs' gradients. The backward
ops are control flow again, so the backward part runs (and exports) like the forward:

- **If**: an If on the same condition whose branches are the two branches' products: the
  taken branch is differentiated, at run time. Gradients reach the values the branches read
  from outside (``captured`` ports).
- **Scan**: the forward Scan again with each step's states as extra scan outputs, then a
  Scan over the steps in reverse order whose state is the states' cotangents (and the sums of
  the captured values' gradients) and whose scan outputs are the scan inputs' gradients.
  Every scan axis and direction; all states and scan inputs must be floating point.
- **Loop**: the same, with the forward Loop's iteration numbers and carried values stacked,
  and a backward Loop over as many iterations that reads them backwards. The loop's trip
  count and condition get no gradient; the condition a body computes is followed as it was.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from amanda.autodiff.node import Node, zeros_like
from amanda.build import Input, ops
from amanda.build.model import apply, model
from amanda.build.values import Call, Value
from amanda.containers import Container, Port
from amanda.types.tensor_type import TensorType

__all__ = ["body_vjp", "if_vjp", "loop_vjp", "scan_vjp"]

_FLOATS = ("float16", "float32", "float64", "bfloat16")
_count = itertools.count()


def _name(port: Port) -> str:
    """The name a body reads a captured port by (the importer keeps a renamed one in onnx_name)."""
    return str(port.attrs.get("onnx_name", port.name))


def body_vjp(n: Node, body: Container, types: dict[str, Any], cotangents: Sequence[int],
             wrt: Sequence[str]) -> Container:
    """``grad`` of ``body`` under the loss ``sum(output_k * d_k)`` for the outputs ``cotangents``:
    a container with inputs ``[*types, d:k...]`` (all captured; ``types`` gives a type to each
    name, the body's inputs and any more) and outputs ``loss`` and ``grad/<name>`` per name of ``wrt``."""
    from amanda.autodiff.transform import grad

    values = {name: Input(name, t.dtype, t.shape) for name, t in types.items()}
    names = [_name(p) if p.attrs.get("captured") else p.name for p in body.inputs]
    outs = apply(body, *[values[name] for name in names])
    outs = outs if isinstance(outs, tuple) else (outs,)
    dvalues = [Input(f"d:{k}", outs[k].type.dtype, outs[k].type.shape) for k in cotangents]
    terms = [ops.ReduceSum(ops.Mul(outs[k], d), keepdims=0) for k, d in zip(cotangents, dvalues)]
    loss = terms[0] if len(terms) == 1 else ops.Sum(*terms)
    inputs = list(values.values()) + dvalues
    wrapped = model(inputs, {"loss": loss}, name=f"{body.name or 'body'}_vjp", attrs={"namespace": n.namespace})
    g = grad(wrapped, "loss", list(wrt), phase=None)
    return _captured(g, set(p.name for p in g.inputs))


def _captured(c: Container, names: set[str]) -> Container:
    """``c`` with its inputs among ``names`` marked ``captured``."""
    ports = [Port(p.name, attrs={**p.attrs, "captured": True}) if p.name in names else p for p in c.inputs]
    return Container(c.type, c.name, inputs=ports, outputs=c.outputs, children=c.children, edges=c.edges,
                     attrs=c.attrs, controls=c.controls)


def _op(n: Node, op_type: str, regular: list[tuple[str, Value]], captured: list[tuple[str, Value]],
        outputs: list[tuple[str, Any]], attrs: dict[str, Any]) -> list[Value]:
    """A control-flow op built by hand (the builder has no captured ports): its output Values."""
    taken = {name for name, _ in regular}
    ports = [Port(name) for name, _ in regular]
    wired = list(regular)
    for name, value in captured:
        port = f"{name}__captured" if name in taken else name
        ports.append(Port(port, attrs={"captured": True, **({"onnx_name": name} if port != name else {})}))
        wired.append((port, value))
    label = f"{op_type}_vjp_{next(_count)}"
    op = Container(op_type, label, inputs=ports, outputs=[name for name, _ in outputs],
                   attrs={**attrs, "namespace": "amanda/onnx/17"})
    call = Call(op, tuple(wired))
    return [Value(call, name, t, f"{label}.{name}") for name, t in outputs]


def _captured_inputs(n: Node) -> list[tuple[int, str]]:
    return [(i, _name(p)) for i, p in enumerate(n.op.inputs) if p.attrs.get("captured") and n.inputs[i] is not None]


def if_vjp(n: Node) -> list:
    """If: an If of the branches' products on the same condition (module doc)."""
    cond = n.given(0)
    caps = _captured_inputs(n)
    types = {name: n.inputs[i].type for i, name in caps}
    wanted = [k for k, o in enumerate(n.outputs) if o.type.dtype in _FLOATS]
    wrt = [name for i, name in caps if n.need(i)]
    branches = {key: body_vjp(n, n.op.attrs[key], types, wanted, wrt) for key in ("then_branch", "else_branch")}
    grads = [n.grad(k) for k in wanted]
    captured = [(name, n.inputs[i]) for i, name in caps] + [(f"d:{k}", g) for k, g in zip(wanted, grads)]
    outputs = [("loss", TensorType(grads[0].type.dtype, ()))] + [(f"grad_{j}", types[w]) for j, w in enumerate(wrt)]
    found = dict(zip(wrt, _op(n, "If", [("cond", cond)], captured, outputs, branches)[1:]))
    return [found.get(name) if n.need(i) else None for i, name in ((i, _name(p)) for i, p in enumerate(n.op.inputs))]


def _float(n: Node, values: Sequence[Value], what: str) -> None:
    for v in values:
        if v.type.dtype not in _FLOATS:
            raise n.fail(f"floating-point {what}", f"{v.type!r}")


def _dropped(t: Any, axis: int) -> TensorType:
    shape = None if t.shape is None else tuple(d for j, d in enumerate(t.shape) if j != axis % len(t.shape))
    return TensorType(t.dtype, shape)


def _stacked(t: Any) -> TensorType:
    return TensorType(t.dtype, None if t.shape is None else (None, *t.shape))


def _with_extra_outputs(body: Container, names: Sequence[str]) -> Container:
    """``body`` with each of its inputs ``names`` also given out (as an Identity), after its outputs."""
    from amanda.containers import SELF, Edge, Endpoint
    from amanda.containers.container import op

    kids, edges, outs = list(body.children), list(body.edges), list(body.outputs)
    for j, name in enumerate(names):
        copy = op("Identity", f"stacked_{j}_{next(_count)}", ["input"], ["output"])
        kids.append(copy)
        outs.append(Port(f"stacked_{j}"))
        edges += [Edge(Endpoint(SELF, name), Endpoint((copy.name,), "input")),
                  Edge(Endpoint((copy.name,), "output"), Endpoint(SELF, f"stacked_{j}"))]
    return Container(body.type, body.name, inputs=body.inputs, outputs=outs, children=kids, edges=edges,
                     attrs=body.attrs, controls=body.controls)


def _parts(n: Node) -> tuple[list[int], list[tuple[int, str]]]:
    """The indices of the op's regular inputs, and (index, name) of its captured ones."""
    regular = [i for i, p in enumerate(n.op.inputs) if not p.attrs.get("captured")]
    return regular, _captured_inputs(n)


def _reverse_body(n: Node, g: Container, feed: dict[str, Value], inputs: list[Value], acc: list[Value],
                  names: dict[str, list[str]], lead: dict[str, Value] | None = None) -> Container:
    """The body of the backward Scan or Loop: ``g`` fed this step's values (``feed``, by g's
    input names), giving ``lead`` (Loop's condition), the previous step's cotangents
    (``names["carried"]``), the captured gradients added to their sums ``acc``
    (``names["caps"]``) and scan outputs (``names["scanned"]``)."""
    outs = apply(g, *[feed[p.name] for p in g.inputs])
    by_name = dict(zip(g.output_names, outs if isinstance(outs, tuple) else (outs,)))
    results: dict[str, Value] = dict(lead or {})
    results.update({f"dc_{j}": by_name[f"grad/{name}"] for j, name in enumerate(names["carried"])})
    results.update({f"acc_{c}": ops.Add(a, by_name[f"grad/{name}"]) for c, (a, name) in enumerate(zip(acc, names["caps"]))})
    results.update({f"dx_{m}": by_name[f"grad/{name}"] for m, name in enumerate(names["scanned"])})
    body = model(inputs, results, name="reverse", attrs={"namespace": n.namespace})
    return _captured(body, set(names["captured"]))


def _inputs(prefix: str, values: Sequence[Any]) -> list[Value]:
    return [Input(f"{prefix}_{j}", t.dtype, t.shape) for j, t in enumerate(values)]


def _answer(n: Node, found: dict) -> list:
    """One gradient per input of the op: ``found`` keys a regular input by index, a captured
    one by its name."""
    return [(found.get(_name(p)) if p.attrs.get("captured") else found.get(i)) if n.need(i) else None
            for i, p in enumerate(n.op.inputs)]


def _scan_spec(n: Node) -> SimpleNamespace:
    """What the Scan rule reads off the op: states, scan inputs, axes, directions, body types."""
    if n.opset is not None and n.opset < 9:
        raise n.fail("Scan of opset 9 or later", f"opset {n.opset}")
    f = SimpleNamespace(body=n.op.attrs["body"])
    f.regular, f.caps = _parts(n)
    m = int(n.attr("num_scan_inputs"))
    f.count = count = len(f.regular) - m
    f.states, f.xs = [n.inputs[i] for i in f.regular[:count]], [n.inputs[i] for i in f.regular[count:]]
    _float(n, [*f.states, *f.xs], "states and scan inputs")
    f.formal = [p.name for p in f.body.inputs if not p.attrs.get("captured")]
    k = len(n.outputs) - count
    f.in_axes, f.in_dirs, f.out_axes, f.out_dirs = _scan_axes(n, m, k)
    f.types = {name: v.type for name, v in zip(f.formal, f.states)}
    f.types.update({name: _dropped(v.type, a) for name, v, a in zip(f.formal[count:], f.xs, f.in_axes)})
    f.types.update({name: n.inputs[i].type for i, name in f.caps})
    f.ys = [j for j in range(k) if n.outputs[count + j].type.dtype in _FLOATS]
    f.wrt_caps = [name for i, name in f.caps if n.need(i)]
    f.captured = [(name, n.inputs[i]) for i, name in f.caps]
    return f


def _scan_axes(n: Node, m: int, k: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """The Scan's axes and directions of its ``m`` scan inputs and ``k`` scan outputs (0:
    the first axis, forward, where the op does not say)."""
    return ([int(a) for a in (n.attr("scan_input_axes") or [0] * m)],
            [int(d) for d in (n.attr("scan_input_directions") or [0] * m)],
            [int(a) for a in (n.attr("scan_output_axes") or [0] * k)],
            [int(d) for d in (n.attr("scan_output_directions") or [0] * k)])


def _scan_reverse(n: Node, f: SimpleNamespace) -> Container:
    """The backward Scan's body: this step's states and inputs, the cotangents carried."""
    g = body_vjp(n, f.body, f.types, list(range(f.count)) + [f.count + j for j in f.ys], f.formal + f.wrt_caps)
    dc = _inputs("dc_in", [v.type for v in f.states])
    acc = _inputs("acc_in", [f.types[name] for name in f.wrt_caps])
    s_in = _inputs("s", [v.type for v in f.states])
    x_in = _inputs("x", [f.types[name] for name in f.formal[f.count:]])
    dy = [Input(f"dy_{j}", n.outputs[f.count + j].type.dtype, None) for j in f.ys]
    cap_in = [Input(name, f.types[name].dtype, f.types[name].shape) for _, name in f.caps]
    feed = {**dict(zip(f.formal, s_in + x_in)), **{v.name: v for v in cap_in}}
    feed.update({f"d:{j}": v for j, v in enumerate(dc)})
    feed.update({f"d:{f.count + j}": v for j, v in zip(f.ys, dy)})
    return _reverse_body(n, g, feed, dc + acc + s_in + x_in + dy + cap_in, acc,
                         {"carried": f.formal[:f.count], "caps": f.wrt_caps, "scanned": f.formal[f.count:],
                          "captured": [v.name for v in cap_in]})


def scan_vjp(n: Node) -> list:
    """Scan (opset 9 on): the steps again with their states stacked, then a Scan over the steps
    in reverse (module doc)."""
    f = _scan_spec(n)
    count = f.count
    # the forward again, each step's states stacked as extra scan outputs
    again = _op(n, "Scan", [(f"in_{j}", v) for j, v in enumerate([*f.states, *f.xs])], f.captured,
                [(f"out_{j}", o.type) for j, o in enumerate(n.outputs)]
                + [(f"st_{j}", _stacked(v.type)) for j, v in enumerate(f.states)],
                {**n.own_attrs(), "body": _with_extra_outputs(f.body, f.formal[:count]),
                 "scan_output_axes": f.out_axes + [0] * count, "scan_output_directions": f.out_dirs + [0] * count})
    # the backward Scan: its states are the cotangents and the captured sums, its steps reversed
    init = [n.grad(j) for j in range(count)] + [zeros_like(n.inputs[i]) for i, name in f.caps if name in f.wrt_caps]
    scans = again[len(n.outputs):] + f.xs + [n.grad(count + j) for j in f.ys]
    outs = _op(n, "Scan", [(f"in_{j}", v) for j, v in enumerate(init + scans)], f.captured,
               [(f"dc_{j}", v.type) for j, v in enumerate(f.states)]
               + [(f"acc_{c}", f.types[name]) for c, name in enumerate(f.wrt_caps)]
               + [(f"dx_{j}", v.type) for j, v in enumerate(f.xs)],
               {"body": _scan_reverse(n, f), "num_scan_inputs": len(scans),
                "scan_input_axes": [0] * count + f.in_axes + [f.out_axes[j] for j in f.ys],
                "scan_input_directions": [1] * count + [1 - d for d in f.in_dirs] + [1 - f.out_dirs[j] for j in f.ys],
                "scan_output_axes": f.in_axes, "scan_output_directions": [1 - d for d in f.in_dirs]})
    found: dict[Any, Value] = dict(zip(f.regular, outs[:count] + outs[count + len(f.wrt_caps):]))
    found.update(zip(f.wrt_caps, outs[count:count + len(f.wrt_caps)]))
    return _answer(n, found)


def _loop_spec(n: Node) -> SimpleNamespace:
    """What the Loop rule reads off the op: carried values, which are float, body types."""
    f = SimpleNamespace(body=n.op.attrs["body"])
    f.regular, f.caps = _parts(n)
    f.carried = [n.inputs[i] for i in f.regular[2:]]
    f.count = count = len(f.carried)
    f.formal = [p.name for p in f.body.inputs if not p.attrs.get("captured")]
    k = len(n.outputs) - count
    f.diff = [j for j, v in enumerate(f.carried) if v is not None and v.type.dtype in _FLOATS]
    f.ys = [j for j in range(k) if n.outputs[count + j].type.dtype in _FLOATS]
    f.types = {f.formal[0]: TensorType("int64", ()), f.formal[1]: TensorType("bool", ())}
    f.types.update({name: v.type for name, v in zip(f.formal[2:], f.carried)})
    f.types.update({name: n.inputs[i].type for i, name in f.caps})
    f.wrt_caps = [name for i, name in f.caps if n.need(i)]
    f.wrt = [f.formal[2 + j] for j in f.diff]
    f.captured = [(name, n.inputs[i]) for i, name in f.caps]
    return f


def _loop_reverse(n: Node, f: SimpleNamespace) -> tuple[Container, list[Value]]:
    """The backward Loop's body (iteration s reads step T-1-s of what the forward stacked) and
    the values it captures, in order."""
    g = body_vjp(n, f.body, f.types, [1 + j for j in f.diff] + [1 + f.count + j for j in f.ys], f.wrt + f.wrt_caps)
    it, going = Input("it", "int64", ()), Input("going", "bool", ())
    dc = _inputs("dc_in", [f.carried[j].type for j in f.diff])
    acc = _inputs("acc_in", [f.types[name] for name in f.wrt_caps])
    seen = [Input("iters", "int64", (None,))] + _inputs("st", [_stacked(v.type) for v in f.carried])
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
    body = _reverse_body(n, g, feed, [it, going] + dc + acc + extra, acc,
                         {"carried": f.wrt, "caps": f.wrt_caps, "scanned": [], "captured": [v.name for v in extra]},
                         lead={"cond": ops.Identity(going)})
    return body, extra


def loop_vjp(n: Node) -> list:
    """Loop: the iterations again with their numbers and carried values stacked, then a Loop
    over as many iterations that reads them backwards (module doc)."""
    f = _loop_spec(n)
    # the iterations again, each one's number and carried values stacked as extra scan outputs
    regular_in = [(p, n.inputs[i]) for p, i in zip(["M", "cond"], f.regular[:2]) if n.inputs[i] is not None]
    again = _op(n, "Loop", regular_in + [(f"v_{j}", v) for j, v in enumerate(f.carried)], f.captured,
                [(f"out_{j}", o.type) for j, o in enumerate(n.outputs)] + [("iters", TensorType("int64", (None,)))]
                + [(f"st_{j}", _stacked(v.type)) for j, v in enumerate(f.carried)],
                {**n.own_attrs(), "body": _with_extra_outputs(f.body, f.formal[:1] + f.formal[2:])})
    iters, stacked = again[len(n.outputs)], again[len(n.outputs) + 1:]
    trips = ops.Reshape(ops.Shape(iters), np.array([], np.int64))
    reverse, extra = _loop_reverse(n, f)
    init = [n.grad(j) for j in f.diff] + [zeros_like(n.inputs[i]) for i, name in f.caps if name in f.wrt_caps]
    outside = [iters, *stacked] + [n.grad(f.count + j) for j in f.ys] + [trips] + [n.inputs[i] for i, _ in f.caps]
    outs = _op(n, "Loop", [("M", trips), ("cond", ops.Constant(value=np.array(True)))]
               + [(f"v_{j}", v) for j, v in enumerate(init)], list(zip([v.name for v in extra], outside)),
               [(f"dc_{j}", f.carried[j].type) for j in f.diff]
               + [(f"acc_{c}", f.types[nm]) for c, nm in enumerate(f.wrt_caps)], {"body": reverse})
    found: dict[Any, Value] = dict(zip([f.regular[2 + j] for j in f.diff], outs[:len(f.diff)]))
    found.update(zip(f.wrt_caps, outs[len(f.diff):]))
    return _answer(n, found)
