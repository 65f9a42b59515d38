"""Tensor-kernel properties the ONNX backend cases do not reach.

Conv is checked against a naive numpy convolution written here; ConvTranspose
and the pools against onnxruntime; older opset versions against the versions
the registry selects.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import amanda.exec.kernels  # noqa: F401  (registers every kernel module)
from amanda.errors import ExecutionError
from amanda.exec.kernels import conv as conv_module
from amanda.exec.kernels.arity import needs_output_count
from amanda.exec.kernels.registry import lookup, run_kernel


def run(op: str, opset: int, attrs: dict, *inputs):
    """Run the kernel the registry picks for ``op`` at ``opset``."""
    dtypes = [getattr(x, "dtype", None) for x in inputs]
    version = lookup(op, opset, dtypes)
    assert version is not None, f"no kernel for {op} at opset {opset}"
    return run_kernel(version, attrs, inputs)


# ---------------------------------------------------------------- Conv


def naive_conv(x, w, b, strides, dilations, pads, group):
    """Direct convolution: one dot product per output pixel."""
    nd = x.ndim - 2
    n, c = x.shape[:2]
    m = w.shape[0]
    kernel = w.shape[2:]
    width = [(0, 0), (0, 0)] + [(pads[i], pads[nd + i]) for i in range(nd)]
    xp = np.pad(x.astype(np.float64), width)
    out = [
        (xp.shape[2 + i] - (kernel[i] - 1) * dilations[i] - 1) // strides[i] + 1 for i in range(nd)
    ]
    y = np.zeros((n, m, *out))
    cg, mg = c // group, m // group
    for pos in itertools.product(*(range(o) for o in out)):
        window = tuple(
            slice(
                pos[i] * strides[i],
                pos[i] * strides[i] + (kernel[i] - 1) * dilations[i] + 1,
                dilations[i],
            )
            for i in range(nd)
        )
        for g in range(group):
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg), *window)]  # (N, Cg, *K)
            wg = w[g * mg : (g + 1) * mg].astype(np.float64)  # (Mg, Cg, *K)
            y[(slice(None), slice(g * mg, (g + 1) * mg), *pos)] = np.tensordot(
                patch, wg, axes=(list(range(1, nd + 2)), list(range(1, nd + 2)))
            )
    if b is not None:
        y += b.reshape(m, *([1] * nd))
    return y


def random_conv_case(rng, nd):
    group = int(rng.choice([1, 1, 2, 3]))
    cg = int(rng.integers(1, 5)) if rng.random() < 0.7 else int(rng.integers(8, 20))
    mg = int(rng.integers(1, 4))
    kernel = [int(rng.integers(1, 4)) for _ in range(nd)]
    strides = [int(rng.integers(1, 3)) for _ in range(nd)]
    dilations = [int(rng.integers(1, 3)) for _ in range(nd)]
    pads = [int(rng.integers(0, 3)) for _ in range(2 * nd)]
    size = [int(rng.integers((k - 1) * d + 1, (k - 1) * d + 7)) for k, d in zip(kernel, dilations)]
    x = rng.standard_normal((int(rng.integers(1, 3)), cg * group, *size)).astype(np.float32)
    w = rng.standard_normal((mg * group, cg, *kernel)).astype(np.float32)
    b = rng.standard_normal(mg * group).astype(np.float32) if rng.random() < 0.5 else None
    return x, w, b, strides, dilations, pads, group


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_matches_naive_convolution(nd):
    """Conv equals a direct per-pixel convolution for random strides, dilations, pads and groups."""
    rng = np.random.default_rng(nd)
    for _ in range(12 if nd < 3 else 6):
        x, w, b, strides, dilations, pads, group = random_conv_case(rng, nd)
        attrs = {"strides": strides, "dilations": dilations, "pads": pads, "group": group}
        (got,) = run("Conv", 17, attrs, x, w, b)
        want = naive_conv(x, w, b, strides, dilations, pads, group)
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout_rows", [0, 1 << 30])
@pytest.mark.parametrize("group", [1, 2])
def test_conv_layouts_agree(monkeypatch, layout_rows, group):
    """The batched, GEMM, flat unit-stride and channels-last layouts compute the same
    convolution (one group takes channels-last, several the GEMM and flat layouts)."""
    monkeypatch.setattr(conv_module, "GEMM_ROWS", layout_rows)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 6, 9, 7)).astype(np.float32)
    w = rng.standard_normal((4, 6 // group, 3, 2)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    for strides, dilations in [([1, 1], [1, 1]), ([2, 1], [1, 2]), ([1, 1], [2, 1])]:
        attrs = {"strides": strides, "dilations": dilations, "pads": [1, 0, 2, 1], "group": group}
        (got,) = run("Conv", 11, attrs, x, w, b)
        want = naive_conv(x, w, b, strides, dilations, [1, 0, 2, 1], group)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_channels_last_conv_matches_naive(nd):
    """One group with many input channels (the channels-last layout) in 1, 2 and 3-D,
    with strides, dilations and uneven pads."""
    rng = np.random.default_rng(20 + nd)
    x = rng.standard_normal((2, 24, *[7] * nd)).astype(np.float32)
    w = rng.standard_normal((5, 24, *[3] * nd)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    assert 24 * 3**nd > conv_module.GEMM_ROWS
    strides, dilations = [1 + i % 2 for i in range(nd)], [2 - i % 2 for i in range(nd)]
    pads = [i % 2 for i in range(nd)] + [1] * nd
    attrs = {"strides": strides, "dilations": dilations, "pads": pads}
    (got,) = run("Conv", 11, attrs, x, w, b)
    np.testing.assert_allclose(got, naive_conv(x, w, b, strides, dilations, pads, 1), rtol=1e-4, atol=1e-4)


def test_pointwise_conv_matches_naive():
    """A 1x1 unit-stride conv (no im2col) equals the direct convolution, with groups."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 8, 5, 4)).astype(np.float32)
    w = rng.standard_normal((6, 4, 1, 1)).astype(np.float32)
    (y,) = run("Conv", 11, {"group": 2}, x, w)
    np.testing.assert_allclose(
        y, naive_conv(x, w, None, [1, 1], [1, 1], [0] * 4, 2), rtol=1e-4, atol=1e-4
    )


