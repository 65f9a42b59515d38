"""Math kernels: broadcasting, dtype preservation and opset-version selection.

The ONNX backend node tests mostly use the newest opset and float32; these tests
cover what they miss, with onnxruntime (run on a one-node model at the given
opset) or plain numpy as the oracle.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import amanda.exec.kernels  # noqa: F401
from amanda.exec.kernels.registry import lookup, run_kernel

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

RNG = np.random.default_rng(0)


def run(op_type: str, inputs: Sequence[Any], attrs: dict | None = None, opset: int = 21) -> tuple:
    """Our kernel for ``op_type`` at ``opset``."""
    dtypes = [None if x is None else x.dtype for x in inputs]
    version = lookup(op_type, opset, dtypes)
    assert version is not None, f"no kernel for {op_type} at opset {opset}"
    return run_kernel(version, attrs or {}, list(inputs))


def oracle(
    op_type: str, inputs: Sequence[Any], attrs: dict | None = None, opset: int = 21,
    n_outputs: int = 1,
) -> list[np.ndarray]:
    """onnxruntime's result for a one-node model of ``op_type`` at ``opset``."""
    names = [f"in{i}" if x is not None else "" for i, x in enumerate(inputs)]
    outs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, names, outs, **(attrs or {}))
    feeds = {n: x for n, x in zip(names, inputs) if n}
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
         for n, x in feeds.items()],
        [onnx.ValueInfoProto(name=o) for o in outs],  # types left to inference
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_same(actual: np.ndarray, expected: np.ndarray, rtol: float = 1e-5) -> None:
    assert isinstance(actual, np.ndarray), type(actual)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=rtol)


# ---- broadcasting ----

@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum",
                                     "Mean", "Equal", "Less", "Greater", "PRelu"])
def test_binary_ops_broadcast_like_onnxruntime(op_type: str) -> None:
    """Two inputs of shapes (2,1,4) and (3,1) broadcast to (2,3,4) as onnxruntime does."""
    a = RNG.uniform(0.5, 2, (2, 1, 4)).astype(np.float32)
    b = RNG.uniform(0.5, 2, (3, 1)).astype(np.float32)
    if op_type == "PRelu":
        a, b = a - 1.25, b.reshape(3, 1)
    (ours, *_), (theirs, *_) = run(op_type, [a, b], opset=16), oracle(op_type, [a, b], opset=16)
    assert_same(ours, theirs)


def test_variadic_ops_broadcast_three_inputs() -> None:
    """Max/Sum/Mean over three inputs of different ranks broadcast together."""
    xs = [RNG.standard_normal(s).astype(np.float32) for s in [(4,), (3, 1), (2, 1, 1)]]
    for op_type in ("Max", "Min", "Sum", "Mean"):
        assert_same(run(op_type, xs)[0], oracle(op_type, xs)[0])


def test_where_broadcasts_all_three_inputs() -> None:
    """Where broadcasts condition, x and y and keeps x's dtype."""
    cond = RNG.standard_normal((3, 1)) > 0
    x, y = np.arange(4, dtype=np.int32), -np.ones((2, 1, 1), np.int32)
    assert_same(run("Where", [cond, x, y])[0], oracle("Where", [cond, x, y])[0])



@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("scalar", [0.0, -0.0, 2.5, np.nan])
def test_where_against_a_scalar_keeps_every_bit(dtype, scalar) -> None:
    """A large tensor against a scalar (the bitwise path), either side, on a condition laid out
    channels-last: numpy's ``where`` bit for bit, infinities, NaN and signed zeros included."""
    x = RNG.standard_normal((4, 16, 8, 8)).astype(dtype)
    x.flat[:5] = [np.inf, -np.inf, np.nan, -0.0, 0.0]
    cond = np.moveaxis(np.moveaxis(RNG.standard_normal((4, 16, 8, 8)), 1, -1) > 0, -1, 1)
    y = np.asarray(scalar, dtype)
    for inputs in ([cond, x, y], [cond, y, x]):
        got = run("Where", inputs)[0]
        want = np.where(*inputs)
        assert got.dtype == want.dtype and got.shape == want.shape
        unsigned = f"u{want.dtype.itemsize}"
        np.testing.assert_array_equal(got.view(unsigned), want.view(unsigned))

