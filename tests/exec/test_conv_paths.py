"""Every layout of the Conv kernel (depthwise merged and per-channel, pointwise, batched, one GEMM,
channels-last, flat) against onnxruntime, over groups, strides, dilations, pads and 1-D/2-D/3-D."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from tests.exec.onnx_oracle import both  # noqa: E402

RNG = np.random.default_rng(11)


def _check(x_shape: tuple, w_shape: tuple, group: int, strides: list[int], dilations: list[int],
           pads: list[int], bias: bool = True) -> None:
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    feeds = {"x": x, "w": w}
    if bias:
        feeds["b"] = RNG.standard_normal(w_shape[0]).astype(np.float32)
    node = helper.make_node("Conv", list(feeds), ["y"], group=group, strides=strides,
                            dilations=dilations, pads=pads)
    theirs, ours = both(node, feeds, 17)
    assert ours[0].dtype == np.float32
    assert ours[0].shape == theirs[0].shape
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("x_shape", "mult", "k", "strides", "dilations", "pads"), [
    ((2, 32, 12, 11), 1, 3, [1, 1], [1, 1], [1, 1, 1, 1]),  # merged, unit stride
    ((2, 16, 13, 14), 1, 3, [2, 2], [1, 1], [1, 0, 1, 0]),  # merged, stride along the last axis
    ((1, 8, 15, 16), 2, 5, [1, 3], [1, 2], [2, 1, 2, 3]),  # merged, multiplier, mixed stride/dilation
    ((2, 300, 6, 7), 1, 3, [1, 1], [1, 1], [1, 1, 1, 1]),  # per-channel loop (many channels)
    ((1, 96, 9, 9), 1, 5, [2, 2], [1, 1], [2, 2, 2, 2]),  # per-channel loop (stride 2)
])
def test_depthwise_conv_2d_matches_onnxruntime(x_shape: tuple, mult: int, k: int, strides: list[int],
                                               dilations: list[int], pads: list[int]) -> None:
    """Depthwise Conv in both of its einsum layouts agrees with onnxruntime."""
    c = x_shape[1]
    _check(x_shape, (c * mult, 1, k, k), c, strides, dilations, pads)


@pytest.mark.parametrize(("x_shape", "w_shape", "strides", "dilations", "pads"), [
    ((2, 6, 17), (6, 1, 3), [2], [1], [1, 0]),
    ((1, 4, 5, 6, 7), (8, 1, 3, 2, 3), [1, 2, 1], [1, 1, 2], [1, 0, 1, 1, 0, 2]),
])
def test_depthwise_conv_1d_and_3d_matches_onnxruntime(x_shape: tuple, w_shape: tuple, strides: list[int],
                                                      dilations: list[int], pads: list[int]) -> None:
    """Depthwise Conv over one and three spatial axes agrees with onnxruntime."""
    _check(x_shape, w_shape, x_shape[1], strides, dilations, pads, bias=False)


@pytest.mark.parametrize(("x_shape", "w_shape", "group", "strides", "dilations", "pads", "bias"), [
    ((5, 1, 12, 13), (6, 1, 3, 3), 1, [1, 1], [1, 1], [1, 1, 1, 1], True),  # batched, bias row
    ((2, 4, 11, 10), (6, 2, 3, 2), 2, [2, 1], [1, 2], [1, 0, 2, 1], True),  # batched, groups
    ((2, 4, 11, 10), (6, 2, 3, 2), 2, [2, 1], [1, 2], [1, 0, 2, 1], False),
    ((2, 8, 24, 24), (32, 8, 1, 1), 1, [1, 1], [1, 1], [0, 0, 0, 0], True),  # expanding pointwise, bias row
    ((2, 8, 24, 24), (32, 4, 1, 1), 2, [1, 1], [1, 1], [0, 0, 0, 0], True),  # grouped pointwise, bias row
    ((2, 32, 6, 6), (8, 32, 1, 1), 1, [1, 1], [1, 1], [0, 0, 0, 0], True),  # narrowing pointwise
    ((2, 16, 9, 8), (12, 16, 3, 3), 1, [2, 1], [1, 1], [1, 1, 0, 1], True),  # channels-last GEMM
    ((1, 40, 10, 10), (8, 20, 3, 3), 2, [1, 1], [2, 2], [2, 2, 2, 2], True),  # grouped GEMM, flat
    ((1, 40, 10, 10), (8, 20, 3, 3), 2, [2, 2], [1, 1], [1, 1, 1, 1], True),  # grouped GEMM
    ((9, 16, 6, 5), (8, 16, 3, 3), 1, [1, 1], [1, 1], [1, 1, 1, 1], True),  # many images: bias in place
    ((9, 40, 6, 6), (8, 20, 3, 3), 2, [1, 1], [1, 1], [1, 1, 1, 1], True),
])
def test_conv_2d_layouts_match_onnxruntime(x_shape: tuple, w_shape: tuple, group: int, strides: list[int],
                                           dilations: list[int], pads: list[int], bias: bool) -> None:
    """Each non-depthwise Conv layout, with and without bias, agrees with onnxruntime."""
    _check(x_shape, w_shape, group, strides, dilations, pads, bias)


@pytest.mark.parametrize(("x_shape", "w_shape", "group", "strides", "pads"), [
    ((3, 2, 30), (4, 2, 3), 1, [2], [1, 1]),
    ((2, 4, 600), (8, 2, 1), 2, [1], [0, 0]),
    ((1, 2, 6, 7, 5), (4, 2, 3, 3, 2), 1, [1, 2, 1], [1, 1, 0, 1, 1, 1]),
    ((2, 4, 5, 6, 4), (6, 2, 2, 2, 2), 2, [1, 1, 2], [0, 1, 0, 1, 0, 0]),
])
def test_conv_1d_and_3d_match_onnxruntime(x_shape: tuple, w_shape: tuple, group: int, strides: list[int],
                                          pads: list[int]) -> None:
    """Conv over one and three spatial axes, grouped or not, with bias, agrees with onnxruntime."""
    _check(x_shape, w_shape, group, strides, [1] * len(strides), pads)


@pytest.mark.parametrize(("x_shape", "w_shape", "dilations", "pads"), [
    ((1, 32, 40, 40), (16, 32, 3, 3), [1, 1], [1, 1, 1, 1]),
    ((3, 16, 33, 40), (8, 16, 3, 2), [2, 1], [2, 0, 1, 3]),  # several images, dilation, uneven pads
    ((2, 16, 1100), (4, 16, 5), [2], [3, 1]),  # 1-D
    ((1, 8, 12, 10, 11), (3, 8, 3, 2, 3), [1, 2, 1], [1, 0, 1, 1, 2, 0]),  # 3-D
])
def test_narrowing_unit_stride_conv_matches_onnxruntime(x_shape: tuple, w_shape: tuple, dilations: list[int],
                                                        pads: list[int]) -> None:
    """The column-free shifted-rows layout (unit strides, M <= C/2, many positions) agrees with onnxruntime."""
    _check(x_shape, w_shape, 1, [1] * len(dilations), dilations, pads)


@pytest.mark.parametrize(("w_shape", "group", "bias"), [
    ((16, 32, 3, 3), 1, True),  # shifted
    ((32, 1, 3, 3), 32, True),  # depthwise
    ((8, 32, 1, 1), 1, False),  # pointwise
    ((64, 32, 1, 1), 1, True),  # expanding pointwise
    ((64, 32, 3, 3), 1, False),  # channels-last
])
def test_conv_of_an_empty_batch_is_empty(w_shape: tuple, group: int, bias: bool) -> None:
    """Every layout maps a batch of zero images to an empty output of the right shape."""
    from amanda.exec.kernels.conv import conv_nd

    x = np.ones((0, 32, 40, 40), np.float32)
    b = np.ones(w_shape[0], np.float32) if bias else None
    pads = [0] * 4 if w_shape[2] == 1 else [1] * 4
    y = conv_nd(x, np.ones(w_shape, np.float32), b, [1, 1], [1, 1], pads, group)
    assert y.shape == (0, w_shape[0], 40, 40) and y.dtype == np.float32


def test_int_list_attributes_read_alike_from_tuples_lists_and_arrays() -> None:
    """``ints`` gives the same plain int list for a tuple, a list, a numpy array and numpy ints."""
    from amanda.exec.kernels.spatial import ints

    expected = [1, 2, 3]
    for value in ((1, 2, 3), [1, 2, 3], np.array([1, 2, 3]), [np.int64(1), np.int64(2), np.int64(3)]):
        got = ints(value, 3, 0)
        assert got == expected and all(type(v) is int for v in got)
    assert ints(None, 2, 7) == [7, 7]
    assert ints([[1, 2], [3, 4]], 4, 0) == [1, 2, 3, 4]


def _spy_on_shifted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets one item per call of the shifted-rows layout."""
    from amanda.exec.kernels import conv as conv_module

    calls: list[int] = []
    real = conv_module.shifted
    monkeypatch.setattr(conv_module, "shifted", lambda *a: calls.append(1) or real(*a))
    return calls


