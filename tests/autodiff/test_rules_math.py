"""Every arithmetic, activation, product, reduction and softmax rule agrees with central finite
differences in float64, on random shapes and attributes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from amanda import ops
from tests.autodiff.fd import check

SETTINGS = settings(max_examples=6, deadline=None)
shapes = st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple)


def arr(seed: int, shape: tuple, low: float | None = None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    return x if low is None else np.abs(x) + low


def broadcast_pair(draw: st.DrawFn) -> tuple[tuple, tuple]:
    big = draw(shapes)
    small = list(big[draw(st.integers(0, len(big) - 1)):])
    small = tuple(1 if draw(st.booleans()) else d for d in small)
    return (big, small) if draw(st.booleans()) else (small, big)


@st.composite
def pairs(draw: st.DrawFn) -> tuple[tuple, tuple]:
    return broadcast_pair(draw)


@SETTINGS
@given(pairs(), st.sampled_from(["Add", "Sub", "Mul", "Div"]), st.integers(0, 99))
def test_binary_ops_with_broadcasting(shapes_ab, op_type, seed):
    """Add, Sub, Mul and Div give both inputs' gradients, summed back over broadcast axes."""
    a, b = arr(seed, shapes_ab[0]), arr(seed + 1, shapes_ab[1], low=0.5 if op_type == "Div" else None)
    check(lambda a, b: getattr(ops, op_type)(a, b), {"a": a, "b": b})


@SETTINGS
@given(pairs(), st.integers(0, 99))
def test_pow(shapes_ab, seed):
    """Pow differentiates in base and exponent (positive base)."""
    check(lambda a, b: ops.Pow(a, b), {"a": arr(seed, shapes_ab[0], 0.5), "b": arr(seed + 1, shapes_ab[1])})


UNARY = {"Neg": None, "Sqrt": 0.5, "Exp": None, "Log": 0.5, "Abs": 0.2, "Tanh": None, "Sigmoid": None,
         "Relu": 0.2, "LeakyRelu": 0.2, "Elu": 0.2, "Erf": None, "Identity": None, "Softmax": None,
         "LogSoftmax": None}


@SETTINGS
@given(shapes, st.sampled_from(sorted(UNARY)), st.integers(0, 99))
def test_unary_ops(shape, op_type, seed):
    """Each elementwise op of one input (and softmax over its last axis) matches differences;
    kinked ops are sampled away from their kink."""
    low = UNARY[op_type]
    x = arr(seed, shape, low)
    if op_type in ("Abs", "Relu", "LeakyRelu", "Elu"):
        x = x * np.where(np.random.default_rng(seed).random(shape) < 0.5, -1, 1)
    check(lambda x: getattr(ops, op_type)(x), {"x": x})


@SETTINGS
@given(shapes, st.sampled_from(["none", "tanh"]), st.integers(0, 99))
def test_gelu(shape, approximate, seed):
    """Gelu (exact and tanh-approximated; an opset 20 op) matches differences."""
    from amanda.build import Ops

    check(lambda x: Ops("amanda/onnx/20").Gelu(x, approximate=approximate), {"x": arr(seed, shape)})


@SETTINGS
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.sampled_from([(2, 2), (1, 2), (2, 1), (3, 2), (2, 3),
                                                                                   (1, 1), (3, 3)]), st.integers(0, 99))
def test_matmul_ranks(n, k, m, ranks, seed):
    """MatMul of 1-D to 3-D operands with a broadcast batch gives both gradients."""
    ra, rb = ranks
    sa = {1: (k,), 2: (n, k), 3: (2, n, k)}[ra]
    sb = {1: (k,), 2: (k, m), 3: (2, k, m)}[rb]
    check(lambda a, b: ops.MatMul(a, b), {"a": arr(seed, sa), "b": arr(seed + 1, sb)})


@SETTINGS
@given(st.integers(0, 1), st.integers(0, 1), st.sampled_from([(1.0, 1.0), (0.5, 2.0)]), st.booleans(), st.integers(0, 99))
def test_gemm(trans_a, trans_b, scales, row_bias, seed):
    """Gemm with either operand transposed, alpha, beta and a broadcast bias."""
    a = arr(seed, (3, 2) if trans_a else (2, 3))
    b = arr(seed + 1, (4, 3) if trans_b else (3, 4))
    c = arr(seed + 2, (4,) if row_bias else (2, 1))
    check(lambda a, b, c: ops.Gemm(a, b, c, transA=trans_a, transB=trans_b, alpha=scales[0], beta=scales[1]),
          {"a": a, "b": b, "c": c})


@SETTINGS
@given(shapes, st.sampled_from(["ReduceSum", "ReduceMean", "ReduceMax"]), st.booleans(), st.data())
def test_reductions(shape, op_type, keepdims, data):
    """ReduceSum, ReduceMean and ReduceMax over random axes (or all), with and without keepdims."""
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), unique_by=lambda a: a % len(shape),
                              max_size=len(shape)))
    x = arr(data.draw(st.integers(0, 99)), shape)
    if op_type == "ReduceSum":
        build = (lambda x: ops.ReduceSum(x, np.array(axes, np.int64), keepdims=int(keepdims))) if axes else \
            (lambda x: ops.ReduceSum(x, keepdims=int(keepdims)))
    else:
        kw = {"axes": axes} if axes else {}
        build = lambda x: getattr(ops, op_type)(x, keepdims=int(keepdims), **kw)  # noqa: E731
    check(build, {"x": x})


@SETTINGS
@given(st.lists(st.integers(1, 3), min_size=2, max_size=3).map(tuple), st.integers(0, 99), st.data())
def test_softmax_axes(shape, seed, data):
    """Softmax and LogSoftmax over any axis."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    kind = data.draw(st.sampled_from(["Softmax", "LogSoftmax"]))
    check(lambda x: getattr(ops, kind)(x, axis=axis), {"x": arr(seed, shape)})


def test_shared_input_contributions_are_summed():
    """A value read by several ops (x*x + exp(x)) gets the sum of their contributions."""
    x = arr(3, (2, 3))
    check(lambda x: ops.Add(ops.Mul(x, x), ops.Exp(x)), {"x": x})


def test_old_opset_softmax_over_flattened_axes_is_refused():
    """An opset-11 Softmax over axis 1 of a rank-3 input (ONNX flattened axes 1..) is a clear
    SchemaError; over the last axis it differentiates as any softmax."""
    import pytest

    import amanda
    from amanda.build import Ops

    old = Ops("amanda/onnx/11")
    with pytest.raises(amanda.SchemaError, match="opset 11"):
        check(lambda x: old.Softmax(x, axis=1), {"x": arr(0, (2, 3, 4))})
    check(lambda x: old.Softmax(x, axis=2), {"x": arr(0, (2, 3, 4))})
