"""Sessions plan per feed type signature with the model optimised: shape subgraphs fold at plan time."""

from __future__ import annotations

import numpy as np
import pytest

from amanda import Container, op
from amanda.errors import ExecutionError
from amanda.exec import Session
from amanda.exec.plan_cache import signature

NS = {"namespace": "amanda/onnx/17"}


def shape_chain() -> Container:
    """y = relu(reshape(x, [x.shape[0], -1])), the shape computed by Shape/Gather/Unsqueeze/Concat."""
    const = lambda name, value: op("Constant", name, [], ["output"], {"value": np.asarray(value, np.int64)})
    return Container(None, "g", inputs=["x"], outputs=["y"], children=[
        op("Shape", "shape", ["data"], ["shape"]), const("zero", 0), const("axes", [0]), const("rest", [-1]),
        op("Gather", "gather", ["data", "indices"], ["output"], {"axis": 0}),
        op("Unsqueeze", "unsq", ["data", "axes"], ["expanded"]), op("Concat", "cat", ["a", "b"], ["concat_result"], {"axis": 0}),
        op("Reshape", "reshape", ["data", "shape"], ["reshaped"]), op("Relu", "relu", ["X"], ["Y"]),
    ], edges=[("g:x", "shape:data"), ("shape:shape", "gather:data"), ("zero:output", "gather:indices"),
        ("gather:output", "unsq:data"), ("axes:output", "unsq:axes"), ("unsq:expanded", "cat:a"),
        ("rest:output", "cat:b"), ("g:x", "reshape:data"), ("cat:concat_result", "reshape:shape"),
        ("reshape:reshaped", "relu:X"), ("relu:Y", "g:y")], attrs=NS)


def test_shape_ops_run_at_plan_time_and_a_new_shape_makes_a_new_plan() -> None:
    """The plan for one feed shape runs only Reshape and Relu; another shape gets its own plan and the right result."""
    rng = np.random.default_rng(0)
    with Session(shape_chain()) as session:
        for shape in [(3, 4, 5), (2, 6), (3, 4, 5)]:
            x = rng.standard_normal(shape).astype(np.float32)
            y, = session.run(["y"], {"x": x})
            np.testing.assert_array_equal(y, np.maximum(x.reshape(shape[0], -1), 0))
            assert session.plan(["y"], {"x": x}).paths == (("reshape",), ("relu",))
        assert len(session._plans) == 2


def test_optimize_false_runs_the_model_as_given() -> None:
    """With optimize=False the Shape chain runs on every call."""
    with Session(shape_chain(), optimize=False) as session:
        x = np.ones((2, 3), np.float32)
        np.testing.assert_array_equal(session.run(["y"], {"x": x})[0], x.reshape(2, -1))
        assert ("shape",) in session.plan(["y"], {"x": x}).paths


def test_inner_fetches_and_feeds_use_the_plain_plan() -> None:
    """Fetching an inner port (which optimisation could remove) still works, from the unoptimised plan."""
    with Session(shape_chain()) as session:
        shape, = session.run(["shape:shape"], {"x": np.ones((2, 3), np.float32)})
        assert shape.tolist() == [2, 3]
    assert signature(shape_chain(), ("shape:shape",), {"x": np.ones(2, np.float32)}) is None


def test_feeds_that_do_not_fit_raise_as_without_optimisation() -> None:
    """A feed whose dtype contradicts its port is refused with the executor's own error, not specialised to."""
    typed = Container(None, "g", inputs=[("x", {"dtype": "float32", "shape": ["n", 2]})], outputs=["y"], children=[op("Relu", "r", ["X"], ["Y"])],
                      edges=[("g:x", "r:X"), ("r:Y", "g:y")], attrs=NS)
    assert signature(typed, ("y",), {"x": np.ones((3, 2), np.float64)}) is None
    with Session(typed) as session, pytest.raises(ExecutionError, match="float64"):
        session.run(["y"], {"x": np.ones((3, 2), np.float64)})