@pytest.mark.parametrize(("x_shape", "w_shape", "dilations", "pads"), [
    ((1, 16, 30, 30), (24, 16, 3, 3), [1, 1], [1, 1, 1, 1]),  # widening, batch 1
    ((2, 32, 28, 28), (32, 32, 3, 3), [1, 1], [1, 1, 1, 1]),  # ResNet's 28x28 block
    ((2, 16, 45, 47), (6, 16, 3, 3), [2, 1], [2, 1, 2, 1]),  # dilation, odd sizes
    ((17, 16, 24, 24), (5, 16, 3, 3), [1, 1], [1, 0, 1, 2]),  # many images, uneven pads
    ((2, 16, 300), (8, 16, 5), [1], [2, 2]),  # 1-D
    ((1, 16, 40, 40), (1, 16, 3, 3), [1, 1], [1, 1, 1, 1]),  # one output channel
])
def test_shifted_rows_conv_matches_onnxruntime(monkeypatch: pytest.MonkeyPatch, x_shape: tuple, w_shape: tuple,
                                               dilations: list[int], pads: list[int]) -> None:
    """The shifted-rows layout, chosen for its small pad share (accumulating GEMMs), agrees with onnxruntime."""
    calls = _spy_on_shifted(monkeypatch)
    _check(x_shape, w_shape, 1, [1] * len(dilations), dilations, pads)
    _check(x_shape, w_shape, 1, [1] * len(dilations), dilations, pads, bias=False)
    assert len(calls) == 2  # the layout this test means


