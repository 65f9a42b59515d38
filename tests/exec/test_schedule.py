"""The schedule stage of the planner: one Scheduled record per step, readers per slot, frees."""

from __future__ import annotations

import numpy as np

from amanda import Container, op
from amanda.exec.plan import Step, compile_plan
from amanda.exec.schedule import BY_SIZE, INLINE, POOL, Scheduled, schedule, with_frees, writers


def _step(ins: tuple, outs: tuple) -> Step:
    return Step(None, None, ins, tuple((k, s) for k, s in enumerate(outs)), ())  # type: ignore[arg-type]


def test_a_diamond_is_scheduled_by_its_slots_and_control_edges() -> None:
    """a writes 1; b and c read it; d reads 2 and 3 and waits for a control edge from b.
    Each record counts the steps it waits for, lists those waiting for it and the distinct
    slots it reads; uses counts readers per slot."""
    steps = [_step((), (1,)), _step((1, 1), (2,)), _step((1,), (3,)), _step((2, 3, 0), (4,))]
    paths = [("a",), ("b",), ("c",), ("d",)]
    places = [INLINE, POOL, BY_SIZE, POOL]
    s = schedule(steps, paths, {("d",): [("b",), ("folded",)]}, places, [False, True, False, True], frozenset({4}))
    assert s.records == (Scheduled(0, (1, 2), (), INLINE), Scheduled(1, (3,), (1,), POOL),
                         Scheduled(1, (3,), (1,), BY_SIZE), Scheduled(2, (), (2, 3), POOL))
    assert s.uses == (0, 2, 1, 1, 0) and s.keep == frozenset({4})  # every slot up to the last written
    assert s.uses_blas and not s.parallel  # the two heavy steps depend on each other
    assert writers(steps) == {1: 0, 2: 1, 3: 2, 4: 3}
    assert [f.frees for f in with_frees(steps, frozenset({4}))] == [(), (), (1,), (2, 3)]  # 1: c reads it last


def test_independent_heavy_steps_run_beside_each_other() -> None:
    """Two heavy steps that share no path are parallel; a plan of real ops gets its schedule."""
    steps = [_step((), (1,)), _step((), (2,))]
    assert schedule(steps, [("a",), ("b",)], {}, [POOL, POOL], [True, True], frozenset()).parallel
    g = Container("G", "g", inputs=["x"], outputs=["y"], attrs={"namespace": "amanda/onnx/17"},
                  children=[op("Relu", "r", inputs=["X"], outputs=["Y"]), op("Neg", "n", inputs=["X"], outputs=["Y"])],
                  edges=[("g:x", "r:X"), ("r:Y", "n:X"), ("n:Y", "g:y")])
    plan = compile_plan(g, ("y",), ("x",))
    assert [(r.preds, r.succs) for r in plan.schedule.records] == [(0, (1,)), (1, ())]
    assert plan.paths == (("r",), ("n",)) and not plan.schedule.uses_blas
    assert plan.steps[1].fn(plan.steps[1].attrs, np.array([2.0]))[0].tolist() == [-2.0]
