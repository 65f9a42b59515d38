"""``minimize(model, loss, optimizer)``: the training container. It holds the gradient
container of the model (weights as session variables) and the optimiser's container of update
ops, and exposes a ``train`` control port that runs one step: the optimiser's updates and the
model's own (BatchNorm's running statistics). Its outputs are the model's outputs.

>>> import numpy as np, amanda
>>> from amanda import Input, ops
>>> x = Input("x", "float32", (4, 1))
>>> w = ops.Constant(value=np.zeros((1, 1), np.float32), name="w")
>>> err = ops.Sub(ops.MatMul(x, w), ops.Mul(x, np.float32(3)))
>>> net = amanda.model([x], {"loss": ops.ReduceMean(ops.Mul(err, err), keepdims=0)}, name="fit")
>>> from amanda.optim import SGD
>>> step = minimize(net, "loss", SGD(lr=0.1), weights=["w"])
>>> with amanda.Session(step) as s:
...     for _ in range(50):
...         _ = s.run(["loss", "train"], {"x": np.ones((4, 1), np.float32)}, phase="train")
...     print(np.round(freeze(step, s).child("w").attrs["value"], 3))
[[3.]]
"""

from __future__ import annotations

from typing import Any

from amanda.autodiff import grad
from amanda.build import Input
from amanda.build.values import Call, Value
from amanda.containers import CONTROL, SELF, Container, Edge, Endpoint, Port
from amanda.containers.checks import expect_container, expect_str
from amanda.containers.update import target_paths
from amanda.errors import ArgumentError, PathError
from amanda.optim.optimizers import Optimizer, Slot
from amanda.optim.variables import default_weights, freeze, trainable
from amanda.types import to_attrs

__all__ = ["minimize"]
_ = freeze  # the doctest's name


def _gather(values: list[Value]) -> list[Call]:
    """Every call the values depend on, producers first."""
    order: list[Call] = []
    seen: set[int] = set()
    stack: list[tuple[Call, bool]] = [(v.producer, False) for v in reversed(values) if v.producer is not None]
    while stack:
        call, expanded = stack.pop()
        if expanded:
            order.append(call)
        elif id(call) not in seen:
            seen.add(id(call))
            stack.append((call, True))
            stack.extend((v.producer, False) for _, v in reversed(call.inputs) if v.producer is not None)
    return order


def _optimizer_container(optimizer: Optimizer, slots: list[Slot]) -> Container:
    """The optimiser's ops, fed by ports ``ref/<w>``, ``weight/<w>``, ``grad/<w>``, each update
    linked to its ``train`` control port."""
    updates = optimizer.updates(slots)
    placeholders = {id(v): v.name for s in slots for v in (s.ref, s.weight, s.grad)}
    children, edges = [], []
    for call in _gather(updates):
        children.append(call.op)
        for port, v in call.inputs:
            src = Endpoint(SELF, placeholders[id(v)]) if v.producer is None else Endpoint((v.producer.op.name,), v.port)
            edges.append(Edge(src, Endpoint((call.op.name,), port)))
    edges += [Edge(Endpoint((u.producer.op.name,), CONTROL), Endpoint(SELF, "train")) for u in updates
              if u.producer is not None]
    inputs = [Port(v.name, attrs=to_attrs(v.type) if v.type is not None else {}) for s in slots
              for v in (s.ref, s.weight, s.grad)]
    return Container(optimizer.kind, optimizer.kind.lower(), inputs=inputs, outputs=(), children=children, edges=edges,
                     controls=["train"])


def minimize(model: Container, loss: str, optimizer: Optimizer, weights: Any = None, *,
             name: str | None = None) -> Container:
    """The training container of ``model``: one step is ``session.run([loss, "train"], feeds,
    phase="train")``. ``weights``: paths or a Selection (default: the layer library's weights).
    :func:`amanda.optim.freeze` gives the trained inference model back."""
    if not isinstance(optimizer, Optimizer):
        raise ArgumentError.at("optimizer", "an optimiser such as amanda.optim.Adam(lr=1e-3)", type(optimizer).__name__)
    expect_container(model, "model")
    expect_str(loss, "loss", "the name of an output of the model")
    expect_str(name, "name", "a name for the training container", optional=True)
    paths = default_weights(model) if weights is None else target_paths(model, weights)
    held = trainable(model, paths)
    if not paths:
        raise PathError.at(model.name, "weights to train (Constant ops with an `init` attribute, or weights=)", "none")
    g = grad(held, loss, [tuple(p) for p in paths])
    forward = (g.name, held.name)
    slots = []
    for p in paths:
        label = "/".join(p)
        out = f"grad/{label}"
        port = next(o for o in g.outputs if o.name == out)
        dtype, shape = port.attrs.get("dtype"), port.attrs.get("shape")
        slots.append(Slot(label, Value(None, f"ref/{label}", None, f"ref/{label}"),
                          Input(f"weight/{label}", dtype, shape), Input(out, dtype, shape)))
    opt = _optimizer_container(optimizer, slots)
    edges = [Edge(Endpoint(SELF, i.name), Endpoint((g.name,), i.name)) for i in held.inputs]
    edges += [Edge(Endpoint(forward, o.name), Endpoint(SELF, o.name)) for o in held.outputs]
    for p in paths:
        label = "/".join(p)
        edges += [Edge(Endpoint((g.name,), f"grad/{label}"), Endpoint((opt.name,), f"grad/{label}")),
                  Edge(Endpoint((*forward, *p), held.descendant(p).outputs[0].name), Endpoint((opt.name,), f"weight/{label}")),
                  Edge(Endpoint((*forward, *p, "variable"), "ref"), Endpoint((opt.name,), f"ref/{label}"))]
    edges.append(Edge(Endpoint((opt.name,), "train"), Endpoint(SELF, "train")))
    if "train" in held.control_names:
        edges.append(Edge(Endpoint(forward, "train"), Endpoint(SELF, "train")))
    return Container("Training", name or f"{model.name}_training", inputs=held.inputs, outputs=held.outputs,
                     children=[g, opt], edges=edges,
                     attrs={"forward": forward, "loss": loss, "optimizer": repr(optimizer)}, controls=["train"])