def test_conv_without_cblas_gemm_falls_back_to_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no cblas GEMM found, numpy adds the shifted products, and the layouts still agree with onnxruntime."""
    from amanda.exec.kernels import cblas

    monkeypatch.setattr(cblas, "_FOUND", dict.fromkeys(["sgemm", "dgemm"]))
    calls = _spy_on_shifted(monkeypatch)
    _check((2, 16, 30, 30), (24, 16, 3, 3), 1, [1, 1], [1, 1], [1, 1, 1, 1])
    _check((1, 32, 40, 40), (16, 32, 3, 3), 1, [1, 1], [1, 1], [1, 1, 1, 1])
    assert len(calls) == 2
    _check((2, 16, 9, 8), (40, 16, 3, 3), 1, [2, 1], [1, 1], [1, 1, 0, 1])  # channels-last
    _check((2, 48, 12, 11), (48, 1, 3, 3), 48, [1, 1], [1, 1], [1, 1, 1, 1])  # depthwise


def test_shifted_rows_in_float64_matches_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A float64 conv through the shifted-rows layout (dgemm) equals a sum of shifted products in numpy."""
    from amanda.exec.kernels.conv import conv_nd

    calls = _spy_on_shifted(monkeypatch)
    x = RNG.standard_normal((2, 16, 24, 24))
    w = RNG.standard_normal((4, 16, 3, 3))
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    expected = sum(np.einsum("nchw,mc->nmhw", padded[:, :, i:i + 24, j:j + 24], w[:, :, i, j])
                   for i in range(3) for j in range(3))
    y = conv_nd(x, w, None, [1, 1], [1, 1], [1, 1, 1, 1], 1)
    assert y.dtype == np.float64 and calls == [1]
    np.testing.assert_allclose(y, expected, rtol=1e-12, atol=1e-12)


