"""SGD (momentum, Nesterov), Adam and AdamW: each builds, with builder ops, the updates of one
step: ``Assign``s to the weights' variables and to its own state (moments, the step count),
which are ``amanda/core`` variables too. The formulas are torch.optim's.

>>> Adam(lr=1e-3)
Adam(lr=0.001, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from amanda.build import Input, Ops, ops
from amanda.build.model import apply, model
from amanda.build.values import Call, Value
from amanda.containers import Container
from amanda.containers.arguments import brief, expect_number
from amanda.errors import ArgumentError
from amanda.optim.vocab import TRAIN
from amanda.types import TensorType

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "Slot", "weight_decay"]

CORE = "amanda/core"
_train = Ops(TRAIN)


def _number(owner: str, field: str, value: Any, low: float = 0.0, high: float | None = None) -> float:
    return expect_number(value, (owner, field), low, high)


class Slot:
    """One weight as an optimiser sees it: its variable's reference, its value this step, its
    gradient, and a label for the state variables it gets."""

    def __init__(self, label: str, ref: Value, weight: Value, grad: Value, rate: Value | None = None) -> None:
        self.label, self.ref, self.weight, self.grad = label, ref, weight, grad
        self.rate = rate  # the learning rate as a graph value (a schedule's), else the optimiser's number

    def lr(self, value: float) -> Any:
        """The learning rate of this step: the slot's ``rate`` value, else the number ``value``."""
        return self.const(value) if self.rate is None else self.rate

    def const(self, value: float) -> np.ndarray:
        return np.asarray(value, np.dtype(self.weight.type.dtype or "float32"))

    def variable(self, name: str, initial: np.ndarray) -> tuple[Value, Value]:
        """A state variable (reference, and its value read this step) starting at ``initial``."""
        return variable(f"{self.label}/{name}", initial)


def variable(name: str, initial: np.ndarray) -> tuple[Value, Value]:
    """A new ``Variable`` op and its ``Read``, as builder values (the read one typed)."""
    var = Container("Variable", name, inputs=(), outputs=["ref"], attrs={"value": initial, "namespace": CORE})
    ref = Value(Call(var, ()), "ref", None, f"{name}.ref")
    read = Container("Read", f"{name}/read", inputs=["ref"], outputs=["value"], attrs={"namespace": CORE})
    return ref, Value(Call(read, (("ref", ref),)), "value", TensorType(initial.dtype, initial.shape), f"{name}/read.value")


def assign(ref: Value, value: Value, name: str) -> Value:
    """``Assign(ref, value)``: its output is the new value (typed as ``value``)."""
    op = Container("Assign", name, inputs=["ref", "value"], outputs=["value"], attrs={"namespace": CORE})
    return Value(Call(op, (("ref", ref), ("value", value))), "value", value.type, f"{name}.value")


