"""AdamW's decoupled weight decay as containers of their own (visible, queryable, exportable to
ONNX), and a scheduled rate read by Adam's fused step as its ``lr`` input."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import amanda
from amanda.errors import FormatError
from amanda.io.onnx import dump_onnx
from amanda.optim import Adam, AdamW, minimize
from amanda.optim.schedules import CosineDecay, Scheduled
from tests.optim.test_optim import mlp

WEIGHTS = ["fc1/kernel", "fc1/bias", "fc2/kernel", "fc2/bias"]


def decays(trainer: amanda.Container) -> dict:
    return {path: trainer.descendant(path) for path in amanda.select(trainer, "$..[?type == 'WeightDecay']").paths}


@pytest.mark.parametrize("scheduled", [False, True])
def test_adamw_decays_each_weight_in_a_container_of_its_own(scheduled: bool) -> None:
    """One ``WeightDecay`` per weight, found by a query, carrying the decay; the fused steps
    then decay nothing themselves; Adam's L2 decay has no such container."""
    opt = AdamW(lr=0.01, weight_decay=0.1)
    trainer = minimize(mlp(), "loss", Scheduled(opt, CosineDecay(10)) if scheduled else opt)
    found = decays(trainer)
    assert sorted(found) == sorted(("adamw", f"{w}/weight_decay") for w in WEIGHTS)
    assert {c.attrs["weight_decay"] for c in found.values()} == {0.1}
    assert all(c.input_names == (("weight", "lr") if scheduled else ("weight",)) for c in found.values())
    steps = [trainer.descendant(p) for p in amanda.select(trainer, "$..[?type == 'AdamStep']").paths]
    assert len(steps) == 4 and {s.attrs["weight_decay"] for s in steps} == {0.0}
    assert not decays(minimize(mlp(), "loss", Adam(lr=0.01, weight_decay=0.1)))


@pytest.mark.parametrize("scheduled", [False, True])
def test_a_weight_decay_container_exports_to_onnx(tmp_path, scheduled: bool) -> None:
    """Exported alone, onnxruntime computes ``w * (1 - lr * decay)`` (lr fed when scheduled)."""
    opt = AdamW(lr=0.01, weight_decay=0.1)
    trainer = minimize(mlp(), "loss", Scheduled(opt, CosineDecay(10)) if scheduled else opt)
    decay = trainer.descendant(("adamw", "fc1/kernel/weight_decay"))
    dump_onnx(decay, tmp_path / "decay.onnx")
    w = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    lr = 0.5 if scheduled else 0.01
    feeds = {"weight": w, "lr": np.array(lr, np.float32)} if scheduled else {"weight": w}
    (got,) = ort.InferenceSession(str(tmp_path / "decay.onnx")).run(None, feeds)
    np.testing.assert_allclose(got, w * (1 - lr * 0.1), rtol=1e-6)


def test_a_scheduled_adam_step_reads_the_rate_as_its_input() -> None:
    """``lr/rate`` feeds the ``lr`` input of every ``AdamStep`` (and of every ``WeightDecay``)."""
    trainer = minimize(mlp(), "loss", Scheduled(AdamW(lr=0.01, weight_decay=0.1), CosineDecay(10)))
    opt = trainer.child("adamw")
    fed = {(e.dst.op[0], e.dst.port) for e in opt.edges if e.src.op == ("lr/rate",)}
    assert fed == {(f"{w}/{kind}", "lr") for w in WEIGHTS for kind in ("step", "weight_decay")}


def test_a_training_container_has_no_onnx_form(tmp_path) -> None:
    """Its weights and optimiser slots are session state, which ONNX has no op for: the export
    names the first variable; `training_step` is the form that exports (test_training_step.py)."""
    trainer = minimize(mlp(), "loss", AdamW(lr=0.01))
    with pytest.raises(FormatError) as info:
        dump_onnx(trainer, tmp_path / "trainer.onnx")
    assert "variable" in str(info.value.path)
