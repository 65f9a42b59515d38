"""Dispatch and planning pieces: namespaces, kernel attributes, dtype-dependent versions,
messages, plan structure (pruning, frees, slots) and the sequence/optional kernels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from amanda import Container, op
from amanda.errors import ExecutionError
from amanda.exec import Session
from amanda.exec.dispatch import (
    BOOKKEEPING_ATTRS,
    describe,
    describe_inputs,
    failure,
    kernel_attrs,
    parse_namespace,
    resolve_kernel,
    session_op_types,
)
from amanda.exec.kernels.registry import kernel
from amanda.exec.plan import bind_phase, compile_plan
from amanda.opset.onnx import sequences

NS = {"namespace": "amanda/onnx/17"}


@pytest.mark.parametrize(
    "name, expected",
    [
        ("amanda/onnx/17", ("amanda/onnx", "", 17)),
        ("amanda/onnx", ("amanda/onnx", "", None)),
        ("amanda/onnx-ml/3", ("amanda/onnx", "ai.onnx.ml", 3)),
        ("amanda/onnx-preview-training/1", ("amanda/onnx", "ai.onnx.preview.training", 1)),
        ("amanda/onnx/com.example/2", ("amanda/onnx", "com.example", 2)),
        ("amanda/core", ("amanda/core", "", None)),
        ("amanda/tensorflow/1.13.1", ("amanda/tensorflow", "", None)),
    ],
)
def test_parse_namespace(name: str, expected: tuple) -> None:
    """A namespace name splits into kernel family, ONNX domain and integer opset."""
    assert parse_namespace(name) == expected


def test_kernel_attrs_drop_bookkeeping() -> None:
    """Kernels see the op's own attributes minus amanda's bookkeeping keys, read-only."""
    o = op("Constant", "c", outputs=["output"], attrs={
        "value": 1, "initializer": True, "namespace": "amanda/onnx/17", "onnx_node": {"name": "x"},
        "metadata": {"k": "v"}, "alpha": 0.5})
    attrs = kernel_attrs(o)
    assert dict(attrs) == {"value": 1, "alpha": 0.5}
    with pytest.raises(TypeError):
        attrs["value"] = 2  # type: ignore[index]
    assert "initializer" in BOOKKEEPING_ATTRS


def test_inherited_attrs_are_not_kernel_attrs() -> None:
    """An attribute set on an enclosing container does not reach the kernel (only the namespace
    is inherited, through the effective view)."""
    seen: list[dict] = []

    @kernel("Spy", family="amanda/test-dispatch")
    def spy(attrs: Mapping[str, Any]) -> tuple:
        seen.append(dict(attrs))
        return (np.zeros(1),)

    g = Container("G", "g", outputs=["y"], attrs={"namespace": "amanda/test-dispatch", "alpha": 3},
                  children=[op("Spy", "s", [], ["y"], attrs={"beta": 1})], edges=[("s:y", "g:y")])
    Session(g).run(["y"])
    assert seen == [{"beta": 1}]


def test_dtype_dependent_versions_resolve_per_dtype() -> None:
    """When the newest version accepts only some dtypes, each run picks by its input dtypes."""

    @kernel("Which", family="amanda/test-dtype")
    def generic(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
        return (np.array("generic"),)

    @kernel("Which", family="amanda/test-dtype", dtypes=["int64"])
    def integers(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
        return (np.array("int64"),)

    g = Container("G", "g", inputs=["x"], outputs=["y"], attrs={"namespace": "amanda/test-dtype"},
                  children=[op("Which", "w", ["x"], ["y"])], edges=[("g:x", "w:x"), ("w:y", "g:y")])
    s = Session(g)
    assert str(s.run(["y"], {"x": np.zeros(1, np.int64)})[0]) == "int64"
    assert str(s.run(["y"], {"x": np.zeros(1, np.float32)})[0]) == "generic"


def test_no_dtype_version_raises_on_run() -> None:
    """A dtype no version accepts fails at run time with the op's path and inputs."""

    @kernel("OnlyInts", family="amanda/test-dtype2", dtypes=["int32"])
    def only(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
        return (x,)

    g = Container("G", "g", inputs=["x"], outputs=["y"], attrs={"namespace": "amanda/test-dtype2"},
                  children=[op("OnlyInts", "o", ["x"], ["y"])], edges=[("g:x", "o:x"), ("o:y", "g:y")])
    with pytest.raises(ExecutionError, match=r"while executing `o` \(OnlyInts, amanda/test-dtype2\) "
                                             r"with inputs float64\[2\]: ExecutionError: no kernel version"):
        Session(g).run(["y"], {"x": np.zeros(2)})


def test_resolve_kernel_reports_missing_kernels() -> None:
    """resolve_kernel raises naming the op type and namespace; session kernels are found."""
    with pytest.raises(ExecutionError, match="Nope"):
        resolve_kernel(op("Nope", "n"), "n", "amanda/onnx/17")
    assert resolve_kernel(op("Loop", "l"), "l", "amanda/onnx/17").session
    assert not resolve_kernel(op("Relu", "r"), "r", "amanda/onnx/17").session
    assert resolve_kernel(op("MatMul", "m"), "m", "amanda/onnx/17").heavy
    assert {"If", "Loop", "Scan", "SequenceMap"} <= set(session_op_types())


def test_output_count_is_passed_to_kernels_that_need_it() -> None:
    """Split before opset 18 splits into as many parts as the op declares outputs."""
    g = Container("G", "g", inputs=["x"], outputs=["a", "b", "c"], attrs={"namespace": "amanda/onnx/13"},
                  children=[op("Split", "s", ["input"], ["outputs_0", "outputs_1", "outputs_2"])],
                  edges=[("g:x", "s:input"), ("s:outputs_0", "g:a"), ("s:outputs_1", "g:b"),
                         ("s:outputs_2", "g:c")])
    a, b, c = Session(g).run(["a", "b", "c"], {"x": np.arange(6.0)})
    assert a.tolist() == [0, 1] and c.tolist() == [4, 5]


def test_describe_and_failure() -> None:
    """Values are described as dtype[shape]; failures read as the style guide says."""
    assert describe(np.zeros((1, 3, 28, 28), np.float32)) == "float32[1,3,28,28]"
    assert describe(np.float64(1)) == "float64[]" and describe("s") == "str"
    assert describe_inputs([np.zeros(2, np.int64), None]) == "int64[2], None"
    err = failure("block1/conv", "Conv", "amanda/onnx/17",
                  [np.zeros((1, 3, 28, 28), np.float32), np.zeros((8, 3, 3, 3), np.float32)], ValueError("bad"))
    assert str(err) == ("while executing `block1/conv` (Conv, amanda/onnx/17) with inputs "
                        "float32[1,3,28,28], float32[8,3,3,3]: ValueError: bad")
    assert err.path == "block1/conv"


def test_bind_phase_without_phase_is_identity() -> None:
    """bind_phase(model, None) is the model itself."""
    g = Container("G", "g", attrs=NS, children=[op("Relu", "r", ["X"], ["Y"])])
    assert bind_phase(g, None) is g


def test_plan_frees_each_value_after_its_last_reader() -> None:
    """In a chain a -> b -> c, a's output is freed by b's step and b's by c's; fetched
    values are kept."""
    g = Container("G", "g", inputs=["x"], outputs=["y"], attrs=NS,
                  children=[op("Neg", n, ["X"], ["Y"]) for n in "abc"],
                  edges=[("g:x", "a:X"), ("a:Y", "b:X"), ("b:Y", "c:X"), ("c:Y", "g:y")])
    plan = compile_plan(g, ("y",), ("x",))
    (x_slot,) = [s for s in plan.feed_slots.values()]
    steps = plan.steps
    assert steps[0][4] == (x_slot,)  # x is freed once a ran
    assert steps[1][4] == steps[0][3][0][1:]  # a's output freed after b
    assert steps[2][4] == steps[1][3][0][1:]  # b's output freed after c
    assert plan.fetch_slots == (steps[2][3][0][1],)
    assert all(plan.fetch_slots[0] not in step[4] for step in steps)  # the fetched value is kept
    assert [(r.preds, r.succs) for r in plan.schedule.records] == [(0, (1,)), (1, (2,)), (1, ())]
    assert "3 steps" in repr(plan)


def test_plan_prunes_to_the_fetches() -> None:
    """Only ops some fetch needs are planned."""
    g = Container("G", "g", inputs=["x"], outputs=["y", "z"], attrs=NS,
                  children=[op("Neg", "a", ["X"], ["Y"]), op("Relu", "b", ["X"], ["Y"])],
                  edges=[("g:x", "a:X"), ("g:x", "b:X"), ("a:Y", "g:y"), ("b:Y", "g:z")])
    assert compile_plan(g, ("z",), ("x",)).paths == (("b",),)
    assert compile_plan(g, ("y", "z"), ("x",)).paths == (("a",), ("b",))


def test_feeding_one_value_twice_is_an_error() -> None:
    """Two feed names for the same value are rejected."""
    g = Container("G", "g", inputs=["x"], outputs=["y"], attrs=NS,
                  children=[op("Neg", "a", ["X"], ["Y"])], edges=[("g:x", "a:X"), ("a:Y", "g:y")])
    with pytest.raises(ExecutionError, match="each value fed once"):
        Session(g).run(["y"], {"x": 1.0, "g:x": 2.0})


def test_sequence_kernels() -> None:
    """Sequences are lists that kernels never change in place; optionals are None or a value."""
    a, b = np.zeros(2), np.ones(2)
    seq = sequences.sequence_construct({}, a, b)[0]
    assert sequences.sequence_length({}, seq)[0] == 2
    assert sequences.sequence_at({}, seq, np.array(-1))[0] is b
    inserted = sequences.sequence_insert({}, seq, a, np.array(1))[0]
    assert len(inserted) == 3 and len(seq) == 2
    assert len(sequences.sequence_erase({}, inserted)[0]) == 2
    assert sequences.sequence_empty({})[0] == []
    assert sequences.concat_from_sequence({"axis": 0}, seq)[0].shape == (4,)
    assert sequences.concat_from_sequence({"axis": 0, "new_axis": 1}, seq)[0].shape == (2, 2)
    parts = sequences.split_to_sequence({"axis": 0}, np.arange(6.0), np.array([2, 4]))[0]
    assert [p.tolist() for p in parts] == [[0, 1], [2, 3, 4, 5]]
    assert len(sequences.split_to_sequence({"axis": 0, "keepdims": 0}, np.arange(3.0))[0]) == 3
    assert len(sequences.split_to_sequence({"axis": 0}, np.arange(6.0), np.array(4))[0]) == 2
    assert sequences.optional({})[0] is None and sequences.optional({}, a)[0] is a
    assert not sequences.optional_has_element({})[0] and sequences.optional_has_element({}, a)[0]
    assert sequences.optional_get_element({}, a)[0] is a
    with pytest.raises(ExecutionError):
        sequences.optional_get_element({}, None)
    with pytest.raises(ExecutionError, match="out of range"):
        sequences.sequence_at({}, seq, np.array(5))


def test_an_input_port_the_kernel_does_not_take_is_a_plan_time_error() -> None:
    """An op with more input ports than its kernel takes fails when the plan is made, naming the
    op's path, the unknown ports and the schema's valid ports, before any kernel runs."""
    inner = Container("Block", "b", inputs=["x"], outputs=["y"],
                      children=[op("Gemm", "fc", ["A", "B", "C", "D", "E"], ["Y"])],
                      edges=[("b:x", "fc:A"), ("b:x", "fc:B"), ("fc:Y", "b:y")])
    g = Container("G", "g", inputs=["x"], outputs=["y"], attrs={"namespace": "amanda/onnx/17"},
                  children=[inner], edges=[("g:x", "b:x"), ("b:y", "g:y")])
    s = Session(g)
    with pytest.raises(ExecutionError) as info:
        s.plan(["y"], ["x"])
    assert str(info.value) == ("op `b/fc` (Gemm, amanda/onnx/17) has input ports `D`, `E`, which its kernel "
                               "does not take; Gemm takes 2 to 3 inputs: A, B, C?")
    assert info.value.path == "b/fc" and info.value.found == "A, B, C, D, E"
    relu = Container("G", "g", inputs=["x"], outputs=["y"], attrs={"namespace": "amanda/onnx/17"},
                     children=[op("Relu", "r", ["X", "Z"], ["Y"])], edges=[("g:x", "r:X"), ("r:Y", "g:y")])
    with pytest.raises(ExecutionError, match=r"op `r` \(Relu, amanda/onnx/17\) has input port `Z`, which its "
                                             r"kernel does not take; Relu takes 1 input: X$"):
        Session(relu).run(["y"], {"x": np.ones(2, np.float32)})