def test_numpy_openblas_offers_an_accumulating_gemm() -> None:
    """When numpy's BLAS is OpenBLAS, its cblas GEMM is found (the fast path is live)."""
    from amanda.exec.blas import _blas_libraries
    from amanda.exec.kernels.cblas import cblas_gemm

    if not any(getattr(lib, "internal_api", "") == "openblas" for lib in _blas_libraries()):
        pytest.skip("numpy's BLAS is not OpenBLAS")
    assert cblas_gemm(np.dtype(np.float32)) is not None and cblas_gemm(np.dtype(np.float64)) is not None



@pytest.mark.parametrize(("x_shape", "w_shape", "strides", "pads"), [
    ((2, 3, 40, 39), (8, 3, 7, 7), [2, 2], [3, 3, 3, 3]),  # a ResNet-style stem
    ((1, 2, 20, 20), (4, 2, 7, 7), [1, 1], [3, 2, 1, 0]),  # unit stride, uneven pads: not shifted rows
    ((3, 12, 24, 27), (5, 12, 3, 3), [1, 1], [1, 1, 1, 1]),  # just under the channel bound
])
@pytest.mark.parametrize("bias", [True, False])
def test_few_input_channels_take_the_channels_last_gemm(monkeypatch: pytest.MonkeyPatch, x_shape: tuple,
                                                         w_shape: tuple, strides: list[int], pads: list[int],
                                                         bias: bool) -> None:
    """A conv with fewer than 16 input channels but many column rows (C*K > 64) uses the
    channels-last GEMM, never shifted rows (whose per-offset products would be too thin), and
    agrees with onnxruntime."""
    from amanda.exec.kernels import conv as conv_module

    assert w_shape[1] * np.prod(w_shape[2:]) > conv_module.GEMM_ROWS
    assert w_shape[1] < conv_module.WIDE_CHANNELS
    calls: list[int] = []
    real = conv_module.gemm_channels_last
    monkeypatch.setattr(conv_module, "gemm_channels_last", lambda *a: calls.append(1) or real(*a))
    _check(x_shape, w_shape, 1, strides, [1, 1], pads, bias)
    assert calls == [1]


