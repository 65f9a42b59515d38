"""Phase names: ``amanda.grad`` with random phases, weights and losses, on models with and
without phases. A phase the model does not have must be refused (an AmandaError), never used
silently; the model is left unchanged."""

from __future__ import annotations

import functools
from typing import Any

import amanda
from amanda import Container, Input, layers, ops
from amanda.containers.phases import computations
from tests.fuzz import seeds
from tests.fuzz.harness import InvalidResult, Source, Target, check_unchanged, snapshot

PHASES = ("auto", "auto", None, "train", "inference", "trian", "Train", "", 3, ("train",))


@functools.cache
def models() -> dict[str, Container]:
    """Models without phases (ONNX fixtures) and with them (BatchNorm, Dropout), and a frozen one."""
    x = Input("x", "float32", ("batch", 4))
    hidden = layers.Dropout(0.5)(layers.BatchNorm(4)(x))
    phased = layers.seeded(amanda.model([x], {"loss": ops.ReduceSum(layers.Dense(4, 2)(hidden), keepdims=0)},
                                        name="phased"), 0)
    onnx = seeds.onnx_containers()
    return {"mlp": onnx["mlp"], "cnn": onnx["cnn"], "phased": phased, "frozen": layers.freeze(phased)}


def generate_grad(src: Source) -> tuple[str, Any, Any, Any]:
    """A model name, a loss name, ``wrt`` entries and a phase."""
    name = src.choice(sorted(models()))
    model = models()[name]
    names: list[Any] = [*model.input_names, *(c.name for c in model.children[:6]), "nosuch", "x:0", 3]
    wrt = [src.choice(names) for _ in range(src.integer(1, 3))]
    loss = model.output_names[0] if src.boolean(0.9) else src.choice(["nosuch", 3, None])
    return name, loss, wrt, src.choice(PHASES)


def run_grad(case: tuple[str, Any, Any, Any]) -> None:
    """``amanda.grad``: a container whose first output is the loss; a phase the model lacks is
    refused; the model unchanged."""
    name, loss, wrt, phase = case
    model = models()[name]
    before = snapshot(model)
    try:
        g = amanda.grad(model, loss, wrt, phase=phase)
    finally:
        check_unchanged(model, before, "the model differentiated")
    if phase != "auto" and phase is not None and phase not in computations(model):
        raise InvalidResult(f"grad accepted phase {phase!r}, which {name} does not have")
    if g.output_names[0] != loss:
        raise InvalidResult(f"the gradient container's first output is {g.output_names[0]!r}, not {loss!r}")


TARGETS = (Target("grad_phase", generate_grad, run_grad),)
