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
from amanda.autodiff.transform import namespace_of
from amanda.build import Input, Ops
from amanda.build.values import Call, Value
from amanda.containers import CONTROL, SELF, Container, Edge, Endpoint, Port
from amanda.containers.arguments import expect_container, expect_str
from amanda.containers.uids import refuse_uid_clashes, uid_places
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
    :func:`amanda.optim.freeze` gives the trained inference model back. A weight shared on
    purpose (one uid in several places: a layer applied twice, ``layers.tie``) is one variable,
    stepped once by the sum of its places' gradients. A model in which two nodes of other
    content share a uid is refused (``InvariantError`` naming both paths)."""
    if not isinstance(optimizer, Optimizer):
        raise ArgumentError.at("optimizer", "an optimiser such as amanda.optim.Adam(lr=1e-3)", type(optimizer).__name__)
    expect_container(model, "model")
    expect_str(loss, "loss", "the name of an output of the model")
    expect_str(name, "name", "a name for the training container", optional=True)
    refuse_uid_clashes(model, "minimize")  # weights train by uid: a clash would train two as one
    chosen = default_weights(model) if weights is None else target_paths(model, weights)
    if not chosen:
        raise PathError.at(model.name, "weights to train (Constant ops with an `init` attribute, or weights=)", "none")
    groups = _places(model, chosen)
    paths = [p for group in groups for p in group]
    held = trainable(model, paths)
    g = grad(held, loss, paths)
    forward = (g.name, held.name)
    slots = []
    for group in groups:
        label = "/".join(group[0])
        out = f"grad/{label}"
        port = next(o for o in g.outputs if o.name == out)
        dtype, shape = port.attrs.get("dtype"), port.attrs.get("shape")
        slots.append(Slot(label, Value(None, f"ref/{label}", None, f"ref/{label}"),
                          Input(f"weight/{label}", dtype, shape), Input(out, dtype, shape)))
    opt = _optimizer_container(optimizer, slots)
    children = [g, opt]
    edges = [Edge(Endpoint(SELF, i.name), Endpoint((g.name,), i.name)) for i in held.inputs]
    edges += [Edge(Endpoint(forward, o.name), Endpoint(SELF, o.name)) for o in held.outputs]
    for group, slot in zip(groups, slots):
        p, label = group[0], slot.label
        if len(group) == 1:
            edges.append(Edge(Endpoint((g.name,), f"grad/{label}"), Endpoint((opt.name,), f"grad/{label}")))
        else:  # a shared weight: the gradients of its places add up
            total, feeds = _sum(group, namespace_of(model), slot.grad)
            children.append(total)
            edges += [Edge(Endpoint((g.name,), src), Endpoint((total.name,), port)) for port, src in feeds]
            edges.append(Edge(Endpoint((total.name,), total.outputs[0].name), Endpoint((opt.name,), f"grad/{label}")))
        edges += [Edge(Endpoint((*forward, *p), held.descendant(p).outputs[0].name), Endpoint((opt.name,), f"weight/{label}")),
                  Edge(Endpoint((*forward, *p, "variable"), "ref"), Endpoint((opt.name,), f"ref/{label}"))]
    edges.append(Edge(Endpoint((opt.name,), "train"), Endpoint(SELF, "train")))
    if "train" in held.control_names:
        edges.append(Edge(Endpoint(forward, "train"), Endpoint(SELF, "train")))
    return Container("Training", name or f"{model.name}_training", inputs=held.inputs, outputs=held.outputs,
                     children=children, edges=edges,
                     attrs={"forward": forward, "loss": loss, "optimizer": repr(optimizer)}, controls=["train"])


def _places(model: Container, chosen: list) -> list[list[tuple[str, ...]]]:
    """The chosen weights grouped by uid, each with every place its uid has in ``model``: a
    weight shared on purpose (a layer applied twice, a tie) is one weight, trained once."""
    places = uid_places(model)
    groups: dict[str, list[tuple[str, ...]]] = {}
    for p in chosen:
        uid = model.descendant(p).uid
        groups.setdefault(uid, [tuple(q) for q in places[uid]])
    return list(groups.values())


def _sum(group: list[tuple[str, ...]], namespace: str, like: Value) -> tuple[Container, list[tuple[str, str]]]:
    """A ``Sum`` op adding the gradients of each place of one weight, and per input port the
    name of the gradient output that feeds it."""
    parts = [Input(f"grad/{'/'.join(p)}", like.type.dtype, like.type.shape) for p in group]
    call = Ops(namespace).Sum(*parts, name=f"sum/{'/'.join(group[0])}").producer
    assert call is not None  # an op's output
    return call.op, [(port, v.name) for port, v in call.inputs]
