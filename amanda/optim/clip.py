"""Gradient clipping as ops: ``clip_gradients(trainer, value=, norm=)`` puts a ``Clipping``
container between a training container's gradients and its optimiser, so the clipping is part
of the model (visible, queryable, exported with it). By value: each gradient ``Clip``ped to
``[-value, value]``. By norm (``torch.nn.utils.clip_grad_norm_``): every gradient multiplied by
``min(1, norm / (total + 1e-6))``, ``total`` the 2-norm of all gradients together. With both,
values are clipped first.

>>> import numpy as np, amanda
>>> from amanda import Input, ops
>>> from amanda.optim import SGD, minimize
>>> x = Input("x", "float32", (1, 1))
>>> w = ops.Constant(value=np.zeros((1, 1), np.float32), name="w")
>>> net = amanda.model([x], {"loss": ops.ReduceSum(ops.MatMul(x, w), keepdims=0)}, name="net")
>>> t = clip_gradients(minimize(net, "loss", SGD(lr=1.0), weights=["w"]), value=0.5)
>>> with amanda.Session(t) as s:
...     _ = s.run(["train"], {"x": np.full((1, 1), 3, np.float32)}, phase="train")
...     print(amanda.optim.freeze(t, s).child("w").attrs["value"].tolist())
[[-0.5]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from amanda.build import Input, model, ops
from amanda.containers import SELF, Container, Edge, Endpoint
from amanda.containers.arguments import shown
from amanda.errors import ArgumentError

__all__ = ["clip_gradients"]

_EPS = 1e-6


def _limit(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not value > 0:
        raise ArgumentError.at(name, "a positive number or None", shown(value))
    return float(value)


def _clipper(ports: list[Any], value: float | None, norm: float | None) -> Container:
    grads = [Input(p.name, p.attrs.get("dtype"), p.attrs.get("shape")) for p in ports]
    dtype = np.dtype(ports[0].attrs.get("dtype") or "float32").type
    out = list(grads)
    if value is not None:
        out = [ops.Clip(g, dtype(-value), dtype(value)) for g in out]
    if norm is not None:
        squares = [ops.ReduceSum(ops.Mul(g, g), keepdims=0) for g in out]
        total = ops.Sqrt(squares[0] if len(squares) == 1 else ops.Sum(*squares))
        scale = ops.Min(ops.Div(dtype(norm), ops.Add(total, dtype(_EPS))), dtype(1.0))
        out = [ops.Mul(g, scale) for g in out]
    return model(grads, {p.name: o for p, o in zip(ports, out)}, name="clip", type="Clipping")


def clip_gradients(trainer: Container, value: float | None = None, norm: float | None = None) -> Container:
    """``trainer`` (from :func:`amanda.optim.minimize`) with its gradients clipped by ``value``
    and/or by their global ``norm`` before the optimiser sees them; ``trainer`` itself when
    both are None."""
    if not isinstance(trainer, Container) or trainer.type != "Training":
        raise ArgumentError.at("trainer", "a training container from amanda.optim.minimize",
                               getattr(trainer, "type", type(trainer).__name__))
    value, norm = _limit("clip_value", value), _limit("clip_norm", norm)
    if value is None and norm is None:
        return trainer
    if any(c.type == "Clipping" for c in trainer.children):
        raise ArgumentError.at(trainer.name, "a training container not clipped yet", "a Clipping child")
    grads = [e for e in trainer.edges if e.src.op is not SELF and e.dst.op is not SELF
             and str(e.src.port).startswith("grad/") and e.dst.port == e.src.port]
    g = trainer.child(grads[0].src.op[0])
    ports = [next(o for o in g.outputs if o.name == e.src.port) for e in grads]
    clip = _clipper(ports, value, norm)
    kept = [e for e in trainer.edges if e not in grads]
    rewired = [Edge(e.src, Endpoint((clip.name,), e.src.port)) for e in grads]
    rewired += [Edge(Endpoint((clip.name,), e.src.port), e.dst) for e in grads]
    return Container("Training", trainer.name, inputs=trainer.inputs, outputs=trainer.outputs,
                     children=[*trainer.children, clip], edges=[*kept, *rewired],
                     attrs={**trainer.attrs, "clip_value": value, "clip_norm": norm}, controls=trainer.controls,
                     uid=trainer.uid)
