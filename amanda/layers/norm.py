"""BatchNorm (two computations, bound by phase), LayerNorm, and ``freeze``.

BatchNorm keeps its running statistics in session variables (``amanda/core`` ``Variable`` ops,
keyed by their uids like weights). In the ``train`` phase it normalises by the batch statistics
and its ``train`` control port runs the updates of the running statistics (ONNX's
``momentum``: ``running = running * momentum + batch * (1 - momentum)``); in ``inference`` it
normalises by the running statistics. :func:`freeze` turns the variables into initializers
holding their current values and keeps one phase: what ONNX export and onnxruntime need.

>>> import amanda, numpy as np
>>> bn = BatchNorm(2)
>>> x = np.array([[1, 10], [3, 30]], np.float32)
>>> with amanda.Session(bn) as session:
...     train, _ = session.run(["y", "train"], {"x": x}, phase="train")
...     infer = session.run(["y"], {"x": x}, phase="inference")[0]
>>> np.round(train, 3).tolist()
[[-1.0, -1.0], [1.0, 1.0]]
>>> [round(float(v), 3) for v in session.state[bn.child("moving_mean").uid]]
[0.2, 2.0]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.build import Ops, ops
from amanda.build.builder import DEFAULT_NAMESPACE
from amanda.containers.arguments import brief
from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Endpoint
from amanda.containers.phases import bind
from amanda.containers.traverse import walk
from amanda.containers.uids import key_of
from amanda.errors import ArgumentError
from amanda.layers.base import assemble, assemble_phased, first, float_input, positive, probability
from amanda.layers.init import Weights
from amanda.namespaces.schema import suggest

__all__ = ["BatchNorm", "LayerNorm", "freeze", "variable_keys"]

CORE = "amanda/core"
_core = Ops(CORE)


def BatchNorm(channels: int, *, momentum: float = 0.9, epsilon: float = 1e-5,  # noqa: N802
              name: str = "batchnorm", seed: int | None = None) -> Container:
    """Batch normalisation over axis 1 (``[batch, channels, ...]``), with a learnt ``scale``
    (ones) and ``bias`` (zeros); running mean and variance start at zeros and ones."""
    c = positive("BatchNorm", "channels", channels)
    m = probability("BatchNorm", "momentum", momentum)
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon > 0:
        raise ArgumentError.at(("BatchNorm", "epsilon"), "a positive number", brief(epsilon))
    x = float_input()
    w = Weights()
    scale, bias = w.add("scale", (c,), "ones", (c, c)), w.add("bias", (c,), "zeros", (c, c))
    mean_ref, var_ref = w.variable("moving_mean", (c,), "zeros"), w.variable("moving_var", (c,), "ones")
    mean = _core.Read(mean_ref, name="read_mean")
    var = _core.Read(var_ref, name="read_var")
    # in inference mode ONNX allows only the output Y
    infer = first(ops.BatchNormalization(x, scale, bias, mean, var, epsilon=float(epsilon), momentum=m,
                                         name="normalize"))
    train, new_mean, new_var = ops.BatchNormalization(x, scale, bias, mean, var, epsilon=float(epsilon),
                                                      momentum=m, training_mode=1, name="normalize_batch")
    updates = [_core.Assign(mean_ref, new_mean, name="update_mean"),
               _core.Assign(var_ref, new_var, name="update_var")]
    attrs = {"channels": c, "momentum": m, "epsilon": float(epsilon), "weights": w.specs}
    return assemble_phased("BatchNorm", name, x, {"train": train, "inference": infer}, updates, attrs, seed)


def LayerNorm(features: int, *, epsilon: float = 1e-5, name: str = "layernorm", seed: int | None = None) -> Container:  # noqa: N802
    """Normalisation over the last axis (of size ``features``) with a learnt ``scale`` and ``bias``."""
    f = positive("LayerNorm", "features", features)
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon > 0:
        raise ArgumentError.at(("LayerNorm", "epsilon"), "a positive number", brief(epsilon))
    x = float_input()
    w = Weights()
    scale, bias = w.add("scale", (f,), "ones", (f, f)), w.add("bias", (f,), "zeros", (f, f))
    y = first(ops.LayerNormalization(x, scale, bias, axis=-1, epsilon=float(epsilon), name="normalize"))
    return assemble("LayerNorm", name, [x], y, {"features": f, "epsilon": float(epsilon), "weights": w.specs}, seed)


# Variable and Read become Constant and Identity: their ports, renamed
_PORTS = {("Variable", "ref"): "output", ("Read", "ref"): "input", ("Read", "value"): "output"}


def _is_core(node: Container, types: tuple[str, ...] = ("Variable", "Read")) -> bool:
    return node.is_op and node.attrs.get("namespace") == CORE and node.type in types


def variable_keys(model: Container) -> set[str]:
    """The state keys of the ``amanda/core`` variables in ``model`` (``shared_name``, else uid)."""
    return {key_of(node) for _, node, _ in walk(model) if _is_core(node, ("Variable",))}


def _frozen_op(op: Container, state: Mapping[str, Any]) -> Container:
    attrs = dict(op.attrs)
    if op.type == "Variable":
        key = key_of(op)
        value = np.asarray(state[key]) if key in state else attrs["value"]
        attrs.update(value=value, namespace=DEFAULT_NAMESPACE, initializer=True)
        return Container("Constant", op.name, inputs=(), outputs=["output"], attrs=attrs, uid=op.uid)
    return Container("Identity", op.name, inputs=["input"], outputs=["output"], attrs={"namespace": DEFAULT_NAMESPACE},
                     uid=op.uid)


def _renamed(end: Endpoint, kinds: Mapping[str, str]) -> Endpoint:
    if end.op == SELF or len(end.op) != 1 or end.op[0] not in kinds:
        return end
    return Endpoint(end.op, _PORTS.get((kinds[end.op[0]], end.port), end.port))


def _live(node: Container, updates: bool = True) -> set[str]:
    """The children some output (or, with ``updates``, named control port) of ``node`` depends on."""
    feeding: dict[str, list[str]] = {}
    wanted: list[str] = []
    controls = set(node.control_names)
    for edge in node.edges:
        src = edge.src.op[0] if edge.src.op != SELF else None
        if edge.dst.op == SELF and src is not None and (updates or edge.dst.port not in controls):
            wanted.append(src)
        elif edge.dst.op != SELF and src is not None:
            feeding.setdefault(edge.dst.op[0], []).append(src)
    live: set[str] = set()
    while wanted:
        name = wanted.pop()
        if name not in live:
            live.add(name)
            wanted.extend(feeding.get(name, ()))
    return live


def _freeze_level(node: Container, children: list[Container], state: Mapping[str, Any], updates: bool) -> Container:
    kinds = {str(c.name): str(c.type) for c in children if _is_core(c)}
    if node.controls:  # a phased layer: drop what only the other phases (or, without updates, its controls) used
        live = _live(node, updates)
        children = [c for c in children if c.name in live]
    names = {c.name for c in children}
    edges = [Edge(_renamed(e.src, kinds), _renamed(e.dst, kinds), attrs=e.attrs) for e in node.edges
             if (e.src.op == SELF or e.src.op[0] in names) and (e.dst.op == SELF or e.dst.op[0] in names)]
    children = [_frozen_op(c, state) if c.name in kinds else c for c in children]
    return Container(node.type, node.name, inputs=node.inputs, outputs=node.outputs, children=children, edges=edges,
                     tombstones=node.tombstones,
                     attrs=node.attrs, uid=node.uid, controls=node.controls)


def freeze(model: Container, state: Mapping[str, Any] | None = None, phase: str = "inference", *,
           updates: bool = True) -> Container:
    """``model`` bound to ``phase``, with each ``Variable`` an initializer holding its value in
    ``state`` (a session's ``state``; a variable it has no value for keeps its initial value)
    and each ``Read`` an ``Identity``; inside layers with control ports, ops only other phases
    used are dropped. A key of ``state`` that is no variable's key (``shared_name``, else uid) of
    ``model`` is an ArgumentError naming it: a state from a session of another model.
    ``updates=False`` also drops the ops only a named control port runs (BatchNorm's running
    statistics updates in the train phase), so that a training computation such as a gradient
    container exports to ONNX, which has no variables to assign. The inference result exports
    to ONNX as it is.

    >>> frozen = freeze(BatchNorm(3))
    >>> sorted(c.type for c in frozen.children)
    ['BatchNormalization', 'Constant', 'Constant', 'Constant', 'Constant', 'Identity', 'Identity']
    """
    if not isinstance(model, Container):
        raise ArgumentError.at("model", "a Container", type(model).__name__)
    if state is not None and not isinstance(state, Mapping):
        raise ArgumentError.at("state", "a mapping (a session's state) or None", type(state).__name__)
    if state:
        _check_keys(model, state)
    bound = bind(model, phase)
    memo: dict[int, Container] = {}

    def visit(node: Container) -> Container:
        if node.is_op:
            return node
        if id(node) not in memo:
            memo[id(node)] = _freeze_level(node, [visit(c) for c in node.children], state or {}, updates)
        return memo[id(node)]

    return visit(bound)


def _check_keys(model: Container, state: Mapping[str, Any]) -> None:
    """An ArgumentError naming the keys of ``state`` no variable of ``model`` has."""
    known = variable_keys(model)
    unknown = [str(k) for k in state if k not in known]
    if not unknown:
        return
    shown = ", ".join(repr(k) for k in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
    listed = sorted(known)
    expected = (f"keys of the model's {len(listed)} variables ({', '.join(repr(k) for k in listed[:5])}"
                f"{', …' if len(listed) > 5 else ''})" if listed else "no keys: the model has no variables")
    raise ArgumentError.at("state", expected, f"keys that match no variable: {shown}",
                           suggest(unknown[0], listed) or "a state of a session of another model?")
