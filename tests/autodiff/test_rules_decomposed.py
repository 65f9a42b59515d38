"""The composite rules (GroupNormalization, LRN, LpPool, GlobalLpPool, SwiGLU, AffineGrid,
RotaryEmbedding) and the replayed copies (CenterCropPad, MaxUnpool, TensorScatter) agree with
central finite differences in float64."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import ops
from amanda.build import Ops
from tests.autodiff.fd import check, numeric

I64 = np.int64


def arr(seed: int, shape: tuple) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_group_norm(groups):
    """GroupNormalization (opset 21: scale and bias per channel)."""
    feeds = {"x": arr(0, (2, 4, 3)), "scale": arr(1, (4,)), "bias": arr(2, (4,))}
    check(lambda x, scale, bias: Ops("amanda/onnx/21").GroupNormalization(x, scale, bias, num_groups=groups,
                                                                          epsilon=1e-3), feeds)


def test_group_norm_of_opset_18():
    """Opset 18's GroupNormalization (an imported model's; the builder has only 21's) takes a
    scale and bias per group."""
    x0, scale, bias = arr(0, (2, 4, 3)), arr(1, (2,)), arr(2, (2,))
    x = amanda.Port("x", attrs={"dtype": "float64", "shape": [2, 4, 3]})
    consts = [amanda.op("Constant", name, outputs=["output"], attrs={"value": v})
              for name, v in (("s", scale), ("b", bias), ("r", arr(3, (2, 4, 3))))]
    norm = amanda.op("GroupNormalization", "gn", ["X", "scale", "B"], ["Y"], attrs={"num_groups": 2, "epsilon": 1e-5})
    mul = amanda.op("Mul", "mul", ["A", "B"], ["C"])
    total = amanda.op("ReduceSum", "sum", ["data"], ["reduced"], attrs={"keepdims": 0})
    net = amanda.Container("Model", "net", inputs=[x], outputs=["loss"], children=[*consts, norm, mul, total],
                           edges=[("net:x", "gn:X"), ("s:output", "gn:scale"), ("b:output", "gn:B"), ("gn:Y", "mul:A"),
                            ("r:output", "mul:B"), ("mul:C", "sum:data"), ("sum:reduced", "net:loss")],
                           attrs={"namespace": "amanda/onnx/18"})
    with amanda.Session(amanda.grad(net, "loss", ["x"]), threads=1) as s:
        (got,) = s.run(["grad/x"], {"x": x0})
    with amanda.Session(net, threads=1) as s:
        expected = numeric(lambda f: float(s.run(["loss"], f)[0]), {"x": x0}, "x")
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_lrn(size):
    """LRN over the nearest `size` channels (even sizes lean forward, as ONNX's)."""
    check(lambda x: Ops("amanda/onnx/17").LRN(x, size=size, alpha=0.1, beta=0.75, bias=1.5), {"x": arr(3, (2, 5, 2, 2))})


@pytest.mark.parametrize(("p", "attrs"), [
    (2, {"kernel_shape": [2, 2]}),
    (3, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    (1, {"kernel_shape": [2], "dilations": [2]}),
    (2, {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER"}),
])
def test_lp_pool(p, attrs):
    """LpPool with strides, pads, dilations and auto_pad."""
    shape = (1, 2, 5) if len(attrs["kernel_shape"]) == 1 else (1, 2, 4, 5)
    check(lambda x: Ops("amanda/onnx/18").LpPool(x, p=p, **attrs), {"x": arr(4, shape)})


@pytest.mark.parametrize("p", [1, 2, 3])
def test_global_lp_pool(p):
    """GlobalLpPool over every spatial axis."""
    check(lambda x: Ops("amanda/onnx/17").GlobalLpPool(x, p=p), {"x": arr(5, (2, 3, 2, 2))})


def test_swiglu():
    """SwiGLU (opset 28): a * sigmoid(alpha a) * b."""
    check(lambda a, b: Ops("amanda/onnx/28").SwiGLU(a, b, alpha=1.5), {"a": arr(6, (2, 3)), "b": arr(7, (2, 3))})


@pytest.mark.parametrize(("size", "align"), [([2, 1, 3, 4], 0), ([2, 1, 3, 4], 1), ([1, 1, 2, 3, 2], 0)])
def test_affine_grid(size, align):
    """AffineGrid (opset 20), 2-D and 3-D, with and without align_corners."""
    nd = len(size) - 2
    theta = arr(8, (size[0], nd, nd + 1))
    check(lambda t: Ops("amanda/onnx/20").AffineGrid(t, np.array(size, I64), align_corners=align), {"t": theta})


@pytest.mark.parametrize(("interleaved", "dim", "flat", "positions"), [
    (0, 0, False, False), (1, 0, False, False), (0, 2, True, False), (1, 2, False, True), (0, 0, True, True),
])
def test_rotary_embedding(interleaved, dim, flat, positions):
    """RotaryEmbedding (opset 23): both layouts, interleaved or halves, a partial rotary
    dimension, position ids; cos and sin get gradients too."""
    b, s, h, d = 1, 3, 2, 4
    x = arr(9, (b, s, h * d) if flat else (b, h, s, d)).astype(np.float32)
    cache = (5, d // 2) if positions else (b, s, d // 2)
    pos = np.array([[4, 0, 2]], I64) if positions else None
    rotary = Ops("amanda/onnx/23").RotaryEmbedding
    check(lambda x, cos, sin: ops.Cast(rotary(x, cos, sin, pos, interleaved=interleaved, rotary_embedding_dim=dim,
                                              num_heads=h if flat else 0), to=np.dtype("float64")),
          {"x": x, "cos": arr(10, cache).astype(np.float32), "sin": arr(11, cache).astype(np.float32)},
          wrt=["x", "cos", "sin"], rtol=1e-3, atol=1e-4, eps=1e-2)  # float32 only: bilinear, so wide steps are exact


@pytest.mark.parametrize(("shape", "axes"), [([2, 5], None), ([4, 3], None), ([3], [1]), ([5, 1], [0, 1])])
def test_center_crop_pad(shape, axes):
    """CenterCropPad (opset 18) crops and pads; padded positions send nothing back."""
    kw = {} if axes is None else {"axes": axes}
    check(lambda x: Ops("amanda/onnx/18").CenterCropPad(x, np.array(shape, I64), **kw), {"x": arr(12, (3, 4))})


def test_max_unpool():
    """MaxUnpool of MaxPool's indices, with an output shape larger than the natural one."""
    data = np.random.default_rng(13).permutation(32).reshape(1, 2, 4, 4).astype(np.float64)
    o = Ops("amanda/onnx/17")

    def build(x):
        _, idx = o.MaxPool(o.Constant(value=data), kernel_shape=[2, 2], strides=[2, 2])
        return o.MaxUnpool(x, idx, np.array([1, 2, 5, 5], I64), kernel_shape=[2, 2], strides=[2, 2])

    check(build, {"x": arr(14, (1, 2, 2, 2))})


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter(mode):
    """TensorScatter (opset 24): the cache keeps the gradient where it was not overwritten."""
    write = np.array([1, 3 if mode == "circular" else 2], I64)
    check(lambda past, update: Ops("amanda/onnx/24").TensorScatter(past, update, write, mode=mode, axis=-2),
          {"past": arr(15, (2, 2, 4, 3)), "update": arr(16, (2, 2, 2, 3))})


@pytest.mark.parametrize(("k", "activation", "state", "bias"), [(3, "silu", True, True), (2, "none", False, True),
                                                                (1, "none", False, False), (4, "swish", True, False)])
def test_causal_conv_with_state(k, activation, state, bias):
    """CausalConvWithState (opset 27): the output and the new state, with and without a past
    state and a bias; the past state gets a gradient too."""
    feeds = {"x": arr(17, (2, 3, 5)), "w": arr(18, (3, 1, k))}
    if bias:
        feeds["b"] = arr(19, (3,))
    if state and k > 1:
        feeds["past"] = arr(20, (2, 3, k - 1))
    feeds = {name: v.astype(np.float32) for name, v in feeds.items()}  # the op takes float32 at most
    conv = Ops("amanda/onnx/27").CausalConvWithState

    def build(x, w, b=None, past=None):
        y, new = conv(x, w, b, past, activation=activation)
        out = y if k == 1 else ops.Concat(ops.Reshape(y, np.array([-1], I64)), ops.Reshape(new, np.array([-1], I64)),
                                          axis=0)
        return ops.Cast(out, to=np.dtype("float64"))

    check(build, feeds, wrt=list(feeds), rtol=2e-3, atol=1e-3, eps=1e-2)


@pytest.mark.parametrize(("image", "block", "attrs"), [
    ([5, 5], [1, 5], {}),                                            # ONNX's node case
    ([4, 5], [2, 2], {"strides": [2, 1], "pads": [1, 0, 1, 1]}),
    ([6], [3], {"dilations": [2]}),
])
def test_col2im(image, block, attrs):
    """Col2Im (opset 18) with strides, pads and dilations: overlapping blocks add up."""
    nd = len(image)
    strides, dilations = attrs.get("strides", [1] * nd), attrs.get("dilations", [1] * nd)
    pads = attrs.get("pads", [0] * 2 * nd)
    grid = [(image[i] + pads[i] + pads[nd + i] - (dilations[i] * (block[i] - 1) + 1)) // strides[i] + 1
            for i in range(nd)]
    x = arr(21, (1, 2 * int(np.prod(block)), int(np.prod(grid))))
    check(lambda x: Ops("amanda/onnx/18").Col2Im(x, np.array(image, I64), np.array(block, I64), **attrs), {"x": x})


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_values(axis):
    """OneHot: the off and on values get the gradient summed where each was written."""
    indices = np.array([[0, 2], [1, -1]], I64)
    check(lambda v: ops.OneHot(indices, np.array(3, I64), v, axis=axis), {"v": np.array([0.3, 1.7])})


def test_range_start_and_delta():
    """Range: start and delta (the length, 4 here, is fixed by the limit, which gets none);
    numpy's sums and central differences agree."""
    r = np.array([0.5, -1.0, 2.0, 0.25])
    s, d = amanda.Input("s", "float64", ()), amanda.Input("d", "float64", ())
    net = amanda.model([s, d], {"loss": ops.ReduceSum(ops.Mul(ops.Range(s, np.array(10.0), d), r), keepdims=0)})
    feeds = {"s": np.array(1.25), "d": np.array(2.5)}
    with amanda.Session(amanda.grad(net, "loss", ["s", "d"]), threads=1) as session:
        gs, gd = session.run(["grad/s", "grad/d"], feeds)
    np.testing.assert_allclose([gs, gd], [r.sum(), (r * np.arange(4)).sum()])
    with amanda.Session(net, threads=1) as session:
        for name, got in (("s", gs), ("d", gd)):
            np.testing.assert_allclose(got, numeric(lambda f: float(session.run(["loss"], f)[0]), feeds, name), rtol=1e-6)