def test_exotic_dtypes_take_the_plain_plan() -> None:
    """A feed of a dtype numpy has no name for across libraries (bfloat16) is not specialised to."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    typed = Container(None, "g", inputs=[("x", {"dtype": "bfloat16"})], outputs=["y"], children=[op("Relu", "r", ["X"], ["Y"])],
                      edges=[("g:x", "r:X"), ("r:Y", "g:y")], attrs=NS)
    x = np.array([-1.0, 2.0], ml_dtypes.bfloat16)
    assert signature(typed, ("y",), {"x": x}) is None
    with Session(typed) as session:
        assert session.run(["y"], {"x": x})[0].astype(np.float32).tolist() == [0.0, 2.0]


@pytest.mark.parametrize("feed", [
    np.ones((3, 2), np.float32).view(np.ma.MaskedArray),  # an ndarray subclass
    np.ones((3, 3), np.float32),  # a fixed axis of another size
    np.ones((3, 2, 1), np.float32),  # another rank
])
def test_a_specialised_plan_is_never_given_feeds_the_feed_check_would_refuse(feed: np.ndarray) -> None:
    """Runs skip the feed check only on a plan specialised to the feeds' signature, which refuses whatever the
    check refuses, so a mis-typed feed still raises the executor's feed error after a good run."""
    typed = Container(None, "g", inputs=[("x", {"dtype": "float32", "shape": ["n", 2]})], outputs=["y"], children=[op("Relu", "r", ["X"], ["Y"])],
                      edges=[("g:x", "r:X"), ("r:Y", "g:y")], attrs=NS)
    assert signature(typed, ("y",), {"x": feed}) is None
    with Session(typed) as session:
        assert session.run(["y"], {"x": -np.ones((4, 2), np.float32)})[0].tolist() == [[0, 0]] * 4
        with pytest.raises(ExecutionError, match="does not match"):
            session.run(["y"], {"x": feed})


def test_planning_pauses_the_cycle_collector_and_restores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector is off while a plan is optimised and compiled, and on again after (a pass in the
    middle of planning a 1,000-node model cost up to 180 ms); runs themselves leave it alone."""
    import gc

    from amanda.exec import session as session_module

    seen: list[bool] = []
    real = session_module.optimized_for
    monkeypatch.setattr(session_module, "optimized_for", lambda *a: seen.append(gc.isenabled()) or real(*a))
    assert gc.isenabled()
    x = np.ones((2, 3), np.float32)
    with Session(shape_chain()) as session:
        y, = session.run(["y"], {"x": x})
        assert seen == [False] and gc.isenabled()
        session.run(["y"], {"x": x})
        assert seen == [False]  # the cached plan: no planning
    np.testing.assert_array_equal(y, x.reshape(2, -1))


def test_a_training_step_fetching_its_train_port_is_specialised_and_unchanged() -> None:
    """``run(["loss", "train"])`` fetches a control port: its plan is specialised to the feeds, so
    the gradient's Shape ops (which read the forward model by path) run at plan time, and five
    steps give the same losses and weights, bit for bit, as the plain plan."""
    import amanda
    from amanda import Input, layers, ops
    from amanda.optim import Adam, minimize

    def trained(optimize: bool) -> tuple[list, list, Session]:
        x = Input("x", "float32", ("batch", 1, 4, 4))
        h = layers.relu()(layers.BatchNorm(4, name="bn")(layers.Conv(1, 4, 3, padding="same", name="conv")(x)))
        net = layers.seeded(amanda.model([x], {"loss": ops.ReduceMean(ops.Mul(h, h), keepdims=0)}, name="net"), 0)
        session = Session(minimize(net, "loss", Adam(lr=1e-2)), threads=1, optimize=optimize)
        feeds = {"x": np.random.default_rng(1).standard_normal((3, 1, 4, 4)).astype(np.float32)}
        losses = [session.run(["loss", "train"], feeds, phase="train")[0] for _ in range(5)]
        return losses, [np.array(v) for v in session.state.values()], session

    assert signature(Container(None, "m", outputs=["y"], controls=["train"]), ("y", "train"), {}) == ()
    plain, plain_state, s0 = trained(False)
    fast, fast_state, s1 = trained(True)
    feeds = {"x": np.zeros((3, 1, 4, 4), np.float32)}
    assert "Shape" in [i.op_type for i in s0.plan(["loss", "train"], feeds, phase="train").infos]
    assert "Shape" not in [i.op_type for i in s1.plan(["loss", "train"], feeds, phase="train").infos]
    np.testing.assert_array_equal(plain, fast)
    for a, b in zip(plain_state, fast_state):
        np.testing.assert_array_equal(a, b)