def test_legacy_broadcast_axis_aligns_second_input() -> None:
    """Opset-6 Add with broadcast=1, axis=1 adds a [C] tensor along axis 1 of [N,C,H]."""
    a, b = np.zeros((2, 3, 4), np.float32), np.arange(3, dtype=np.float32)
    (out,) = run("Add", [a, b], {"broadcast": 1, "axis": 1}, opset=6)
    np.testing.assert_array_equal(out, np.broadcast_to(b[:, None], (2, 3, 4)))


# ---- dtype preservation ----

@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_integer_div_truncates_toward_zero_like_onnxruntime(dtype: Any) -> None:
    """Integer Div rounds toward zero (C semantics), not down as numpy's // does."""
    a = np.array([7, -7, 7, -7, 6, -1, 0], dtype)
    b = np.array([2, 2, -2, -2, 3, 5, 3], dtype)
    assert_same(run("Div", [a, b])[0], oracle("Div", [a, b])[0])


@pytest.mark.parametrize("fmod", [0, 1])
def test_integer_mod_sign_follows_fmod_like_onnxruntime(fmod: int) -> None:
    """Mod takes the divisor's sign with fmod=0 and the dividend's with fmod=1."""
    a = np.array([7, -7, 7, -7, 5], np.int32)
    b = np.array([3, 3, -3, -3, 5], np.int32)
    ours = run("Mod", [a, b], {"fmod": fmod})[0]
    assert_same(ours, oracle("Mod", [a, b], {"fmod": fmod})[0])


def test_small_integers_keep_their_dtype_and_wrap() -> None:
    """Add/Sum/ReduceSum/CumSum of int8 stay int8 (numpy would widen the reductions)."""
    a = np.array([100, 120, -128], np.int8)
    assert run("Add", [a, a])[0].dtype == np.int8
    assert run("Sum", [a, a, a])[0].dtype == np.int8
    assert run("ReduceSum", [a.astype(np.int32)], {"keepdims": 0})[0].dtype == np.int32
    cum = run("CumSum", [a.astype(np.int32), np.array(0)])[0]
    assert cum.dtype == np.int32 and cum.tolist() == [100, 220, 92]


def test_pow_result_has_the_base_dtype() -> None:
    """Pow(int32, float32) is int32 and Pow(float32, int64) is float32, as onnxruntime says."""
    for x, y in [(np.array([1, 2, 3], np.int32), np.array([2.0, 3.0, 0.5], np.float32)),
                 (np.array([1.5, 2, 3], np.float32), np.array([2, 3, 1], np.int64))]:
        assert_same(run("Pow", [x, y], opset=15)[0], oracle("Pow", [x, y], opset=15)[0])


@pytest.mark.parametrize("op_type", ["Relu", "Abs", "Neg", "Sign"])
def test_integer_unary_ops_stay_integer(op_type: str) -> None:
    """Unary ops that accept integers return the same integer dtype."""
    x = np.array([-3, 0, 5], np.int8)
    assert_same(run(op_type, [x])[0], oracle(op_type, [x])[0])


@pytest.mark.parametrize("op_type", ["Sigmoid", "Softmax", "Exp", "Gelu", "ReduceMean", "MatMul"])
def test_float16_inputs_give_float16_outputs(op_type: str) -> None:
    """Narrow floats compute wider but come back in their own dtype."""
    x = RNG.standard_normal((3, 3)).astype(np.float16)
    inputs = [x, x] if op_type == "MatMul" else [x]
    (out, *_) = run(op_type, inputs)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, oracle(op_type, inputs)[0], rtol=2e-3, atol=2e-3)


def test_zero_d_inputs_give_ndarrays() -> None:
    """0-d inputs give 0-d ndarrays, not numpy scalars (ufuncs return scalars for them)."""
    s = np.array(2.0, np.float32)
    for op_type, inputs in [("Add", [s, s]), ("Exp", [s]), ("Relu", [s]), ("Less", [s, s])]:
        (out,) = run(op_type, inputs)[:1]
        assert isinstance(out, np.ndarray) and out.shape == ()


def test_clip_integers_with_input_bounds() -> None:
    """Clip on int32 with int32 bounds (opset 12) stays int32; min > max gives max."""
    x = np.arange(-5, 6, dtype=np.int32)
    for lo, hi in [(-2, 3), (4, 1)]:
        bounds = [np.array(lo, np.int32), np.array(hi, np.int32)]
        ours = run("Clip", [x, *bounds], opset=13)[0]
        assert_same(ours, oracle("Clip", [x, *bounds], opset=13)[0])


# ---- opset version selection ----