def test_results_never_alias_scratch_buffers():
    """Outputs of Conv and the pools survive later calls that reuse the per-thread scratch."""
    rng = np.random.default_rng(12)
    w = rng.standard_normal((4, 80, 3, 3)).astype(np.float32)
    xs = [rng.standard_normal((2, 80, 6, 6)).astype(np.float32) for _ in range(2)]
    pool = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "num_outputs": 1}
    first = [
        run("Conv", 11, {"pads": [1, 1, 1, 1]}, xs[0], w)[0],
        run("MaxPool", 12, pool, xs[0])[0],
    ]
    kept = [a.copy() for a in first]
    run("Conv", 11, {"pads": [1, 1, 1, 1]}, xs[1], w)
    run("MaxPool", 12, pool, xs[1])
    for a, b in zip(first, kept):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "auto_pad, pads",
    [("SAME_UPPER", [1, 0, 1, 1]), ("SAME_LOWER", [1, 1, 1, 0]), ("VALID", [0, 0, 0, 0])],
)
def test_conv_auto_pad_equals_explicit_pads(auto_pad, pads):
    """SAME pads give ceil(size / stride) outputs, the odd pad at the end (UPPER) or start."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 1, 7, 8)).astype(np.float32)
    w = rng.standard_normal((1, 1, 3, 3)).astype(np.float32)
    (y,) = run("Conv", 11, {"auto_pad": auto_pad, "strides": [2, 2]}, x, w)
    (z,) = run("Conv", 11, {"pads": pads, "strides": [2, 2]}, x, w)
    assert y.shape == ((1, 1, 3, 3) if auto_pad == "VALID" else (1, 1, 4, 4))
    np.testing.assert_array_equal(y, z)


def test_conv_float16_and_float64_keep_their_dtype():
    """Conv returns the input dtype (float16 computed in float32 for speed)."""
    rng = np.random.default_rng(0)
    for dtype in (np.float16, np.float64):
        x = rng.standard_normal((1, 2, 5, 5)).astype(dtype)
        w = rng.standard_normal((3, 2, 3, 3)).astype(dtype)
        (y,) = run("Conv", 11, {}, x, w)
        assert y.dtype == dtype
        np.testing.assert_allclose(
            y, naive_conv(x, w, None, [1, 1], [1, 1], [0] * 4, 1), rtol=1e-2, atol=1e-2
        )


# ---------------------------------------------------------------- onnxruntime oracle


def ort_run(op, attrs, inputs, n_outputs=1, opset=17):
    """Run one node in onnxruntime."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper  # noqa: F401

    names = [f"i{k}" if x is not None else "" for k, x in enumerate(inputs)]
    outs = [f"o{k}" for k in range(n_outputs)]
    node = helper.make_node(op, names, outs, **attrs)
    fed = [(nm, x) for nm, x in zip(names, inputs) if x is not None]
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(nm, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
            for nm, x in fed
        ],
        [helper.make_empty_tensor_value_info(o) for o in outs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, dict(fed))


