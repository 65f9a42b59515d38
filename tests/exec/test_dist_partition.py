"""Placement and partitioning: pure transforms whose parts, run one after another, compute
what the unpartitioned model computes (onnxruntime as the oracle), with variables kept on
their device and control order kept across devices."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")

import amanda  # noqa: E402
from amanda.exec.dist import PlacementError, devices_of, partition, place, run_partitioned  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402
from tests.fixtures.onnx import onnx_models as models  # noqa: E402
from tests.strategies import check_invariants, snapshot  # noqa: E402

MODELS = ["mlp", "cnn", "attention"]


def spread(model: amanda.Container, choices: list[int]) -> amanda.Container:
    """``model`` with leaf op i placed on ``worker-<choices[i]>``."""
    paths = list(amanda.flatten(model).ops)
    for path, choice in zip(paths, choices):
        model = amanda.with_attrs(model, [path], device=f"worker-{choice}")
    return model


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_any_placement_partitions_into_parts_that_compute_the_model(name: str, data: st.DataObject) -> None:
    """Whatever device each op is put on, running the parts in order gives onnxruntime's
    outputs, every cut edge crosses through a Send/Recv pair (constants are copied into the
    parts that read them instead), and the model is unchanged."""
    proto = models.BUILDERS[name]()
    model = from_onnx(proto)
    choices = data.draw(st.lists(st.integers(0, 2), min_size=len(amanda.flatten(model).ops),
                                 max_size=len(amanda.flatten(model).ops)))
    placed = spread(model, choices)
    before = snapshot(placed)
    feeds = models.feeds(name)
    outputs = [o.name for o in proto.graph.output]
    parts = partition(placed, outputs, list(feeds))
    got = run_partitioned(parts, feeds)
    for a, b in zip(got, models.run(proto, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert snapshot(placed) == before
    devices = devices_of(placed)
    for part in parts.parts:
        check_invariants(part.container)
        ops = [c for c in part.container.children if c.type not in ("Send", "Recv", "Constant")]
        assert {devices[tuple(c.name.split("/"))] for c in ops} <= {part.device}
        assert all(c.attrs["device"] == part.device for c in part.container.children)
        assert all(i < part.number for i, _ in part.receives.values())
    sends = sum(c.type == "Send" for p in parts.parts for c in p.container.children)
    recvs = sum(c.type == "Recv" for p in parts.parts for c in p.container.children)
    assert sends <= recvs and (sends == 0) == (len(parts.parts) == 1)


def test_place_is_pure_inherits_devices_and_is_visible_to_queries() -> None:
    """place() sets every leaf's device (own, inherited, or the default) without changing its
    input, shares ops already placed, and queries see the result."""
    inner = amanda.Container("Block", "block", attrs={"device": "worker-1"},
                             children=[amanda.op("Relu", "r"), amanda.op("Tanh", "t", attrs={"device": "worker-2"})])
    model = amanda.Container("Net", "net", children=[inner, amanda.op("Neg", "n")])
    before = snapshot(model)
    placed = place(model, default="cpu:0")
    assert snapshot(model) == before
    check_invariants(placed)
    assert [op.attrs["device"] for op in placed] == ["worker-1", "worker-2", "cpu:0"]
    assert place(placed) is placed
    assert placed.select("$..[?attrs.device=='worker-1']").paths == (("block",), ("block", "r"))


def variable_model(assign_device: str | None) -> amanda.Container:
    core = {"namespace": "amanda/core"}
    attrs = {**core, "device": assign_device} if assign_device else core
    return amanda.Container(
        "G", "g", outputs=["v"], attrs={"device": "worker-0"}, children=[
            amanda.op("Variable", "w", outputs=["ref"], attrs={**core, "value": np.float32(1), "device": "worker-1"}),
            amanda.op("AssignAdd", "inc", inputs=["ref", "delta"], outputs=["value"], attrs=attrs),
            amanda.op("Constant", "one", outputs=["output"],
                      attrs={"value": np.float32(2), "namespace": "amanda/onnx/17"}),
        ], edges=[("w:ref", "inc:ref"), ("one:output", "inc:delta"), ("inc:value", "g:v")])


def test_variables_colocate_and_keep_state_across_partitioned_runs() -> None:
    """An op that updates a variable moves to the variable's device; the update persists
    across runs in that device's state, as in one Session."""
    model = variable_model(None)
    assert devices_of(model)[("inc",)] == "worker-1"
    states: dict = {}
    parts = partition(model, ["v"])
    assert [float(run_partitioned(parts, {}, states)[0]) for _ in range(3)] == [3.0, 5.0, 7.0]
    assert len(states["worker-1"]) == 1 and not states.get("worker-0")