def test_reduce_sum_axes_attribute_before_13_and_input_from_13() -> None:
    """ReduceSum takes ``axes`` as an attribute at opset 11 and as an input at opset 13."""
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    old = run("ReduceSum", [x], {"axes": [1], "keepdims": 0}, opset=11)[0]
    axes = np.array([1], np.int64)
    new = run("ReduceSum", [x, axes], {"keepdims": 0}, opset=13)[0]
    assert_same(old, oracle("ReduceSum", [x], {"axes": [1], "keepdims": 0}, opset=11)[0])
    assert_same(new, oracle("ReduceSum", [x, axes], {"keepdims": 0}, opset=13)[0])
    assert lookup("ReduceSum", 11).fn is not lookup("ReduceSum", 13).fn


@pytest.mark.parametrize("op_type", ["ReduceMean", "ReduceMax", "ReduceL2", "ReduceLogSumExp"])
def test_other_reductions_switch_to_axes_input_at_18(op_type: str) -> None:
    """The other Reduce ops read ``axes`` from the attribute at 17 and the input at 18."""
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    axes = np.array([0, -1], np.int64)
    old = run(op_type, [x], {"axes": [0, -1]}, opset=17)[0]
    new = run(op_type, [x, axes], opset=18)[0]
    assert_same(old, oracle(op_type, [x], {"axes": [0, -1]}, opset=17)[0])
    assert_same(new, oracle(op_type, [x, axes], opset=18)[0])


def test_empty_axes_reduce_all_or_noop() -> None:
    """No axes reduce everything, unless noop_with_empty_axes makes the op an identity."""
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    assert run("ReduceSum", [x], opset=13)[0].shape == (1, 1)
    assert run("ReduceSum", [x], {"noop_with_empty_axes": 1}, opset=13)[0] is x


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_axis_semantics_change_at_13(op_type: str, opset: int) -> None:
    """Before 13 the input is coerced to 2-D at ``axis``; from 13 only ``axis`` is normalised."""
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    assert_same(run(op_type, [x], {"axis": 1}, opset=opset)[0],
                oracle(op_type, [x], {"axis": 1}, opset=opset)[0])
    # the defaults differ too: axis 1 (2-D coercion) before 13, axis -1 from 13
    assert_same(run(op_type, [x], opset=opset)[0], oracle(op_type, [x], opset=opset)[0])


def test_softmax_versions_differ_on_3d_input() -> None:
    """Softmax at 11 and 13 with axis=1 give different results on a 3-D input."""
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    old = run("Softmax", [x], {"axis": 1}, opset=11)[0]
    new = run("Softmax", [x], {"axis": 1}, opset=13)[0]
    np.testing.assert_allclose(old.reshape(2, -1).sum(1), 1, rtol=1e-5)
    np.testing.assert_allclose(new.sum(1), 1, rtol=1e-5)
    assert not np.allclose(old, new)


