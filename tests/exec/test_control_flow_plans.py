"""Control-flow bodies run as plans made once: a loop of many iterations compiles its body
(and an If inside it each branch) once per session, and a context without a body runner (a
kernel called outside a session) still runs bodies by name."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import amanda.exec.session as session_module  # noqa: E402
from amanda.exec import Session  # noqa: E402
from amanda.exec.dispatch import OpContext  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402
from amanda.opset.onnx.control_flow import run_loop  # noqa: E402
from tests.exec.test_control_flow import loop_model  # noqa: E402


def feeds(n: int) -> dict[str, np.ndarray]:
    return {"n": np.array(n, np.int64), "cond": np.array(True), "s0": np.zeros(2, np.float32),
            "x": np.array([1.0, 0.5], np.float32), "limit": np.array(1e9, np.float32)}


def test_a_loop_body_is_planned_once_per_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs of 40 iterations plan the body once; the sums are numpy's."""
    planned: list = []
    real = session_module.compile_plan

    def counting(model: object, *args: object, **kwargs: object) -> object:
        planned.append(getattr(model, "name", None))
        return real(model, *args, **kwargs)

    monkeypatch.setattr(session_module, "compile_plan", counting)
    with Session(from_onnx(loop_model()), threads=1) as session:
        for _ in range(2):
            s, sums = session.run(["s", "sums"], feeds(40))
    assert len(planned) == 2  # the model's plan and its body's
    steps = np.arange(40, dtype=np.float32)[:, None] * np.array([1.0, 0.5], np.float32)
    np.testing.assert_allclose(sums, np.cumsum(steps, axis=0))
    np.testing.assert_allclose(s, steps.sum(axis=0))


def test_a_context_without_a_body_runner_runs_bodies_by_name() -> None:
    """run_loop with only ``run_body``: each iteration's inputs arrive by their body names."""
    proto = loop_model()
    loop = from_onnx(proto).children[0]
    seen: list = []

    def run_body(body: object, inputs: dict, outputs: list) -> list:
        seen.append(sorted(inputs))
        total = inputs["s_in"] + inputs["x"] * inputs["i"].astype(np.float32)
        return [np.array(True), total, total]

    ctx = OpContext({}, "k", ("loop",), loop, 17, "amanda/onnx/17", run_body)
    x = np.array([1.0, 2.0], np.float32)
    values = {"n": np.array(3, np.int64), "cond": np.array(True), "s0": np.zeros(2, np.float32), "x": x,
              "limit": np.array(1e9, np.float32)}
    regular = iter([values["n"], values["cond"], values["s0"]])
    ordered = [values[p.attrs.get("onnx_name", p.name)] if p.attrs.get("captured") else next(regular)
               for p in loop.inputs]
    s, sums = run_loop(ctx, loop.attrs, *ordered)
    np.testing.assert_allclose(s, x * 3)
    assert sums.shape == (3, 2) and len(seen) == 3 and "limit" in seen[0] and "i" in seen[0]