def test_conv_transpose_matches_onnxruntime():
    """ConvTranspose agrees with onnxruntime on random strides, dilations, pads, groups."""
    rng = np.random.default_rng(3)
    for _ in range(12):
        nd = int(rng.integers(1, 3))
        group = int(rng.choice([1, 2]))
        cg, mg = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        kernel = [int(rng.integers(1, 4)) for _ in range(nd)]
        strides = [int(rng.integers(1, 4)) for _ in range(nd)]
        dilations = [int(rng.integers(1, 3)) for _ in range(nd)]
        pads = [int(rng.integers(0, (k + 1) // 2)) for k in kernel] * 2
        output_padding = [int(rng.integers(0, s)) for s in strides]
        x = rng.standard_normal((2, cg * group, *rng.integers(2, 6, nd))).astype(np.float32)
        w = rng.standard_normal((cg * group, mg, *kernel)).astype(np.float32)
        b = rng.standard_normal(mg * group).astype(np.float32)
        attrs = {
            "strides": strides,
            "dilations": dilations,
            "pads": pads,
            "group": group,
            "output_padding": output_padding,
        }
        (got,) = run("ConvTranspose", 17, attrs, x, w, b)
        (want,) = ort_run("ConvTranspose", attrs, [x, w, b])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("seed", range(4))
def test_pools_match_onnxruntime(seed):
    """MaxPool (values and indices) and AveragePool agree with onnxruntime."""
    rng = np.random.default_rng(seed)
    nd = 2 if seed < 3 else 3
    kernel = [int(rng.integers(1, 4)) for _ in range(nd)]
    strides = [int(rng.integers(1, 3)) for _ in range(nd)]
    pads = [int(rng.integers(0, k)) for k in kernel] * 2
    x = rng.standard_normal((2, 3, *rng.integers(5, 9, nd))).astype(np.float32)
    for ceil_mode in (0, 1):
        attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads, "ceil_mode": ceil_mode}
        got = run("MaxPool", 12, {**attrs, "storage_order": 0}, x)
        want = ort_run("MaxPool", attrs, [x], n_outputs=2, opset=12)
        np.testing.assert_allclose(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        for include in (0, 1):
            (avg,) = run("AveragePool", 19, {**attrs, "count_include_pad": include}, x)
            (ref,) = ort_run("AveragePool", {**attrs, "count_include_pad": include}, [x], opset=19)
            np.testing.assert_allclose(avg, ref, rtol=1e-5, atol=1e-6)



@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (3, 4, 7, 9), (2, 2, 6), (1, 2, 4, 6, 5)])
def test_tiling_max_pool_matches_onnxruntime(shape):
    """Windows that tile the input (strides = kernel, the fast path), with ties, on inputs laid
    channels-first and channels-last and sizes the windows do not divide: onnxruntime's values
    and indices, both storage orders' indices consistent with the values."""
    rng = np.random.default_rng(len(shape))
    nd = len(shape) - 2
    kernel = [2, 3, 2][:nd] if nd != 2 else [2, 3]
    x = rng.integers(-3, 3, shape).astype(np.float32)  # many ties within a window
    attrs = {"kernel_shape": kernel, "strides": kernel}
    want = ort_run("MaxPool", attrs, [x], n_outputs=2, opset=12)
    last = np.moveaxis(np.ascontiguousarray(np.moveaxis(x, 1, -1)), -1, 1)
    for laid in (x, last):
        y, indices = run("MaxPool", 12, {**attrs, "storage_order": 0}, laid)
        np.testing.assert_array_equal(y, want[0])
        np.testing.assert_array_equal(indices, want[1])
        _, columns = run("MaxPool", 12, {**attrs, "storage_order": 1}, laid)
        base = np.arange(shape[0] * shape[1]).reshape(*shape[:2], *[1] * nd) * int(np.prod(shape[2:]))
        coords = np.unravel_index(columns - base, shape[2:], order="F")  # column-major positions
        n, c = np.indices(columns.shape)[:2]
        np.testing.assert_array_equal(x[(n, c, *coords)], want[0])

def test_global_lp_pool():
    """GlobalLpPool is the p-norm over the spatial axes."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 10
    (y,) = run("GlobalLpPool", 2, {"p": 3}, x)
    np.testing.assert_allclose(y, (np.abs(x) ** 3).sum(axis=2, keepdims=True) ** (1 / 3), rtol=1e-6)


def test_max_pool_skips_indices_for_one_output():
    """With the runner's output count at 1, MaxPool does not compute Indices."""
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    y, indices = run(
        "MaxPool", 12, {"kernel_shape": [2, 2], "strides": [2, 2], "num_outputs": 1}, x
    )
    assert indices is None and y.tolist() == [[[[5, 7], [13, 15]]]]


def test_max_pool_column_major_indices():
    """storage_order=1 numbers the spatial positions column-major."""
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    _, indices = run(
        "MaxPool", 12, {"kernel_shape": [2, 2], "strides": [2, 2], "storage_order": 1}, x
    )
    assert indices.tolist() == [[[[5, 13], [7, 15]]]]


# ---------------------------------------------------------------- opset versions


def test_squeeze_axes_attribute_then_input():
    """Squeeze reads axes from the attribute before opset 13 and from the input from 13."""
    x = np.zeros((1, 3, 1), np.float32)
    assert run("Squeeze", 11, {"axes": [0]}, x)[0].shape == (3, 1)
    assert run("Squeeze", 13, {}, x, np.array([-1]))[0].shape == (1, 3)
    assert run("Squeeze", 13, {}, x)[0].shape == (3,)
    assert lookup("Squeeze", 12).since == 1 and lookup("Squeeze", 21).since == 13


def test_unsqueeze_versions():
    """Unsqueeze takes attribute axes before 13, input axes from 13."""
    x = np.zeros((3, 4), np.float32)
    assert run("Unsqueeze", 11, {"axes": [0, -1]}, x)[0].shape == (1, 3, 4, 1)
    assert run("Unsqueeze", 13, {}, x, np.array([1]))[0].shape == (3, 1, 4)


def test_split_versions():
    """Split sizes come from the attribute (< 13), the input (>= 13) or the output count."""
    x = np.arange(10)
    assert [p.tolist() for p in run("Split", 11, {"split": [3, 7]}, x)] == [
        [0, 1, 2],
        list(range(3, 10)),
    ]
    assert [len(p) for p in run("Split", 13, {}, x, np.array([4, 6]))] == [4, 6]
    assert [len(p) for p in run("Split", 13, {"num_outputs": 2}, x)] == [5, 5]
    assert [len(p) for p in run("Split", 18, {"num_outputs": 4}, x)] == [3, 3, 3, 1]
    assert needs_output_count(lookup("Split", 13).fn)
    with pytest.raises(ExecutionError):
        run("Split", 13, {}, x)


def test_slice_versions():
    """Slice-1 reads attributes; Slice-10 reads inputs, including negative steps."""
    x = np.arange(20).reshape(4, 5)
    (a,) = run("Slice", 9, {"starts": [1], "ends": [1000], "axes": [1]}, x)
    assert a.tolist() == x[:, 1:].tolist()
    (b,) = run("Slice", 13, {}, x, np.array([-1]), np.array([-1000]), np.array([0]), np.array([-2]))
    assert b.tolist() == x[::-2].tolist()


def test_pad_versions():
    """Pad-2 reads pads from attributes; Pad-11 from inputs; Pad-18 adds axes; negatives crop."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (a,) = run("Pad", 2, {"pads": [0, 1, 0, 1], "value": 9.0}, x)
    assert a.tolist() == np.pad(x, [(0, 0), (1, 1)], constant_values=9).tolist()
    (b,) = run("Pad", 11, {"mode": "reflect"}, x, np.array([0, 2, 0, 0]))
    assert b.tolist() == np.pad(x, [(0, 0), (2, 0)], mode="reflect").tolist()
    (c,) = run("Pad", 18, {"mode": "edge"}, x, np.array([1, -1]), None, np.array([1]))
    assert c.tolist() == [[0, 0, 1], [3, 3, 4]]


def test_topk_versions():
    """TopK-1 reads k from an attribute, TopK-10 from an input; ties keep the lower index."""
    x = np.array([[3, 1, 3, 2]], dtype=np.float32)
    values, indices = run("TopK", 1, {"k": 2}, x)
    assert values.tolist() == [[3, 3]] and indices.tolist() == [[0, 2]]
    values, indices = run("TopK", 11, {"largest": 0}, x, np.array([3]))
    assert values.tolist() == [[1, 2, 3]] and indices.tolist() == [[1, 3, 0]]


def test_reshape_and_tile_versions():
    """Reshape-1 and Tile-1 take their legacy attribute/input forms."""
    x = np.arange(6)
    assert run("Reshape", 4, {"shape": [2, -1]}, x)[0].shape == (2, 3)
    assert run("Reshape", 14, {"allowzero": 1}, np.zeros((0, 3)), np.array([3, 0]))[0].shape == (
        3,
        0,
    )
    assert run("Tile", 1, {}, x.reshape(2, 3), np.array([2]), np.array([1]))[0].shape == (2, 6)
    assert run("Tile", 6, {}, x.reshape(2, 3), np.array([2, 1]))[0].shape == (4, 3)


def test_upsample_and_resize_10_use_asymmetric_nearest():
    """Upsample-7/9 and Resize-10 repeat pixels for integer scales."""
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    want = x.repeat(2, axis=2).repeat(3, axis=3)
    scales = np.array([1, 1, 2, 3], np.float32)
    assert np.array_equal(run("Upsample", 8, {"scales": [1, 1, 2, 3]}, x)[0], want)
    assert np.array_equal(run("Upsample", 9, {}, x, scales)[0], want)
    assert np.array_equal(run("Resize", 10, {}, x, scales)[0], want)


def test_resize_linear_matches_onnxruntime():
    """Resize linear/cubic agree with onnxruntime for several coordinate modes.

    The scales give whole output lengths: for fractional ones onnxruntime's
    align_corners divides by the rounded length, the ONNX reference by the real one.
    """
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 5, 8)).astype(np.float32)
    scales = np.array([1, 1, 1.6, 0.5], np.float32)
    for mode in ("linear", "cubic"):
        for ctm in ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"):
            attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
            (got,) = run("Resize", 13, attrs, x, None, scales)
            (want,) = ort_run("Resize", attrs, [x, np.zeros(0, np.float32), scales], opset=13)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- errors and purity


def test_out_of_range_index_raises():
    """Gather with an index beyond the axis raises ExecutionError instead of wrapping."""
    with pytest.raises(ExecutionError):
        run("Gather", 13, {}, np.arange(3), np.array([3]))


@pytest.mark.parametrize("indices", [[-4], [3], [0, -4], [-1, 3]])
def test_indices_past_either_end_raise(indices: list) -> None:
    """Below -n or at n and above raise, alone or beside indices in range."""
    with pytest.raises(ExecutionError):
        run("Gather", 13, {}, np.arange(3), np.array(indices))


def test_negative_indices_wrap_once() -> None:
    """-n .. -1 read from the end, mixed with non-negative ones, as numpy's indexing does."""
    x = np.arange(10, 13)
    for indices in ([-3, -1, 0, 2], [[-1, 1], [0, -2]], 2, -3):
        (got,) = run("Gather", 13, {}, x, np.array(indices))
        np.testing.assert_array_equal(got, x[np.array(indices)])


def test_scatter_kernels_do_not_modify_inputs():
    """Scatter-type kernels return new arrays and leave their inputs unchanged."""
    data = np.zeros((3, 3), np.float32)
    updates = np.ones((1, 3), np.float32)
    idx = np.array([[1, 0, 2]])
    run("ScatterElements", 18, {"reduction": "add"}, data, idx, updates)
    run("ScatterND", 18, {}, data, np.array([[1]]), updates)
    assert not data.any()


def test_scatter_elements_reductions_accumulate_duplicates():
    """Repeated indices accumulate under add and mul."""
    data = np.ones(3, np.float32)
    idx = np.array([1, 1])
    upd = np.array([2, 3], np.float32)
    assert run("ScatterElements", 16, {"reduction": "add"}, data, idx, upd)[0].tolist() == [1, 6, 1]
    assert run("ScatterElements", 16, {"reduction": "mul"}, data, idx, upd)[0].tolist() == [1, 6, 1]