@pytest.mark.parametrize(("x_shape", "w_shape", "whole", "block"), [
    ((32, 16, 8, 8), (16, 16, 3, 3), None, None),  # the digits CNN's conv2: 1.2 MB of columns, blocked
    ((7, 16, 6, 5), (8, 16, 3, 3), 0, 3 * 30 * 144 * 4),  # blocks of 3 images and a last one of 1
    ((5, 20, 4, 4), (6, 20, 3, 3), 0, 1),  # a block smaller than one image: one image at a time
])
@pytest.mark.parametrize("bias", [True, False])
def test_channels_last_gemm_in_blocks_of_images_matches_onnxruntime(
        monkeypatch: pytest.MonkeyPatch, x_shape: tuple, w_shape: tuple, whole: int | None, block: int | None,
        bias: bool) -> None:
    """Columns over COLS_WHOLE bytes are copied and multiplied COLS_BLOCK bytes (whole images) at a
    time, one product per block, and the result agrees with onnxruntime."""
    from amanda.exec.kernels import conv_last

    if whole is not None:
        monkeypatch.setattr(conv_last, "COLS_WHOLE", whole)
        monkeypatch.setattr(conv_last, "COLS_BLOCK", block)
    image = int(np.prod(x_shape[2:])) * int(np.prod(w_shape[1:])) * 4  # unit strides, same pads
    per = max(1, conv_last.COLS_BLOCK // image)
    assert x_shape[0] * image > conv_last.COLS_WHOLE
    calls: list[int] = []
    real = conv_last.rows_times
    monkeypatch.setattr(conv_last, "rows_times", lambda *a, **k: calls.append(1) or real(*a, **k))
    _check(x_shape, w_shape, 1, [1, 1], [1, 1], [1, 1, 1, 1], bias)
    assert len(calls) == -(-x_shape[0] // per) > 1


def test_few_input_channels_and_few_positions_stay_channels_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """ViT's patch embedding (3 channels, 16x16 patches, 7x7 positions) keeps the channels-last layout
    and agrees with onnxruntime."""
    from amanda.exec.kernels import conv as conv_module

    calls: list[int] = []
    real = conv_module.gemm_channels_last
    monkeypatch.setattr(conv_module, "gemm_channels_last", lambda *a: calls.append(1) or real(*a))
    _check((2, 3, 112, 112), (24, 3, 16, 16), 1, [16, 16], [1, 1], [0, 0, 0, 0])
    assert calls == [1]


def test_shifted_rows_on_two_worker_threads_match_onnxruntime(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two independent branches of shifted-rows convs run side by side on the threaded scheduler (the
    cblas GEMM called from two threads at once) agree with onnxruntime, run after run."""
    import amanda
    from amanda.io.onnx.importer import from_onnx
    from tests.exec.onnx_oracle import onnxruntime_outputs

    inits = [onnx.numpy_helper.from_array(RNG.standard_normal((32, 32, 3, 3)).astype(np.float32), f"w{i}")
             for i in range(4)]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "w1"], ["y0"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["b", "w3"], ["y1"], pads=[1, 1, 1, 1])]
    value = onnx.helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "branches", [value("x", onnx.TensorProto.FLOAT, (2, 32, 40, 40))],
                              [value("y0", onnx.TensorProto.FLOAT, None), value("y1", onnx.TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    feeds = {"x": RNG.standard_normal((2, 32, 40, 40)).astype(np.float32)}
    expected = onnxruntime_outputs(model, feeds)
    calls = _spy_on_shifted(monkeypatch)
    with amanda.Session(from_onnx(model), threads=2) as session:
        for _ in range(5):
            for ours, theirs in zip(session.run(["y0", "y1"], feeds), expected):
                np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-3)
    assert len(calls) == 20


def test_accumulate_refuses_operands_blas_would_misread() -> None:
    """The raw BLAS call checks shapes, dtypes and writability first (always, not as an assert), so a mismatch is
    an ExecutionError instead of memory read or written out of bounds."""
    from amanda.errors import ExecutionError
    from amanda.exec.kernels.cblas import accumulate, cblas_gemm

    gemm = cblas_gemm(np.dtype(np.float32))
    if gemm is None:
        pytest.skip("numpy's BLAS offers no cblas_sgemm here")
    a, b = np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)
    frozen = np.zeros((3, 2), np.float32)
    frozen.flags.writeable = False
    for bad in [(a, b.astype(np.float64), np.zeros((3, 2), np.float32)), (a, b, np.zeros((2, 2), np.float32)),
                (a, np.ones((3, 2), np.float32), np.zeros((3, 2), np.float32)), (a, b, frozen),
                (a[:, ::2], b[:2], np.zeros((3, 2), np.float32))]:
        with pytest.raises(ExecutionError, match="accumulate"):
            accumulate(gemm, *bad, 0.0)
    c = np.zeros((3, 2), np.float32)
    accumulate(gemm, a, b, c, 0.0)
    np.testing.assert_array_equal(c, a @ b)


@pytest.mark.parametrize(("size", "kernel", "strides", "dilations", "pads"), [
    ((7,), [3], [2], [2], [1, 1]),
    ((9, 8), [3, 2], [1, 3], [1, 1], [0, 1, 2, 0]),
    ((5, 5), [1, 1], [1, 1], [1, 1], [0, 0, 0, 0]),
])
def test_conv_geometry_gives_the_output_size_of_its_windows(size: tuple, kernel: list, strides: list,
                                                              dilations: list, pads: list) -> None:
    """ConvGeometry.of: out = floor((S + pads - dilation * (K - 1) - 1) / stride) + 1 per axis;
    pointwise only for 1x1 windows at unit stride without pads."""
    from amanda.exec.kernels.spatial import ConvGeometry

    nd = len(size)
    g = ConvGeometry.of(size, kernel, strides, dilations, pads)
    assert g.out == [(size[i] + pads[i] + pads[nd + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1
                     for i in range(nd)]
    assert g.unit == all(s == 1 for s in strides)
    assert g.pointwise == (all(k == 1 for k in kernel) and g.unit and not any(pads))
