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
from typing import Any

import numpy as np

from amanda.autodiff.node import Node, const, zeros_like
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