def _row_max_softmax(x: np.ndarray) -> np.ndarray:
    # the textbook form, each row shifted by its own max, in float64
    w = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(w - w.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_rows_far_below_the_largest_value_keep_their_precision(dtype: Any) -> None:
    """Rows are shifted by the array's one max; rows that sat far below it (or held inf
    and nan) are redone by their own max, so every row matches the row-max form."""
    x = RNG.standard_normal((7, 50)).astype(dtype) * 8
    x[1] += 1000  # sets the array max
    x[2] -= 500  # would underflow to all zeros against it
    x[3] += 970  # 30 below the max: kept on the fast path, small terms still accurate
    x[4, 3] = np.inf
    x[5, 7] = -np.inf
    x[6, :] = -np.inf
    got = run("Softmax", [x], {"axis": -1}, opset=13)[0]
    want = _row_max_softmax(x)
    assert got.dtype == dtype
    np.testing.assert_allclose(got[:4], want[:4], rtol=1e-5, atol=1e-30)
    np.testing.assert_allclose(got[5], want[5], rtol=1e-5)
    assert np.isnan(got[4]).all() and np.isnan(got[6]).all()  # inf - inf, as onnx computes it
    x[0, 0] = np.nan  # one nan makes the array max nan: every row is redone by its own max
    got = run("Softmax", [x], {"axis": -1}, opset=13)[0]
    assert np.isnan(got[0]).all()
    np.testing.assert_allclose(got[1:4], want[1:4], rtol=1e-5, atol=1e-30)


def test_clip_attribute_form_before_11() -> None:
    """Clip reads ``min``/``max`` attributes at opset 6 and optional inputs at opset 11."""
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    assert_same(run("Clip", [x], {"min": -0.5, "max": 0.5}, opset=6)[0],
                oracle("Clip", [x], {"min": -0.5, "max": 0.5}, opset=6)[0])
    lo = np.array(-0.5, np.float32)
    assert_same(run("Clip", [x, lo, None], opset=11)[0], oracle("Clip", [x, lo, None], opset=11)[0])


def test_ops_are_absent_before_their_first_opset() -> None:
    """An op looked up below its first opset has no kernel (Gelu is new in 20, Mod in 10)."""
    assert lookup("Gelu", 19) is None and lookup("Gelu", 20) is not None
    assert lookup("Mod", 9) is None
    assert lookup("GroupNormalization", 18).fn is not lookup("GroupNormalization", 21).fn


def test_batchnorm_inference_at_9_and_training_at_15() -> None:
    """BatchNormalization uses running stats at opset 9 and batch stats with training_mode=1."""
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    s, b, m = (RNG.standard_normal(3).astype(np.float32) for _ in range(3))
    v = RNG.uniform(0.5, 1.5, 3).astype(np.float32)
    assert_same(run("BatchNormalization", [x, s, b, m, v], opset=9)[0],
                oracle("BatchNormalization", [x, s, b, m, v], opset=9)[0], rtol=1e-4)
    y, rm, rv = run("BatchNormalization", [x, s, b, m, v], {"training_mode": 1}, opset=15)
    axes = (0, 2, 3)
    ref = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, ref * s[:, None, None] + b[:, None, None], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rm, 0.9 * m + 0.1 * x.mean(axes), rtol=1e-5)
    np.testing.assert_allclose(rv, 0.9 * v + 0.1 * x.var(axes), rtol=1e-5)


def test_group_normalization_scale_per_group_at_18() -> None:
    """GroupNormalization-18 scales per group; 21 per channel (equal when channels repeat)."""
    x = RNG.standard_normal((2, 4, 3)).astype(np.float32)
    gs, gb = np.array([2.0, -1.0], np.float32), np.array([0.5, 0.0], np.float32)
    old = run("GroupNormalization", [x, gs, gb], {"num_groups": 2}, opset=18)[0]
    new = run("GroupNormalization", [x, gs.repeat(2), gb.repeat(2)], {"num_groups": 2}, opset=21)[0]
    np.testing.assert_allclose(old, new, rtol=1e-6)


# ---- Dropout, Cast, erf ----

def test_dropout_inference_is_identity_and_training_is_seeded() -> None:
    """Inference Dropout returns x and a mask of ones; seeded training is reproducible."""
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    y, mask = run("Dropout", [x])
    assert y is x and mask.dtype == np.bool_ and mask.all()
    ratio, train = np.array(0.5, np.float32), np.array(True)
    y1, m1 = run("Dropout", [x, ratio, train], {"seed": 3})
    y2, _ = run("Dropout", [x, ratio, train], {"seed": 3})
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_allclose(y1, np.where(m1, x * 2, 0), rtol=1e-6)


def test_cast_float8_saturates_unless_told_not_to() -> None:
    """Cast to float8e4m3fn clamps overflow to the largest finite value; saturate=0 gives NaN."""
    x = np.array([1e6, -1e6, 0.5], np.float32)
    sat = run("Cast", [x], {"to": 17})[0].astype(np.float32)
    raw = run("Cast", [x], {"to": 17, "saturate": 0})[0].astype(np.float32)
    assert sat.tolist() == [448.0, -448.0, 0.5]
    assert np.isnan(raw[:2]).all()


def test_cast_matches_onnxruntime_for_common_types() -> None:
    """Cast float -> int/bool/float16 and int -> float agree with onnxruntime."""
    x = np.array([[-2.7, 0.0, 1.5, 3.9]], np.float32)
    for to in (onnx.TensorProto.INT32, onnx.TensorProto.BOOL, onnx.TensorProto.FLOAT16,
               onnx.TensorProto.UINT8):
        assert_same(run("Cast", [np.abs(x) if to == 2 else x], {"to": to})[0],
                    oracle("Cast", [np.abs(x) if to == 2 else x], {"to": to})[0])


