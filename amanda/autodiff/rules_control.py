"""The machinery of the control-flow ops' vector-Jacobian rules (the rules of If, Loop and Scan
are registered in :mod:`amanda.opset.onnx.control_flow` and :mod:`amanda.opset.onnx.scan`).

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

from amanda.autodiff.node import Node
from amanda.build import Input, ops
from amanda.build.model import apply, model
from amanda.build.values import Call, Value
from amanda.containers import Container, Port
from amanda.types.tensor_type import TensorType

__all__ = ["FLOAT_TYPES", "body_vjp", "captured_inputs", "captured_name", "control_op", "expect_floats",
           "gradient_per_input", "input_parts", "inputs_like", "reverse_body", "stacked_type", "with_extra_outputs",
           "without_axis"]

#: the dtypes a Scan or Loop differentiates through
FLOAT_TYPES = ("float16", "float32", "float64", "bfloat16")
_count = itertools.count()


def captured_name(port: Port) -> str:
    """The name a body reads a captured port by (the importer keeps a renamed one in onnx_name)."""
    return str(port.attrs.get("onnx_name", port.name))


def body_vjp(n: Node, body: Container, types: dict[str, Any], cotangents: Sequence[int],
             wrt: Sequence[str]) -> Container:
    """``grad`` of ``body`` under the loss ``sum(output_k * d_k)`` for the outputs ``cotangents``:
    a container with inputs ``[*types, d:k...]`` (all captured; ``types`` gives a type to each
    name, the body's inputs and any more) and outputs ``loss`` and ``grad/<name>`` per name of ``wrt``."""
    from amanda.autodiff.transform import grad

    values = {name: Input(name, t.dtype, t.shape) for name, t in types.items()}
    names = [captured_name(p) if p.attrs.get("captured") else p.name for p in body.inputs]
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


def control_op(n: Node, op_type: str, regular: list[tuple[str, Value]], captured: list[tuple[str, Value]],
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


def captured_inputs(n: Node) -> list[tuple[int, str]]:
    """(index, name) of each captured input of the op that is fed a value."""
    return [(i, captured_name(p)) for i, p in enumerate(n.op.inputs) if p.attrs.get("captured") and n.inputs[i] is not None]


def expect_floats(n: Node, values: Sequence[Value], what: str) -> None:
    """Fail (naming the op) unless every value is of a floating-point dtype: ``what`` says which values."""
    for v in values:
        if v.type.dtype not in FLOAT_TYPES:
            raise n.fail(f"floating-point {what}", f"{v.type!r}")


def without_axis(t: Any, axis: int) -> TensorType:
    """Tensor type ``t`` without its axis ``axis`` (negative counts from the end): one step of a scan input."""
    shape = None if t.shape is None else tuple(d for j, d in enumerate(t.shape) if j != axis % len(t.shape))
    return TensorType(t.dtype, shape)


def stacked_type(t: Any) -> TensorType:
    """Tensor type ``t`` with a leading axis of unknown length: one value per step."""
    return TensorType(t.dtype, None if t.shape is None else (None, *t.shape))


def with_extra_outputs(body: Container, names: Sequence[str]) -> Container:
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


def input_parts(n: Node) -> tuple[list[int], list[tuple[int, str]]]:
    """The indices of the op's regular inputs, and (index, name) of its captured ones."""
    regular = [i for i, p in enumerate(n.op.inputs) if not p.attrs.get("captured")]
    return regular, captured_inputs(n)


def reverse_body(n: Node, g: Container, feed: dict[str, Value], inputs: list[Value], acc: list[Value],
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


def inputs_like(prefix: str, values: Sequence[Any]) -> list[Value]:
    """One builder Input per type of ``values``, named ``<prefix>_<j>``."""
    return [Input(f"{prefix}_{j}", t.dtype, t.shape) for j, t in enumerate(values)]


def gradient_per_input(n: Node, found: dict) -> list:
    """One gradient per input of the op: ``found`` keys a regular input by index, a captured
    one by its name."""
    return [(found.get(captured_name(p)) if p.attrs.get("captured") else found.get(i)) if n.need(i) else None
            for i, p in enumerate(n.op.inputs)]