class Optimizer:
    """What every optimiser provides: the update ops of one step for all its weights."""

    def updates(self, slots: list[Slot]) -> list[Value]:  # pragma: no cover - each subclass has its own
        raise NotImplementedError

    @property
    def kind(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class SGD(Optimizer):
    """``torch.optim.SGD``: ``g += weight_decay * w``; with momentum ``buf = momentum * buf + g``
    and the step ``buf`` (Nesterov: ``g + momentum * buf``); ``w -= lr * step``."""

    lr: float = 0.01
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        _number("SGD", "lr", self.lr)
        _number("SGD", "momentum", self.momentum, 0.0, 1.0)
        _number("SGD", "weight_decay", self.weight_decay)
        if self.nesterov is not True and self.nesterov is not False:
            raise ArgumentError.at(("SGD", "nesterov"), "True or False", brief(self.nesterov)[:80])
        if self.nesterov and not self.momentum:
            raise ArgumentError.at(("SGD", "nesterov"), "momentum > 0 with Nesterov", f"momentum={self.momentum}")

    def updates(self, slots: list[Slot]) -> list[Value]:
        out = []
        for s in slots:
            g = s.grad
            if self.weight_decay:
                g = ops.Add(g, ops.Mul(s.weight, s.const(self.weight_decay)))
            if self.momentum:
                ref, buf = s.variable("momentum", np.zeros(s.weight.type.shape, s.const(0).dtype))
                buf_new = assign(ref, ops.Add(ops.Mul(buf, s.const(self.momentum)), g), f"{s.label}/update_momentum")
                out.append(buf_new)
                g = ops.Add(g, ops.Mul(buf_new, s.const(self.momentum))) if self.nesterov else buf_new
            out.append(assign(s.ref, ops.Sub(s.weight, ops.Mul(g, s.lr(self.lr))), f"{s.label}/update"))
        return out


@dataclass(frozen=True)
class Adam(Optimizer):
    """``torch.optim.Adam``: moments ``m, v`` with bias correction; ``weight_decay`` adds
    ``weight_decay * w`` to the gradient (L2). Each weight's step is one fused ``AdamStep`` op
    (namespace ``amanda/train``) whose results three ``Assign`` ops store (a session's plan runs
    them as one step writing the stored arrays in place, :mod:`amanda.exec.update_in_place`); a
    scheduled rate (``Scheduled``) is its input ``lr``."""

    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        name = type(self).__name__
        _number(name, "lr", self.lr)
        if not isinstance(self.betas, (tuple, list)) or len(self.betas) != 2:
            raise ArgumentError.at((name, "betas"), "two numbers in [0, 1)", brief(self.betas))
        for beta in self.betas:
            _number(name, "betas", beta, 0.0, 1.0)
        _number(name, "eps", self.eps)
        _number(name, "weight_decay", self.weight_decay)

    decoupled = False

    def updates(self, slots: list[Slot]) -> list[Value]:
        if not slots:
            return []
        step_ref, _ = variable("step", np.array(0, np.float32))
        op = Container("AssignAdd", "count_step", inputs=["ref", "delta"], outputs=["value"], attrs={"namespace": CORE})
        step = Value(Call(op, (("ref", step_ref), ("delta", ops.Constant(value=np.float32(1))))), "value",
                     TensorType("float32", ()), "count_step.value")
        out = [step]
        decoupled = bool(self.decoupled and self.weight_decay)
        for s in slots:
            dtype = s.const(0).dtype
            m_ref, m = s.variable("m", np.zeros(s.weight.type.shape, dtype))
            v_ref, v = s.variable("v", np.zeros(s.weight.type.shape, dtype))
            weight = weight_decay(s, self.lr, self.weight_decay) if decoupled else s.weight
            rate = () if s.rate is None else (s.rate,)
            w_new, m_new, v_new = _train.AdamStep(
                weight, s.grad, m, v, step, *rate, lr=self.lr, beta1=float(self.betas[0]),
                beta2=float(self.betas[1]), eps=self.eps, weight_decay=0.0 if decoupled else self.weight_decay,
                name=f"{s.label}/step")
            out += [assign(m_ref, _typed(m_new, m), f"{s.label}/update_m"),
                    assign(v_ref, _typed(v_new, v), f"{s.label}/update_v"),
                    assign(s.ref, _typed(w_new, s.weight), f"{s.label}/update")]
        return out


def weight_decay(s: Slot, lr: float, decay: float) -> Value:
    """AdamW's decoupled weight decay of one weight as a container of its own (type
    ``WeightDecay``, named ``<weight>/weight_decay``, attribute ``weight_decay``): ``w * (1 - lr *
    decay)``, at the slot's scheduled rate when it has one (then an input ``lr``)."""
    w = Input("weight", s.weight.type.dtype, s.weight.type.shape)
    if s.rate is None:
        inputs, decayed = [w], ops.Mul(w, s.const(1 - lr * decay), name="decay")
    else:
        rate = Input("lr", "float32", ())
        factor = ops.Sub(np.float32(1), ops.Mul(rate, np.float32(decay)), name="factor")
        inputs, decayed = [w, rate], ops.Mul(w, ops.CastLike(factor, w), name="decay")
    layer = model(inputs, {"decayed": decayed}, name=f"{s.label}/weight_decay", type="WeightDecay",
                  attrs={"weight_decay": float(decay)})
    result = apply(layer, s.weight) if s.rate is None else apply(layer, s.weight, s.rate)
    assert isinstance(result, Value)
    return result


def _typed(value: Value, like: Value) -> Value:
    """``value`` with ``like``'s type (the fused step has no type rule; its outputs keep shapes)."""
    value.type = like.type
    return value


@dataclass(frozen=True)
class AdamW(Adam):
    """``torch.optim.AdamW``: Adam with decoupled weight decay, ``w *= 1 - lr * weight_decay``
    before the step (default ``weight_decay=0.01``), by a ``WeightDecay`` container per weight
    (``<weight>/weight_decay`` in the optimiser's container) that feeds its ``AdamStep``."""

    weight_decay: float = 0.01
    decoupled = True
