"""Learning-rate schedules as ops: ``Scheduled(optimizer, schedule)`` is an optimiser whose rate
is computed, each step, by ops in its container from a step counter of its own (``lr/step``):
``lr/rate = optimizer.lr * schedule(t)``, ``t`` the steps done before this one. The rate is
visible in the training container (the op ``lr/rate`` and the ops before it), found by a
query like any op, and saved in checkpoints with the counter.

Schedules (factors of the base rate): ``StepDecay(every, gamma)`` (``gamma ** floor(t /
every)``), ``CosineDecay(steps, final)`` (from 1 to ``final`` over ``steps`` steps, half a
cosine, then ``final``), ``Warmup(steps, then)`` (``min(1, (t + 1) / steps)`` times ``then``).
AdamW's decoupled decay is applied at the scheduled rate, as ``torch.optim``'s schedulers do.

>>> from amanda.optim import Adam
>>> Scheduled(Adam(lr=0.01), Warmup(100, CosineDecay(1000)))
Scheduled(optimizer=Adam(lr=0.01, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.0), \
schedule=Warmup(steps=100, then=CosineDecay(steps=1000, final=0.0)))
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from amanda.build import ops
from amanda.build.values import Call, Value
from amanda.containers import Container
from amanda.containers.arguments import expect_int, expect_number, shown
from amanda.errors import ArgumentError
from amanda.optim.optimizers import SGD, Adam, Optimizer, Slot, variable
from amanda.types import TensorType

__all__ = ["CosineDecay", "Schedule", "Scheduled", "StepDecay", "Warmup"]

F32 = np.float32


def _count(owner: str, field: str, value: Any) -> None:
    expect_int(value, (owner, field), minimum=1)


def _fraction(owner: str, field: str, value: Any) -> None:
    if expect_number(value, (owner, field)) > 1.0:
        raise ArgumentError.at((owner, field), "a number in [0, 1]", shown(value))


class Schedule:
    """A factor of the base rate as ops of ``t`` (a float32 scalar: steps done before)."""

    def factor(self, t: Value) -> Value:  # pragma: no cover - each subclass has its own
        raise NotImplementedError


@dataclass(frozen=True)
class StepDecay(Schedule):
    """``gamma ** floor(t / every)``: the rate times ``gamma`` every ``every`` steps."""

    every: int
    gamma: float = 0.1

    def __post_init__(self) -> None:
        _count("StepDecay", "every", self.every)
        _fraction("StepDecay", "gamma", self.gamma)

    def factor(self, t: Value) -> Value:
        return ops.Pow(F32(self.gamma), ops.Floor(ops.Div(t, F32(self.every))))


@dataclass(frozen=True)
class CosineDecay(Schedule):
    """``final + (1 - final) * (1 + cos(pi * min(t, steps) / steps)) / 2``."""

    steps: int
    final: float = 0.0

    def __post_init__(self) -> None:
        _count("CosineDecay", "steps", self.steps)
        _fraction("CosineDecay", "final", self.final)

    def factor(self, t: Value) -> Value:
        angle = ops.Mul(ops.Div(ops.Min(t, F32(self.steps)), F32(self.steps)), F32(math.pi))
        half = ops.Mul(ops.Add(ops.Cos(angle), F32(1.0)), F32(0.5 * (1.0 - self.final)))
        return ops.Add(half, F32(self.final))


@dataclass(frozen=True)
class Warmup(Schedule):
    """``min(1, (t + 1) / steps)``, times ``then``'s factor when given."""

    steps: int
    then: Schedule | None = None

    def __post_init__(self) -> None:
        _count("Warmup", "steps", self.steps)
        if self.then is not None and not isinstance(self.then, Schedule):
            raise ArgumentError.at(("Warmup", "then"), "a Schedule or None", type(self.then).__name__)

    def factor(self, t: Value) -> Value:
        ramp = ops.Min(ops.Div(ops.Add(t, F32(1.0)), F32(self.steps)), F32(1.0))
        return ramp if self.then is None else ops.Mul(ramp, self.then.factor(t))


@dataclass(frozen=True)
class Scheduled(Optimizer):
    """``optimizer`` (SGD, Adam or AdamW) at the rate ``optimizer.lr * schedule(t)``: SGD
    multiplies by the rate, Adam's ``AdamStep`` reads it as its input ``lr`` and AdamW's
    ``WeightDecay`` containers decay at it."""

    optimizer: Optimizer
    schedule: Schedule

    def __post_init__(self) -> None:
        if not isinstance(self.optimizer, (SGD, Adam)):
            raise ArgumentError.at(("Scheduled", "optimizer"), "SGD, Adam or AdamW", type(self.optimizer).__name__)
        if not isinstance(self.schedule, Schedule):
            raise ArgumentError.at(("Scheduled", "schedule"), "a Schedule such as CosineDecay(1000)",
                                   type(self.schedule).__name__)

    @property
    def kind(self) -> str:
        return self.optimizer.kind

    @property
    def lr(self) -> float:
        """The base rate (fit's learning-rate callback rebuilds with another)."""
        return float(self.optimizer.lr)  # type: ignore[attr-defined]

    def with_lr(self, lr: float) -> Scheduled:
        """This schedule over another base rate."""
        return dataclasses.replace(self, optimizer=dataclasses.replace(self.optimizer, lr=lr))  # type: ignore[type-var]

    def updates(self, slots: list[Slot]) -> list[Value]:
        if not slots:
            return []
        ref, _ = variable("lr/step", np.array(0, F32))
        op = Container("AssignAdd", "lr/count_step", inputs=["ref", "delta"], outputs=["value"],
                       attrs={"namespace": "amanda/core"})
        count = Value(Call(op, (("ref", ref), ("delta", ops.Constant(value=F32(1))))), "value",
                      TensorType("float32", ()), "lr/count_step.value")
        rate = ops.Mul(self.schedule.factor(ops.Sub(count, F32(1))), F32(self.lr), name="lr/rate")
        rated = [Slot(s.label, s.ref, s.weight, s.grad, rate) for s in slots]
        return [count, *self.optimizer.updates(rated)]
