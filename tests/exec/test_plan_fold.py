"""Plan-time folding: pure ops of constants run once, when the plan is made, even where the
chain crosses containers; effectful ops, ops that fail and big outputs stay steps."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import Container, op
from amanda.errors import ExecutionError
from amanda.exec.plan import compile_plan
from amanda.exec.plan_fold import fold_pure

NS = {"namespace": "amanda/onnx/17"}


def const(name: str, value: object) -> Container:
    return op("Constant", name, [], ["output"], {"value": np.asarray(value)})


def nested_shape_chain() -> Container:
    """``y = x + Expand(0, Concat(Unsqueeze(2), [3]))``: the Unsqueeze sits in an inner
    container, the Concat and Expand outside it (as a torch export's module scopes put them)."""
    inner = Container("Block", "inner", outputs=["out"], children=[
        const("two", 2), const("axes", [0]), op("Unsqueeze", "u", ["data", "axes"], ["expanded"])],
        edges=[("two:output", "u:data"), ("axes:output", "u:axes"), ("u:expanded", "inner:out")])
    return Container("G", "g", inputs=["x"], outputs=["y"], attrs=NS, children=[
        inner, const("three", [3]), const("zero", np.float32(0)),
        op("Concat", "cat", ["a", "b"], ["concat_result"], {"axis": 0}),
        op("Expand", "grow", ["input", "shape"], ["output"]), op("Add", "add", ["A", "B"], ["C"])],
        edges=[("inner:out", "cat:a"), ("three:output", "cat:b"), ("zero:output", "grow:input"),
               ("cat:concat_result", "grow:shape"), ("g:x", "add:A"), ("grow:output", "add:B"),
               ("add:C", "g:y")])


def test_a_shape_chain_across_containers_folds_into_the_template() -> None:
    """Only the Add of the feed runs; the folded value is read-only and the result is numpy's."""
    plan = compile_plan(nested_shape_chain(), ("y",), ("x",))
    assert [info.op_type for info in plan.infos] == ["Add"]
    folded = [v for v in plan.template if isinstance(v, np.ndarray) and v.shape == (2, 3)]
    assert len(folded) == 1 and not folded[0].flags.writeable
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with amanda.Session(nested_shape_chain(), threads=1, optimize=False) as session:
        np.testing.assert_array_equal(session.run("y", {"x": x})[0], x)


def test_effectful_and_failing_ops_stay_steps() -> None:
    """A random op of a constant is drawn every run; an op that fails on its constants fails
    when the run reaches it, with its path, as without folding."""
    g = Container("G", "g", outputs=["r", "bad"], attrs=NS, children=[
        const("c", np.zeros((2, 2), np.float32)), op("RandomUniformLike", "rand", ["input"], ["output"]),
        const("shape", [5]), op("Reshape", "reshape", ["data", "shape"], ["reshaped"])],
        edges=[("c:output", "rand:input"), ("rand:output", "g:r"), ("c:output", "reshape:data"),
               ("shape:output", "reshape:shape"), ("reshape:reshaped", "g:bad")])
    plan = compile_plan(g, ("r", "bad"), ())
    assert [info.op_type for info in plan.infos] == ["RandomUniformLike", "Reshape"]
    with amanda.Session(g, threads=1) as session:
        first, second = session.run("r")[0], session.run("r")[0]
        assert first.shape == (2, 2) and not np.array_equal(first, second)
        with pytest.raises(ExecutionError) as caught:
            session.run("bad")
    assert "reshape" in str(caught.value)


def test_fold_pure_refuses_what_must_run() -> None:
    """No outputs, no present input, an input not constant, an effectful op, a non-array or
    an over-large result: nothing is written and the answer is False."""
    template: list = [None, np.ones(3)]

    def twice(attrs: object, x: np.ndarray) -> tuple:
        return (x * 2,)

    assert not fold_pure(twice, {}, "Mul", None, (1,), (), template, {0, 1})
    assert not fold_pure(twice, {}, "Mul", None, (0,), ((0, 2),), template, {0, 1})
    assert not fold_pure(twice, {}, "Mul", None, (1,), ((0, 2),), template, {0})
    assert not fold_pure(twice, {}, "RandomNormalLike", "amanda/onnx/17", (1,), ((0, 2),), template, {0, 1})
    assert not fold_pure(lambda attrs, x: ([x],), {}, "SequenceConstruct", None, (1,), ((0, 2),), template, {0, 1})
    assert not fold_pure(lambda attrs, x: (np.zeros(80 << 20, np.uint8),), {}, "Mul", None, (1,), ((0, 2),),
                         template, {0, 1})
    assert len(template) == 2
    template.append(None)
    assert fold_pure(twice, {}, "Mul", "amanda/onnx/17", (1,), ((0, 2),), template, {0, 1})
    np.testing.assert_array_equal(template[2], [2.0, 2.0, 2.0])


def floating_point_edge_cases() -> Container:
    """``1/0``, ``log(0)`` and ``int32(nan)`` of constants, and ``x/0`` of a feed."""
    return Container("G", "g", inputs=["x"], outputs=["div", "log", "cast", "feed_div"], attrs=NS, children=[
        const("one", np.float32(1)), const("zero", np.float32(0)), const("nan", np.float32(np.nan)),
        op("Div", "div", ["A", "B"], ["C"]), op("Log", "log", ["input"], ["output"]),
        op("Cast", "cast", ["input"], ["output"], {"to": 6}), op("Div", "feed_div", ["A", "B"], ["C"])],
        edges=[("one:output", "div:A"), ("zero:output", "div:B"), ("zero:output", "log:input"),
               ("nan:output", "cast:input"), ("g:x", "feed_div:A"), ("zero:output", "feed_div:B"),
               ("div:C", "g:div"), ("log:output", "g:log"), ("cast:output", "g:cast"),
               ("feed_div:C", "g:feed_div")])


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("optimize", [False, True])
def test_floating_point_errors_are_values_without_warnings(threads: int, optimize: bool) -> None:
    """An op whose folding raises a FloatingPointError stays a step; every run path (the
    sequential runner, the worker threads, graph-level folding) gives numpy's values and
    prints no RuntimeWarning, though kernels set no ``errstate`` of their own."""
    plan = compile_plan(floating_point_edge_cases(), ("div", "log", "cast", "feed_div"), ("x",))
    assert sorted(info.op_type for info in plan.infos) == ["Cast", "Div", "Div", "Log"]
    x = np.array([-1, 0, 2], np.float32)
    with np.errstate(all="ignore"):
        expected = [np.float32(1) / np.float32(0), np.log(np.float32(0)),
                    np.array(np.float32(np.nan)).astype(np.int32), x / np.float32(0)]
    # offload_elements=0: every op of the threaded runner goes to a worker thread
    with amanda.Session(floating_point_edge_cases(), threads=threads, optimize=optimize,
                        offload_elements=0) as session:
        found = session.run(["div", "log", "cast", "feed_div"], {"x": x})
    for got, want in zip(found, expected, strict=True):
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want)
