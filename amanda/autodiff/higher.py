"""Hessian-vector products and forward-mode Jacobian-vector products, both built from reverse
mode (:func:`~amanda.autodiff.grad` applied twice, the "double-vjp" trick), so every op with a
vector-Jacobian rule whose backward ops have rules too gets them; no forward-mode rules exist.

- ``hvp(model, loss, wrt)``: the gradient container ``g`` is called with the model's inputs,
  the dot product ``<grad, tangent>`` of its gradients with new ``tangent/<name>`` inputs is
  formed, and that scalar is differentiated again with respect to ``wrt``: ``H @ tangent``.
- ``jvp(model, output, wrt)``: ``s = <output, u>`` for a cotangent ``u`` (zeros, made from the
  output's shape); ``grad(s, wrt) = J^T u`` is linear in ``u``, so the gradient of
  ``<J^T u, tangent>`` with respect to ``u`` is ``J @ tangent``, whatever ``u`` holds.

>>> import numpy as np, amanda
>>> from amanda import Input, ops
>>> x = Input("x", "float64", (3,))
>>> net = amanda.model([x], {"loss": ops.ReduceSum(ops.Mul(ops.Mul(x, x), x), keepdims=0)}, name="cube")
>>> h = hvp(net, "loss", ["x"])
>>> h.input_names, h.output_names
(('x', 'tangent/x'), ('loss', 'grad/x', 'hvp/x'))
>>> with amanda.Session(h) as s:  # d2/dx2 sum(x^3) = diag(6x)
...     s.run(["hvp/x"], {"x": np.array([1.0, 2.0, 3.0]), "tangent/x": np.ones(3)})[0].tolist()
[6.0, 12.0, 18.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from amanda.autodiff.transform import checked_phase, differentiate, wrt_endpoints
from amanda.build import ops
from amanda.build.model import apply
from amanda.build.model import model as build_model
from amanda.build.values import Value
from amanda.containers import SELF, Container, Endpoint
from amanda.errors import ArgumentError
from amanda.types.tensor_type import from_attrs

__all__ = ["hvp", "jvp"]


def _inputs(model: Container) -> list[Value]:
    """A builder input per input port of ``model``, of its declared type."""
    return [Value(None, p.name, from_attrs(p.attrs), p.name) for p in model.inputs]


def _tangents(model: Container, labels: list[str], like: Container, names: list[str]) -> list[Value]:
    """A ``tangent/<label>`` input per label, typed like ``like``'s output of the same place in
    ``names`` (the gradient of that entry)."""
    made = []
    for label, grad_name in zip(labels, names):
        name = f"tangent/{label}"
        if name in model.input_names:
            raise ArgumentError.at(f"{model.name}:{name}", "no model input named like a tangent input",
                                   f"an input {name!r}")
        made.append(Value(None, name, from_attrs(like.outputs[like.output_names.index(grad_name)].attrs), name))
    return made


def _dot(pairs: list[tuple[Value, Value]]) -> Value:
    """``sum_i <a_i, b_i>`` as a scalar."""
    total = None
    for a, b in pairs:
        part = ops.ReduceSum(ops.Mul(a, b), keepdims=0)
        total = part if total is None else ops.Add(total, part)
    assert total is not None
    return total


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name = f"_{name}"
    return name


def _inside(outer: Container, layer: Container, end: Endpoint) -> Endpoint:
    """``end`` (an endpoint of ``layer``) as an endpoint of ``outer``, a builder model holding
    ``layer`` as a child (renamed when its name was taken); inputs keep their names since
    ``outer``'s inputs are ``layer``'s."""
    if end.op is SELF:
        return end
    name = next(c.name for c in outer.children if c is layer or c.with_name(str(layer.name)) == layer)
    return Endpoint((name, *end.op), end.port)


def _first(model: Container, loss: str, targets: list[tuple[str, Endpoint]], phase: Any,
           keep: list[str]) -> tuple[Container, list[str]]:
    """The first gradient container of ``loss`` (outputs ``keep`` then ``grad/<label>``, a
    label equal to a kept name getting another ``grad/``) and its gradient output names."""
    names = []
    for label, _ in targets:
        name = f"grad/{label}"
        while name in keep:
            name = f"grad/{name}"
        names.append(name)
    g = differentiate(model, loss, [(n, end) for n, (_, end) in zip(names, targets)], phase=phase,
                      name=f"{model.name}_grad", keep=keep)
    return g, names


def hvp(model: Container, loss: str, wrt: Any, *, phase: Any = "auto", name: str | None = None) -> Container:
    """A container computing the Hessian of ``loss`` (an output of ``model``) with respect to
    ``wrt`` (as :func:`grad` takes it) times a tangent vector, by differentiating the dot product
    of the gradient with the tangent (reverse over reverse).

    Its inputs are the model's and one ``tangent/<name>`` per ``wrt`` entry (shaped like that
    entry); its outputs are ``loss``, the gradients ``grad/<name>`` and ``hvp/<name>``: the
    Hessian's rows of that entry applied to all the tangents (``sum_j H[name, j] @ tangent/j``).
    """
    phase = checked_phase(model, loss, phase, name)
    targets = wrt_endpoints(model, wrt)
    labels = [label for label, _ in targets]
    g, names = _first(model, loss, targets, phase, [loss])
    ins = _inputs(model)
    tangents = _tangents(model, labels, g, names)
    outs = apply(g, *ins)
    outs = outs if isinstance(outs, tuple) else (outs,)
    dot = _fresh("grad_dot_tangent", {loss, *names})
    wanted = {loss: outs[0], **dict(zip(names, outs[1:])), dot: _dot(list(zip(outs[1:], tangents)))}
    inner = build_model(ins + tangents, wanted, name=_fresh(f"{model.name}_hvp_inner", {str(g.name)}))
    second = [(f"hvp/{label}", _inside(inner, g, Endpoint((model.name, *end.op), end.port) if end.op is not SELF
                                        else end)) for label, end in targets]
    return differentiate(inner, dot, second, phase=phase, name=name or f"{model.name}_hvp", keep=[loss, *names],
                         kind="HessianVectorProduct")


def jvp(model: Container, output: str, wrt: Any, *, phase: Any = "auto", name: str | None = None) -> Container:
    """A container computing the Jacobian of ``output`` (an output of ``model``, any shape) with
    respect to ``wrt`` (as :func:`grad` takes it) times tangent vectors: forward mode, built by
    differentiating reverse mode with respect to its cotangent (the double-vjp trick).

    Its inputs are the model's and one ``tangent/<name>`` per ``wrt`` entry (shaped like that
    entry); its outputs are ``output`` and ``jvp/<output>`` (shaped like ``output``):
    ``sum_j d output / d wrt_j @ tangent/j``.
    """
    phase = checked_phase(model, output, phase, name)
    targets = wrt_endpoints(model, wrt)
    ins = _inputs(model)
    outs = apply(model, *ins)
    y = (outs if isinstance(outs, tuple) else (outs,))[list(model.output_names).index(output)]
    dtype = np.dtype(y.type.dtype or "float32")
    u = ops.ConstantOfShape(ops.Shape(y), value=np.zeros(1, dtype), name="cotangent")
    dot = _fresh("output_dot_cotangent", {output})
    forward = build_model(ins, {output: y, dot: _dot([(y, u)])}, name=_fresh(f"{model.name}_jvp_forward", {str(model.name)}))
    cotangent = next(c.name for c in forward.children if c.type == "ConstantOfShape" and c.name.startswith("cotangent"))
    inner_targets = [(label, _inside(forward, model, end)) for label, end in targets]
    g, names = _first(forward, dot, inner_targets, phase, [output])
    ins = _inputs(model)
    tangents = _tangents(model, [label for label, _ in targets], g, names)
    outs = apply(g, *ins)
    outs = outs if isinstance(outs, tuple) else (outs,)
    wanted = {output: outs[0], dot: _dot(list(zip(outs[1:], tangents)))}
    inner = build_model(ins + tangents, wanted, name=_fresh(f"{model.name}_jvp_inner", {str(g.name)}))
    at = _inside(inner, g, Endpoint((forward.name, cotangent), "output"))
    return differentiate(inner, dot, [(f"jvp/{output}", at)], phase=phase, name=name or f"{model.name}_jvp",
                         keep=[output], kind="JacobianVectorProduct")
