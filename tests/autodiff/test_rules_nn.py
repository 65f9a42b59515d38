"""Every shape, selection and network rule agrees with central finite differences in float64,
on random shapes and attributes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import amanda
from amanda import Input, model, ops
from tests.autodiff.fd import check

SETTINGS = settings(max_examples=5, deadline=None)
I64 = np.int64


def arr(seed: int, shape: tuple) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


@SETTINGS
@given(st.sampled_from(["Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Expand", "Identity", "Cast"]),
       st.integers(0, 99))
def test_shape_ops(kind, seed):
    """Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Identity and Cast move the
    gradient back to the input's layout."""
    build = {
        "Reshape": lambda x: ops.Reshape(x, np.array([3, -1], I64)),
        "Flatten": lambda x: ops.Flatten(x, axis=2),
        "Squeeze": lambda x: ops.Squeeze(x, np.array([1], I64)),
        "Unsqueeze": lambda x: ops.Unsqueeze(x, np.array([0, 3], I64)),
        "Transpose": lambda x: ops.Transpose(x, perm=[2, 0, 1]),
        "Expand": lambda x: ops.Expand(x, np.array([2, 3, 2, 4], I64)),
        "Identity": lambda x: ops.Identity(x),
        "Cast": lambda x: ops.Cast(ops.Cast(x, to=np.dtype("float32")), to=np.dtype("float64")),
    }[kind]
    x = arr(seed, (3, 1, 4))
    # through float32 the differences need a wide step (the loss is linear in x, so it is exact)
    check(build, {"x": x}, rtol=1e-4 if kind == "Cast" else 1e-5, eps=1e-2 if kind == "Cast" else 1e-6)


@SETTINGS
@given(st.integers(-3, 2), st.integers(1, 3), st.integers(0, 99))
def test_concat(axis, parts, seed):
    """Concat hands each input its stretch of the gradient."""
    shapes = [tuple(2 + i if a == axis % 3 else 2 for a in range(3)) for i in range(parts)]
    feeds = {f"x{i}": arr(seed + i, s) for i, s in enumerate(shapes)}
    check(lambda **xs: ops.Concat(*xs.values(), axis=axis), feeds)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_split_with_an_unused_output(axis):
    """Split joins its outputs' gradients, zeros where an output is unused (numpy oracle)."""
    r = arr(5, tuple(2 if a == axis % 3 else 3 for a in range(3)))
    split = amanda.op("Split", "split", ["input", "split"], ["a", "b"], attrs={"axis": axis})
    sizes = amanda.op("Constant", "sizes", outputs=["output"], attrs={"value": np.array([1, 2], I64)})
    weight = amanda.op("Constant", "r", outputs=["output"], attrs={"value": r})
    mul = amanda.op("Mul", "mul", ["A", "B"], ["C"])
    total = amanda.op("ReduceSum", "sum", ["data"], ["reduced"], attrs={"keepdims": 0})
    x = amanda.Port("x", attrs={"dtype": "float64", "shape": [3, 3, 3]})
    net = amanda.Container("Model", "net", inputs=[x], outputs=["loss"], children=[sizes, weight, split, mul, total],
                           edges=[("net:x", "split:input"), ("sizes:output", "split:split"), ("split:b", "mul:A"),
                            ("r:output", "mul:B"), ("mul:C", "sum:data"), ("sum:reduced", "net:loss")],
                           attrs={"namespace": "amanda/onnx/17"})
    with amanda.Session(amanda.grad(net, "loss", ["x"]), threads=1) as s:
        (gx,) = s.run(["grad/x"], {"x": arr(0, (3, 3, 3))})
    np.testing.assert_array_equal(gx, np.concatenate([np.zeros_like(np.take(gx, [0], axis)), r], axis))


@SETTINGS
@given(st.integers(0, 4), st.integers(1, 2), st.sampled_from([0, 1]), st.integers(0, 99))
def test_slice(start, step, axis, seed):
    """Slice with any start and step scatters the gradient back to the sliced elements."""
    x = arr(seed, (5, 4))
    check(lambda x: ops.Slice(x, np.array([start], I64), np.array([5], I64), np.array([axis], I64),
                              np.array([step], I64)), {"x": x})


@SETTINGS
@given(st.lists(st.integers(-3, 2), min_size=1, max_size=5), st.sampled_from([0, 1]), st.integers(0, 99))
def test_gather_with_repeated_indices(indices, axis, seed):
    """Gather adds the gradients of repeated indices together."""
    check(lambda x: ops.Gather(x, np.array(indices, I64), axis=axis), {"x": arr(seed, (3, 3))})