def test_an_explicit_device_away_from_its_variable_is_a_conflict() -> None:
    """An op whose own device differs from its variable's is reported by path."""
    with pytest.raises(PlacementError, match="inc") as info:
        devices_of(variable_model("worker-0"))
    assert info.value.problems[0].path == ("inc",)


def test_control_edges_across_devices_keep_their_order() -> None:
    """A control edge from an update on one device to a read on another makes the read see
    the updated value, through a token Send/Recv pair."""
    core = {"namespace": "amanda/core", "device": "worker-1"}
    model = amanda.Container("G", "g", outputs=["before", "after"], children=[
        amanda.op("Variable", "w", outputs=["ref"], attrs={**core, "value": np.float32(1)}),
        amanda.op("Constant", "one", outputs=["output"],
                  attrs={"value": np.float32(10), "namespace": "amanda/onnx/17", "device": "worker-0"}),
        amanda.op("AssignAdd", "inc", inputs=["ref", "delta"], outputs=["value"], attrs=core),
        amanda.op("Read", "read", inputs=["ref"], outputs=["value"], attrs=core),
        amanda.op("Identity", "copy", inputs=["input"], outputs=["output"],
                  attrs={"namespace": "amanda/onnx/17", "device": "worker-0"}),
        amanda.op("Read", "late", inputs=["ref"], outputs=["value"], attrs=core),
    ], edges=[("w:ref", "inc:ref"), ("one:output", "inc:delta"), ("w:ref", "read:ref"),
              ("inc:value", "copy:input"), ("copy:-1", "late:-1"), ("w:ref", "late:ref"),
              ("read:value", "g:before"), ("late:value", "g:after")])
    parts = partition(model, ["after"])
    tokens = [c for p in parts.parts for c in p.container.children if c.type == "Send" and not c.inputs]
    assert len(tokens) == 1
    assert float(run_partitioned(parts, {})[0]) == 11.0


def test_partition_rejects_bad_arguments() -> None:
    """A fetch list that is a string, or a model that is not a container, is an ArgumentError."""
    with pytest.raises(amanda.ArgumentError):
        partition(variable_model(None), "v")
    with pytest.raises(amanda.ArgumentError):
        partition("model", ["v"])  # type: ignore[arg-type]


def test_constants_are_copied_into_the_parts_that_read_them_not_sent() -> None:
    """A Constant read on two devices is copied into both parts (no Send of it, no part of its own device), so a
    run moves only computed values; a fetched Constant stays on its device."""
    onnx = {"namespace": "amanda/onnx/17"}
    model = amanda.Container("G", "g", inputs=["x"], outputs=["y", "z", "k"], attrs=onnx, children=[
        amanda.op("Constant", "k", outputs=["output"], attrs={"value": np.float32(3), "device": "worker-9"}),
        amanda.op("Mul", "a", ["A", "B"], ["C"], attrs={"device": "worker-0"}),
        amanda.op("Add", "b", ["A", "B"], ["C"], attrs={"device": "worker-1"}),
    ], edges=[("g:x", "a:A"), ("k:output", "a:B"), ("a:C", "b:A"), ("k:output", "b:B"),
              ("a:C", "g:y"), ("b:C", "g:z"), ("k:output", "g:k")])
    parts = partition(model, ["y", "z"], ["x"])
    assert [p.device for p in parts.parts] == ["worker-0", "worker-1"]
    kinds = [sorted(c.type for c in p.container.children) for p in parts.parts]
    assert kinds == [["Constant", "Mul", "Send"], ["Add", "Constant", "Recv"]]
    x = np.array([1.0, 2.0], np.float32)
    y, z = run_partitioned(parts, {"x": x})
    np.testing.assert_array_equal(y, x * 3)
    np.testing.assert_array_equal(z, x * 3 + 3)
    fetched = partition(amanda.with_attrs(model, [("a",), ("b",)], device="worker-0"), ["k"])
    assert [p.device for p in fetched.parts] == ["worker-9"]
    assert float(run_partitioned(fetched, {})[0]) == 3.0