def test_erf_matches_math_erf() -> None:
    """Erf is accurate to 1e-7 relative, including tiny arguments."""
    x = np.concatenate([np.linspace(-5, 5, 201), np.logspace(-10, -1, 10)])
    expected = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(run("Erf", [x])[0], expected, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("op_type,inputs", [
    ("Add", lambda: [RNG.standard_normal((2, 3)), RNG.standard_normal(3)]),
    ("ReduceSum", lambda: [RNG.standard_normal((2, 3)), np.array([1])]),
    ("CumSum", lambda: [RNG.standard_normal((2, 3)), np.array(1)]),
    ("LayerNormalization", lambda: [RNG.standard_normal((2, 3)), np.ones(3), np.zeros(3)]),
    ("Softmax", lambda: [RNG.standard_normal((2, 3))]),
])
def test_kernels_never_modify_their_inputs(op_type: str, inputs: Any) -> None:
    """A kernel leaves its input arrays untouched."""
    xs = inputs()
    copies = [x.copy() for x in xs]
    run(op_type, xs)
    for x, c in zip(xs, copies):
        np.testing.assert_array_equal(x, c)


def test_matmul_nd_by_2d_is_one_gemm_with_numpy_semantics():
    """(..., m, k) @ (k, n), contiguous or not, equals numpy's matmul."""
    from amanda.exec.kernels.registry import lookup

    rng = np.random.default_rng(3)
    b = rng.standard_normal((6, 5)).astype(np.float32)
    fn = lookup("MatMul", 13, [np.dtype(np.float32)] * 2).fn
    for a in (rng.standard_normal((2, 3, 4, 6)).astype(np.float32),
              rng.standard_normal((2, 6, 4)).astype(np.float32).transpose(0, 2, 1)):
        (y,) = fn({}, a, b)
        assert y.shape == (*a.shape[:-1], 5) and np.allclose(y, np.matmul(a, b), atol=1e-5)


@pytest.mark.parametrize("shape", [(32, 16, 8, 8), (3, 5, 7), (2, 6, 3, 3, 2), (4, 3)])
def test_training_batchnorm_in_either_layout(shape) -> None:
    """Training-mode BatchNormalization on inputs laid channels-first and channels-last (the
    latter reduces along rows of whole pixels): the batch-normalised output, laid like the
    input, and the running statistics, against float64 numpy."""
    x = (RNG.standard_normal(shape) * 3 + 1).astype(np.float32)
    c, axes = shape[1], (0, *range(2, len(shape)))
    scale, bias, mean = (RNG.standard_normal(c).astype(np.float32) for _ in range(3))
    var = RNG.uniform(0.5, 2, c).astype(np.float32)
    wide, per = x.astype(np.float64), (c, *[1] * (len(shape) - 2))
    want = (wide - wide.mean(axes, keepdims=True)) / np.sqrt(wide.var(axes, keepdims=True) + 1e-5)
    want = want * scale.reshape(per) + bias.reshape(per)
    order = (0, *range(2, len(shape)), 1)
    for laid in (x, np.ascontiguousarray(x.transpose(order)).transpose(np.argsort(order))):
        y, new_mean, new_var = run("BatchNormalization", [laid, scale, bias, mean, var],
                                   {"training_mode": 1, "momentum": 0.7}, opset=15)[:3]
        assert y.dtype == np.float32 and y.strides == laid.strides
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(new_mean, mean * 0.7 + wide.mean(axes) * 0.3, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(new_var, var * 0.7 + wide.var(axes) * 0.3, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(32, 16, 8, 8), (3, 5, 7), (2, 3, 4, 4, 3)])
def test_per_channel_sums_of_channels_last_inputs(shape) -> None:
    """ReduceSum and ReduceMean over every axis but the channels' of a channels-last input
    (summed along rows of whole pixels) agree with float64 numpy, with and without keepdims."""
    order = (0, *range(2, len(shape)), 1)
    x = np.ascontiguousarray(RNG.standard_normal(shape).astype(np.float32).transpose(order))
    x = x.transpose(np.argsort(order))
    axes = np.array([0, *range(2, len(shape))])
    wide = x.astype(np.float64)
    for keep in (0, 1):
        total = run("ReduceSum", [x, axes], {"keepdims": keep}, opset=13)[0]
        mean = run("ReduceMean", [x, axes], {"keepdims": keep}, opset=18)[0]
        assert total.dtype == mean.dtype == np.float32
        np.testing.assert_allclose(total, wide.sum(tuple(axes), keepdims=bool(keep)), rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(mean, wide.mean(tuple(axes), keepdims=bool(keep)), rtol=1e-5, atol=1e-6)