def test_where():
    """Where sends each element's gradient to the side it was taken from, summed over broadcasting."""
    cond = np.array([[True, False, True], [False, False, True]])
    check(lambda a, b: ops.Where(cond, a, b), {"a": arr(1, (2, 3)), "b": arr(2, (3,))})


def test_dropout_training_uses_the_mask():
    """Dropout in training scales the kept elements' gradient by 1/(1-ratio), zero elsewhere;
    in inference it is the identity."""
    x = Input("x", "float64", (4, 5))
    out, mask = ops.Dropout(x, np.array(0.25), np.array(True))
    net = model([x], {"loss": ops.ReduceSum(ops.Mul(out, out), keepdims=0), "mask": mask}, name="net")
    g = amanda.grad(net, "loss", ["x"])
    xs = arr(0, (4, 5))
    with amanda.Session(g, threads=1) as s:
        gx, m = s.run(["grad/x", ("net", "mask")], {"x": xs})
    np.testing.assert_allclose(gx, np.where(m, 2 * (xs * m / 0.75) / 0.75, 0.0))
    check(lambda x: ops.Dropout(x, np.array(0.5))[0], {"x": xs})


@settings(max_examples=8, deadline=None)
@given(st.sampled_from([1, 2]), st.sampled_from([1, 2]), st.sampled_from([0, 1]), st.sampled_from([1, 2]),
       st.sampled_from([1, 2]), st.booleans(), st.integers(0, 99))
