"""Rules by decomposition: an op written again as builder ops that already have rules, and
differentiated through them.

``composite(forward)`` makes a vector-Jacobian rule from ``forward(node) -> [Value per output]``,
a function that computes the op's outputs from ``node.inputs`` with differentiable builder ops
(an LSTM unrolled into MatMuls and activations, GroupNormalization into reductions). The rule
builds that computation in the backward part and runs a reverse pass through it with the rules
of its ops, so the op's gradient is exactly the gradient of the same function, and every new
op is one the table already differentiates (so ``grad(grad(...))`` works too). The forward is
computed again in the backward part: the price of reusing the rules.

>>> from amanda import op
>>> from amanda.build import Input, ops
>>> from amanda.autodiff.node import Node
>>> x = Input("x", "float64", (3,))
>>> rule = composite(lambda n: [ops.Mul(n.inputs[0], n.inputs[0])])   # x * x
>>> node = Node(("sq",), op("Neg", "sq", ["X"], ["Y"]), [x], [x], [Input("g", "float64", (3,))], [True])
>>> [c.op.type for c in calls_before(rule(node)[0], {id(x)})]  # (g * x) + (g * x)
['Mul', 'Mul', 'Sum']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amanda.autodiff.node import Node
from amanda.build import ops
from amanda.build.model import calls_in_order
from amanda.build.values import Call, Value
from amanda.errors import AmandaError

__all__ = ["by_port", "calls_before", "composite", "vjp_through"]


def _key(v: Value) -> tuple:
    return (id(v.producer), v.port) if v.producer is not None else (id(v), "")


def calls_before(value: Value, stop: set[int]) -> list[Call]:
    """The calls ``value`` depends on, producers first, not looking past values whose id is in
    ``stop`` (the op's inputs) or past inputs of the model."""
    return calls_in_order([("", value)], stop)


def _calls(outputs: list[Value | None], stop: set[int]) -> list[Call]:
    """Every call the outputs depend on, producers first, once each."""
    order: list[Call] = []
    seen: set[int] = set()
    for out in outputs:
        for call in calls_before(out, stop) if out is not None else []:
            if id(call) not in seen:
                seen.add(id(call))
                order.append(call)
    return order


def _forward(order: list[Call], varying: set[tuple]) -> dict[tuple, Value]:
    """Mark what depends on the varying inputs; every value the calls read, by key."""
    values: dict[tuple, Value] = {}
    for call in order:
        for _, v in call.inputs:
            values.setdefault(_key(v), v)
        if any(_key(v) in varying for _, v in call.inputs):
            varying.update((id(call), port.name) for port in call.op.outputs)
    return values


def _seed(n: Node, outputs: list[Value | None], varying: set[tuple], values: dict[tuple, Value]) -> dict:
    """The op's output gradients as the computation's (a rank the forward lost restored)."""
    contributions: dict[tuple, list[Value]] = {}
    for out, g in zip(outputs, n.grads):
        if out is None or g is None or _key(out) not in varying:
            continue
        if getattr(g.type, "rank", None) is None and getattr(out.type, "rank", None) is not None:
            g = ops.Reshape(g, ops.Shape(out))
        values.setdefault(_key(out), out)
        contributions.setdefault(_key(out), []).append(g)
    return contributions


def vjp_through(n: Node, outputs: list[Value | None], rule_of: Callable[[str], Any]) -> list:
    """The gradients of ``n``'s inputs, through the builder computation ``outputs`` (one
    Value, or None for an output the computation does not give, per output of ``n``) that
    was built from ``n.inputs``; ``rule_of(op_type)`` gives each inner op's rule."""
    order = _calls(outputs, {id(v) for v in n.inputs if v is not None})
    varying = {_key(v) for i, v in enumerate(n.inputs) if v is not None and n.need(i)}
    values = _forward(order, varying)
    contributions = _seed(n, outputs, varying, values)
    for call in reversed(order):
        _back_through(n, call, contributions, varying, values, rule_of)
    return [(_total(contributions, _key(v)) if v is not None and n.need(i) else None)
            for i, v in enumerate(n.inputs)]


def _back_through(n: Node, call: Call, contributions: dict[tuple, list[Value]], varying: set, values: dict,
                  rule_of: Callable[[str], Any]) -> None:
    """Add to ``contributions`` the gradients of ``call``'s inputs, by its own rule, from
    those of its outputs (nothing when none of them varies or has a gradient)."""
    outs = [(id(call), port.name) for port in call.op.outputs]
    grads = [_total(contributions, k) for k in outs]
    if all(g is None for g in grads) or not any(k in varying for k in outs):
        return
    given = dict(call.inputs)
    inner_inputs = [given.get(port.name) for port in call.op.inputs]
    needs = [v is not None and _key(v) in varying for v in inner_inputs]
    out_values = [values.get(k) or Value(call, k[1], _like(call, grads), f"{call.op.name}.{k[1]}") for k in outs]
    inner = Node(n.path, call.op, inner_inputs, out_values, grads, needs, n.namespace)
    for v, need, g in zip(inner_inputs, needs, rule_of(str(call.op.type))(inner)):
        if need and g is not None and v is not None:
            contributions.setdefault(_key(v), []).append(g)


def _like(call: Call, grads: list) -> Any:
    """A type for an output nothing referenced: its gradient's (which has the same shape)."""
    return next(g.type for g in grads if g is not None)


def _total(contributions: dict[tuple, list[Value]], key: tuple) -> Value | None:
    parts = contributions.get(key)
    if not parts:
        return None
    if len(parts) > 1:
        contributions[key] = [ops.Sum(*parts)]
    return contributions[key][0]


def by_port(n: Node, outputs: list) -> list:
    """``outputs`` (one per output of the op's schema, in order) picked for the op's own output
    ports: an imported op keeps only the outputs its model uses (an LSTM's ``Y_h`` alone)."""
    from amanda.namespaces.namespace import namespace as lookup_namespace

    try:
        names = [p.name for p in lookup_namespace(n.namespace).schema(str(n.op.type)).outputs]
    except AmandaError:
        return outputs[:len(n.outputs)]
    picked = []
    for i, port in enumerate(n.op.outputs):
        name = str(port.attrs.get("onnx_name", port.name))
        picked.append(outputs[names.index(name)] if name in names and names.index(name) < len(outputs)
                      else outputs[i] if i < len(outputs) else None)
    return picked


def composite(forward: Callable[[Node], list]) -> Callable[[Node], list]:
    """A vector-Jacobian rule differentiating ``forward(node)``, the op written as builder
    ops (see the module doc)."""

    def vjp(n: Node) -> list:
        from amanda.autodiff.rules import ONNX, RULES  # the table holds composite rules too

        return vjp_through(n, by_port(n, list(forward(n))), lambda op_type: RULES[(ONNX, op_type)])

    vjp.__name__ = vjp.__qualname__ = f"{getattr(forward, '__name__', 'forward').lstrip('_')}_vjp"
    vjp.__module__ = forward.__module__
    vjp.__doc__ = forward.__doc__
    return vjp
