"""Weights as session variables while training, and back to constants after (``freeze``).

``trainable(model, weights)`` replaces each weight (a ``Constant``) by a ``Weight`` container of
the same name, uid and output port that holds an ``amanda/core`` ``Variable`` (keyed by the
weight's uid, initialised with its value) and the ``Read`` of it: consumers see the same port,
and an optimiser can assign the variable. ``freeze(model, session)`` puts the session's values
back as constants, turns BatchNorm's running statistics into constants too, and keeps one phase.

>>> import numpy as np, amanda
>>> from amanda import Input, ops
>>> x = Input("x", "float32", (1, 2))
>>> net = amanda.model([x], {"y": ops.MatMul(x, ops.Constant(value=np.ones((2, 1), np.float32), name="w"))})
>>> t = trainable(net, ["w"])
>>> t.child("w").type, [c.type for c in t.child("w").children]
('Weight', ['Variable', 'Read'])
>>> freeze(t).child("w").type
'Constant'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.build.builder import DEFAULT_NAMESPACE
from amanda.containers import SELF, Container, Edge, Endpoint, Port, replace, walk
from amanda.containers.uids import key_of
from amanda.containers.update import target_paths
from amanda.errors import ArgumentError, PathError, format_path
from amanda.layers import freeze as freeze_layers
from amanda.layers.norm import variable_keys
from amanda.types import TensorType, to_attrs

__all__ = ["CORE", "default_weights", "freeze", "trainable"]

CORE = "amanda/core"
_OWN = ("value", "namespace", "initializer")


def default_weights(model: Container) -> list[tuple[str, ...]]:
    """The paths of the layer library's weights: the ``Constant`` children a layer lists in its
    ``weights`` attribute (not the shapes and scalars layers also hold as constants, nor the
    running statistics, which are variables already)."""
    found = []
    for path, node, _ in walk(model):
        listed = node.attrs.get("weights")
        if not isinstance(listed, Mapping) or not node.children:
            continue
        found += [(*path, c.name) for c in node.children if c.name in listed and c.type == "Constant"]
    return found


def _weight(op: Container) -> Container:
    """One weight as a Variable (keyed by the weight's uid) and its Read, behind the same port."""
    value = op.attrs.get("value")
    if op.type != "Constant" or not isinstance(value, np.ndarray) or value.dtype.kind != "f":
        raise ArgumentError.at(op.name, "a weight: a Constant holding a float array", f"{op.type} {type(value).__name__}")
    port = op.outputs[0].name
    typed = to_attrs(TensorType(value.dtype, value.shape))  # Read has no type rule: the ports say it
    variable = Container("Variable", "variable", inputs=(), outputs=["ref"], attrs={"value": value, "shared_name": op.uid,
                                                                    "namespace": CORE})
    read = Container("Read", "read", inputs=["ref"], outputs=[Port("value", attrs=typed)], attrs={"namespace": CORE})
    kept = {k: v for k, v in op.attrs.items() if k not in _OWN}
    return Container("Weight", op.name, inputs=(), outputs=[Port(port, attrs=typed)], children=[variable, read],
                     edges=[Edge(Endpoint(("variable",), "ref"), Endpoint(("read",), "ref")),
                      Edge(Endpoint(("read",), "value"), Endpoint(SELF, port))], attrs=kept, uid=op.uid)


def trainable(model: Container, weights: Any = None) -> Container:
    """``model`` with each weight (paths, a Selection; default :func:`default_weights`) held in
    a session variable; ``model`` itself when there is none."""
    if not isinstance(model, Container):
        raise ArgumentError.at("model", "a Container", type(model).__name__)
    paths = default_weights(model) if weights is None else target_paths(model, weights)
    todo = [p for p in paths if model.descendant(p).type != "Weight"]
    return replace(model, todo, _weight) if todo else model


def _key(node: Container) -> str:
    """The state key of a ``Weight``'s variable."""
    return key_of(node.child("variable"))


def _constant(node: Container, state: Mapping[str, Any]) -> Container:
    variable = node.child("variable")
    key = _key(node)
    value = np.asarray(state[key]) if key in state else variable.attrs["value"]
    attrs = {**node.attrs, "value": value, "namespace": DEFAULT_NAMESPACE, "initializer": True}
    return Container("Constant", node.name, inputs=(), outputs=[node.outputs[0].name], attrs=attrs, uid=node.uid)


def freeze(model: Container, session: Any = None, phase: str = "inference") -> Container:
    """The model for inference: each ``Weight`` a ``Constant`` holding its value in ``session``
    (a Session, its ``state``, or None for the initial values), BatchNorm's statistics constants
    too (:func:`amanda.layers.freeze`), bound to ``phase``. Given a training container (from
    :func:`amanda.optim.minimize`), its forward model. The result exports to ONNX.

    A session (or state) that holds no value for some weight never ran this model (a new
    session, or one of another model): that is an ArgumentError naming the weights, not the
    untrained values; pass ``session=None`` for the initial weights."""
    if not isinstance(model, Container):
        raise ArgumentError.at("model", "a Container", type(model).__name__)
    state = getattr(session, "state", session) or {}
    if not isinstance(state, Mapping):
        raise ArgumentError.at("session", "a Session, its state, or None", type(session).__name__)
    if model.type == "Training":
        forward = model.attrs.get("forward")
        if not forward:
            raise PathError.at(model.name, "a training container naming its forward model", "none")
        model = model.descendant(tuple(forward))
    if model.type == "Weight":
        raise PathError.at(format_path(()), "a model holding weights", "a Weight itself")
    paths = [p for p, node, _ in walk(model) if node.type == "Weight" and p]
    if session is not None:
        _check_ran(model, paths, state)
    frozen = replace(model, paths, lambda node: _constant(node, state)) if paths else model
    kept = variable_keys(frozen)  # the optimiser's variables and the weights' are not the model's
    return freeze_layers(frozen, {k: v for k, v in state.items() if k in kept}, phase)


def _check_ran(model: Container, paths: list[tuple[str, ...]], state: Mapping[str, Any]) -> None:
    """An ArgumentError naming the weights ``state`` holds no value for."""
    missing = [format_path(p) for p in paths if _key(model.descendant(p)) not in state]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ArgumentError.at("session", f"a session that ran this model (a value for each of its {len(paths)} "
                               "weights)", f"no value for {shown}",
                               "run a training step first (session.run([loss, 'train'], feeds, phase='train')), "
                               "or pass session=None for the initial weights")