def test_conv(group, stride, pad, dilation, kernel, bias, seed):
    """Conv with groups, strides, padding, dilation and bias: input, weight and bias gradients."""
    c, m = 2 * group, 2 * group
    feeds = {"x": arr(seed, (2, c, 5, 6)), "w": arr(seed + 1, (m, c // group, kernel, kernel + 1))}
    if bias:
        feeds["b"] = arr(seed + 2, (m,))
    attrs = dict(group=group, strides=[stride, stride], pads=[pad, 0, pad, 1], dilations=[dilation, dilation])
    check(lambda x, w, b=None: ops.Conv(x, w, b, **attrs), feeds)


def test_conv_1d_same_padding():
    """A 1-D Conv with auto_pad SAME_UPPER differentiates too."""
    feeds = {"x": arr(0, (1, 2, 7)), "w": arr(1, (3, 2, 3))}
    check(lambda x, w: ops.Conv(x, w, auto_pad="SAME_UPPER", strides=[2]), feeds)


@settings(max_examples=8, deadline=None)
@given(st.sampled_from(["MaxPool", "AveragePool"]), st.sampled_from([1, 2]), st.sampled_from([0, 1]),
       st.booleans(), st.integers(0, 99))
def test_pools(kind, stride, pad, include_pad, seed):
    """MaxPool and AveragePool (count_include_pad either way) with strides and padding."""
    attrs = dict(kernel_shape=[2, 3], strides=[stride, stride], pads=[pad, pad, 0, pad])
    if kind == "AveragePool":
        attrs["count_include_pad"] = int(include_pad)
    check(lambda x: getattr(ops, kind)(x, **attrs) if kind == "AveragePool" else ops.MaxPool(x, **attrs)[0],
          {"x": arr(seed, (2, 2, 5, 6))})


def test_global_average_pool():
    """GlobalAveragePool spreads the gradient evenly over the spatial axes."""
    check(lambda x: ops.GlobalAveragePool(x), {"x": arr(0, (2, 3, 4, 5))})


@pytest.mark.parametrize(("training", "shape"), [(1, (4, 3, 2, 2)), (0, (4, 3, 2, 2)), (1, (5, 3, 4)), (1, (6, 3))])
def test_batchnorm(training, shape):
    """BatchNormalization with batch statistics (training) or running ones: input, scale, bias
    (ranks 4, 3 and 2: the per-channel count the training gradient divides by)."""
    feeds = {"x": arr(0, shape), "s": arr(1, (3,)), "b": arr(2, (3,))}
    mean, var = arr(3, (3,)), np.abs(arr(4, (3,))) + 0.5
    check(lambda x, s, b: ops.BatchNormalization(x, s, b, mean, var, training_mode=training)[0], feeds,
          rtol=1e-4, atol=1e-6)


@SETTINGS
@given(st.integers(-3, 2), st.integers(0, 99))
def test_layernorm(axis, seed):
    """LayerNormalization over the axes from any ``axis`` on: input, scale and bias."""
    shape = (2, 3, 4)
    tail = shape[axis % 3:]
    feeds = {"x": arr(seed, shape), "s": arr(seed + 1, tail), "b": arr(seed + 2, tail)}
    check(lambda x, s, b: ops.LayerNormalization(x, s, b, axis=axis)[0], feeds, rtol=1e-4, atol=1e-6)


@SETTINGS
@given(st.sampled_from(["mean", "sum", "none"]), st.booleans(), st.booleans(), st.integers(0, 99))
def test_softmax_cross_entropy(reduction, weighted, ignore, seed):
    """SoftmaxCrossEntropyLoss with each reduction, class weights and ignore_index (also on
    [N, C, d] scores)."""
    labels = np.array([[0, 2], [1, 1], [3, 0]], I64)
    weights = np.abs(arr(seed + 1, (4,))) + 0.5 if weighted else None
    attrs = {"reduction": reduction, **({"ignore_index": 1} if ignore else {})}
    check(lambda x: ops.SoftmaxCrossEntropyLoss(x, labels, weights, **attrs)[0], {"x": arr(seed, (3, 4, 2))})


def test_dropout_without_a_mask_port_reads_the_mask_from_the_output():
    """The layer library's Dropout (no mask port): kept elements get g/(1-rate), dropped ones zero."""
    from amanda import layers

    x = Input("x", "float32", (6, 7))
    y = layers.Dropout(0.5)(x)
    net = model([x], {"loss": ops.ReduceSum(y, keepdims=0), "y": y}, name="net")
    xs = np.random.default_rng(0).standard_normal((6, 7)).astype(np.float32)
    with amanda.Session(amanda.grad(net, "loss", ["x"]), threads=1) as s:
        gx, ys = s.run(["grad/x", ("net", "y")], {"x": xs}, phase="train")
    np.testing.assert_allclose(gx, np.where(ys != 0, 2.0, 0.0))
    assert 0 < np.count_nonzero(ys) < ys.size


def test_batchnorm_gradient_in_the_inference_phase_reads_its_running_statistics() -> None:
    """grad of a BatchNorm model in the inference phase (running statistics read from
    Variables, whose reads are untyped) gives numpy's gradient of the affine map it is."""
    from amanda import layers

    x = Input("x", "float32", ("batch", 4))
    net = layers.seeded(amanda.model([x], {"loss": ops.ReduceSum(layers.Dense(4, 2)(layers.BatchNorm(4)(x)),
                                                                  keepdims=0)}, name="net"), 0)
    g = amanda.grad(net, "loss", ["x"], phase="inference")
    xs = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    with amanda.Session(g) as s:
        (gx,) = s.run(["grad/x"], {"x": xs}, phase="inference")
    kernel = np.asarray(net.descendant(("dense", "kernel")).attrs["value"], np.float64)
    # running mean 0 and variance 1, scale 1: d/dx sum((x / sqrt(1 + eps)) @ W + b) = W.sum(1) / sqrt(1 + eps)
    expected = np.broadcast_to(kernel.sum(axis=1) / np.sqrt(1 + 1e-5), (3, 4))
    np.testing.assert_allclose(gx, expected, rtol=1e-5)


@SETTINGS
@given(st.sampled_from(["mean", "sum", "none"]), st.booleans(), st.booleans(), st.integers(0, 99))
def test_negative_log_likelihood(reduction, weighted, ignore, seed):
    """NegativeLogLikelihoodLoss with each reduction, class weights and ignore_index, on
    [N, C] and [N, C, d] scores."""
    weights = np.abs(arr(seed + 1, (4,))) + 0.5 if weighted else None
    attrs = {"reduction": reduction, **({"ignore_index": 1} if ignore else {})}
    labels3 = np.array([[0, 2], [1, 1], [3, 0]], I64)
    check(lambda x: ops.NegativeLogLikelihoodLoss(x, labels3, weights, **attrs), {"x": arr(seed, (3, 4, 2))})
    labels2 = np.array([3, 1, 0], I64)
    check(lambda x: ops.NegativeLogLikelihoodLoss(x, labels2, weights, **attrs), {"x": arr(seed, (3, 4))})


def test_softmax_cross_entropy_log_prob_output():
    """A loss read through SoftmaxCrossEntropyLoss's log_prob output differentiates too."""
    labels = np.array([0, 2, 1], I64)
    check(lambda x: ops.Mul(ops.SoftmaxCrossEntropyLoss(x, labels, reduction="none")[1], np.float64(1.0)),
          {"x": arr(0, (3, 4))})


def test_a_loss_reading_layernorm_statistics_is_named():
    """A loss that reads LayerNormalization's Mean output (which the rule does not
    differentiate) is a SchemaError naming the op, not a silently missing term."""
    x = Input("x", "float64", (2, 3))
    _, mean, _ = ops.LayerNormalization(x, np.ones(3), np.zeros(3), name="ln")
    net = model([x], {"loss": ops.ReduceSum(mean, keepdims=0)}, name="net")
    with pytest.raises(amanda.SchemaError, match=r"`ln` \(LayerNormalization\).*statistics"):
        amanda.grad(net, "loss", ["x"])
