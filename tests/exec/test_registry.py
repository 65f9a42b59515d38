"""The op registry: one frozen entry per (family, domain, op type) carrying every fact."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from amanda import Container, op
from amanda.errors import ExecutionError
from amanda.exec import Session
from amanda.exec.kernels import registry
from amanda.exec.kernels.arity import needs_output_count
from amanda.exec.kernels.registry import (
    ONNX,
    declare,
    entries,
    entry,
    fact,
    kernel,
    lookup,
    register_fact,
    session_kernel,
    session_op_types,
    supported_op_types,
)

HEAVY = {"MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "MatMulInteger", "ConvInteger",
         "QLinearMatMul", "QLinearConv", "LSTM", "GRU", "RNN"}
FRESH = {"Add", "Sub", "Mul", "Div", "MatMul", "Gemm", "Conv", "ConvTranspose", "Relu", "Sigmoid",
         "Tanh", "Exp", "Sqrt", "Neg", "Softmax", "LayerNormalization", "BatchNormalization",
         "MaxPool", "AveragePool", "Erf", "Pow", "LeakyRelu", "Gelu"}
DONATABLE = {"Relu": (0,), "Sigmoid": (0,), "Tanh": (0,), "Exp": (0,), "Neg": (0,), "Sqrt": (0,),
             "Add": (0, 1), "Mul": (0, 1), "Sub": (0,), "Div": (0,)}


def test_onnx_entries_carry_the_executor_facts() -> None:
    """Heaviness, freshness and in-place positions of the ONNX ops are the documented sets."""
    onnx = entries(ONNX, "")
    assert {e.op_type for e in onnx if e.heavy} == HEAVY
    assert {e.op_type for e in onnx if e.fresh} == FRESH
    assert {e.op_type: e.inplace.positions for e in onnx if e.inplace} == DONATABLE
    assert {e.op_type for e in onnx if e.needs_session} >= {"If", "Loop", "Scan", "SequenceMap"}
    assert {e.op_type for e in onnx if any(v.output_count for v in e.kernels)} == {"Split", "MaxPool"}


def test_old_table_names_are_gone() -> None:
    """The compatibility aliases HEAVY_OP_TYPES, FRESH and INPLACE are gone: the registry is
    the one place to ask."""
    from amanda.exec import dispatch, inplace

    for module, name in ((dispatch, "HEAVY_OP_TYPES"), (inplace, "FRESH"), (inplace, "INPLACE")):
        assert not hasattr(module, name)


def test_one_entry_holds_every_version_newest_first() -> None:
    """Versions of one op type land in one entry, newest first, dtype-specific before generic;
    heaviness set by any version stays."""
    family = "amanda/test-registry"

    @kernel("Twice", family=family, heavy=True)
    def v1(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
        return (x * 2,)

    @kernel("Twice", since=5, family=family)
    def v5(attrs: Mapping[str, Any], x: np.ndarray, y: np.ndarray | None = None) -> tuple:
        return (x + x,)

    @kernel("Twice", since=5, family=family, dtypes=["int64"])
    def v5_ints(attrs: Mapping[str, Any], *xs: np.ndarray) -> tuple:
        return (xs[0] << 1,)

    e = entry(family, "Twice")
    assert e is not None and e.heavy and not e.needs_session
    assert [v.fn for v in e.kernels] == [v5_ints, v5, v1]
    assert [v.arity for v in e.kernels] == [(0, math.inf), (1, 2), (1, 1)]
    assert [v.fn for v in e.kernels_at(4)] == [v1] and e.arity(4) == (1, 1)
    assert e.arity(None) == (0, math.inf) and e.arity(0) == (0, math.inf)
    assert lookup("Twice", 4, family=family).fn is v1
    assert lookup("Twice", 7, [np.dtype("int64")], family=family).fn is v5_ints
    assert lookup("Twice", 7, [np.dtype("float32")], family=family).fn is v5
    assert supported_op_types(family) == ["Twice"] and session_op_types(family) == []
    assert [x.op_type for x in entries(family)] == ["Twice"]


def test_session_kernels_share_the_entry_and_win() -> None:
    """A session kernel lives in the same entry as plain kernels and is the one a session runs."""
    family = "amanda/test-registry-session"

    @kernel("Count", family=family)
    def plain(attrs: Mapping[str, Any]) -> tuple:
        return (np.array(-1),)

    @session_kernel("Count", family)
    def counted(ctx: Any, attrs: Mapping[str, Any]) -> tuple:
        ctx.state["n"] = ctx.state.get("n", 0) + 1
        return (np.array(ctx.state["n"]),)

    e = entry(family, "Count")
    assert e is not None and e.needs_session and [v.fn for v in e.kernels] == [plain]
    assert session_op_types(family) == ["Count"]
    g = Container("G", "g", outputs=["y"], attrs={"namespace": family},
                  children=[op("Count", "c", [], ["y"])], edges=[("c:y", "g:y")])
    session = Session(g)
    assert [int(session.run(["y"])[0]) for _ in range(2)] == [1, 2]


def test_facts_extend_entries_without_changing_held_ones() -> None:
    """register_fact attaches a fact readable by fact() and entry.fact(); an entry held before
    is unchanged, and facts cannot be written through the entry."""
    family = "amanda/test-registry-facts"
    before = declare("Scale", family=family, heavy=True)
    after = register_fact(family, "Scale", "test.cost", 3)
    assert fact(family, "Scale", "test.cost") == 3 and after.fact("test.cost") == 3
    assert fact(family, "Scale", "test.other", "none") == "none"
    assert fact(family, "Missing", "test.cost", 0) == 0
    assert "test.cost" not in before.facts and after.heavy
    with pytest.raises(TypeError):
        after.facts["test.cost"] = 4  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        after.heavy = False  # type: ignore[misc]
    assert register_fact(family, "Scale", "test.cost", 3).fact("test.cost") == 3  # same value: fine
    with pytest.raises(ExecutionError, match="test.cost.*already 3.*replace=True"):
        register_fact(family, "Scale", "test.cost", 4)
    assert register_fact(family, "Scale", "test.cost", 4, replace=True).fact("test.cost") == 4
    assert entry(family, "Scale").heavy  # type: ignore[union-attr]


def test_domains_are_separate_entries() -> None:
    """The same op type in two domains of one family has two entries."""
    family = "amanda/test-registry-domain"
    declare("Same", family=family, heavy=True)
    register_fact(family, "Same", "test.domain", "b", domain="ai.example")
    assert entry(family, "Same").heavy and not entry(family, "Same", domain="ai.example").heavy  # type: ignore[union-attr]
    assert fact(family, "Same", "test.domain") is None
    assert fact(family, "Same", "test.domain", domain="ai.example") == "b"
    assert [e.domain for e in entries(family)] == ["", "ai.example"]


def test_output_count_is_a_version_fact() -> None:
    """Split and MaxPool versions want the node's output count; Relu's does not; a function
    no version registered does not."""
    assert needs_output_count(lookup("Split", 11)) and needs_output_count(lookup("Split", 13).fn)
    assert needs_output_count(lookup("MaxPool", 12))
    assert not needs_output_count(lookup("Relu", 14))
    assert not needs_output_count(lambda attrs: ())
    assert registry.version_of(lookup("Relu", 14).fn) is lookup("Relu", 14)
