"""Vector-Jacobian rules of network ops: convolution, pooling, normalisation, the softmax
cross-entropy loss.

The input gradient of a convolution is a ``ConvTranspose`` with the same weights; its weight
gradient is a convolution of the input by the output gradient with strides and dilations
swapped (batch and channels exchanged, per group). Average pooling is a ``ConvTranspose``
with a kernel of ones per channel; max pooling scatters the gradient back to the positions
``MaxPool``'s ``Indices`` output names.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from amanda.autodiff.node import Node, const, rank, shape_of, size_of, unbroadcast
from amanda.autodiff.rules_shape import scatter_back
from amanda.build import ops
from amanda.build.values import Value
from amanda.exec.kernels.conv_transpose import _transpose_pads
from amanda.exec.kernels.spatial import ints

__all__ = [
    "avgpool_vjp", "batchnorm_vjp", "conv_transpose_vjp", "conv_vjp", "instancenorm_vjp", "layernorm_vjp",
    "maxpool_vjp", "nll_vjp", "softmax_xent_vjp",
]


def _i64(values: Sequence[int]) -> np.ndarray:
    return np.array(list(values), np.int64)


class _Window:
    """The static geometry of a convolution or pooling window (spatial dims known)."""

    def __init__(self, n: Node, kernel: Sequence[int]) -> None:
        x, y = n.given(0), n.outputs[0]
        xs, ys = x.type.shape, y.type.shape
        if xs is None or ys is None or not all(type(d) is int for d in (*xs[2:], *ys[2:], *kernel)):
            raise n.fail("known spatial sizes and kernel shape", f"{x.type!r} -> {y.type!r}")
        nd = len(xs) - 2
        self.size, self.out, self.kernel = list(xs[2:]), list(ys[2:]), [int(k) for k in kernel]
        self.strides = [int(s) for s in n.attr("strides", [1] * nd)]
        self.dilations = [int(d) for d in n.attr("dilations", [1] * nd)]
        pads = [int(p) for p in n.attr("pads", [0] * 2 * nd)]
        auto = n.attr("auto_pad", "NOTSET")
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            begins, ends = [], []
            for i in range(nd):
                total = max(0, (self.out[i] - 1) * self.strides[i] + self.extent(i) - self.size[i])
                small, big = total // 2, total - total // 2
                begins.append(small if auto == "SAME_UPPER" else big)
                ends.append(big if auto == "SAME_UPPER" else small)
            pads = begins + ends
        elif auto == "VALID":
            pads = [0] * 2 * nd
        self.pads = pads
        self.nd = nd

    def extent(self, i: int) -> int:
        return (self.kernel[i] - 1) * self.dilations[i] + 1

    def output_padding(self) -> list[int]:
        """What a ConvTranspose needs to give back exactly the input's spatial size."""
        return [self.size[i] - ((self.out[i] - 1) * self.strides[i] + self.extent(i) - self.pads[i]
                                - self.pads[self.nd + i]) for i in range(self.nd)]

    def transpose(self, g: Value, w: Value, group: int) -> Value:
        return ops.ConvTranspose(g, w, group=group, strides=self.strides, pads=self.pads, dilations=self.dilations,
                                 output_padding=self.output_padding())


def _weight_grad(x: Value, g: Value, group: int, cg: int, size: list[int], kernel: list[int], strides: list[int],
                 dilations: list[int], pads: list[int]) -> Value:
    """The weight gradient of ``Conv(x, w) = y`` given ``g = dL/dy``: a convolution of ``x``
    by ``g`` with strides and dilations swapped (batch and channels exchanged, per group),
    cut to the kernel's extent; ``cg`` input channels per group, ``size`` ``x``'s spatial dims."""
    nd = len(size)
    spatial = list(range(2, 2 + nd))
    xr = ops.Reshape(x, _i64([-1, group, cg, *size]))
    xt = ops.Reshape(ops.Transpose(xr, perm=[2, 1, 0, *range(3, 3 + nd)]), _i64([cg, -1, *size]))
    gt = ops.Transpose(g, perm=[1, 0, *spatial])
    r = ops.Conv(xt, gt, group=group, strides=dilations, dilations=strides, pads=pads)
    r = ops.Slice(r, _i64([0] * nd), _i64(kernel), _i64(spatial))
    return ops.Transpose(r, perm=[1, 0, *spatial])


def _known_shape(n: Node, v: Value, what: str) -> list[int]:
    """The static shape of ``v``: an error naming the op when a dim is unknown."""
    dims = v.type.shape
    if dims is None or not all(type(d) is int for d in dims):
        raise n.fail(f"{what} of known shape", repr(v.type))
    return [int(d) for d in dims]


def conv_vjp(n: Node) -> list:
    """Conv (groups, strides, padding, dilation)."""
    x, w = n.given(0, 1)
    ws = _known_shape(n, w, "weights")
    group = int(n.attr("group", 1))
    win = _Window(n, ws[2:])
    g = n.grad()
    out: list = [None] * len(n.inputs)
    if n.need(0):
        out[0] = win.transpose(g, w, group)
    if n.need(1):
        out[1] = _weight_grad(x, g, group, int(ws[1]), win.size, win.kernel, win.strides, win.dilations, win.pads)
    if len(n.inputs) > 2 and n.need(2):
        out[2] = ops.ReduceSum(g, _i64([0, *range(2, rank(g))]), keepdims=0)
    return out


def conv_transpose_vjp(n: Node) -> list:
    """ConvTranspose (groups, strides, pads or ``output_shape``/auto_pad, dilations,
    output_padding): the input gradient is a ``Conv`` of the output gradient with the same
    weights and geometry; the weight gradient the convolution's, with the input and output
    gradient exchanged."""
    x, w = n.given(0, 1)
    xs, ws, ys = _known_shape(n, x, "an input"), _known_shape(n, w, "weights"), _known_shape(n, n.outputs[0], "an output")
    nd, group = len(xs) - 2, int(n.attr("group", 1))
    kernel = ws[2:]
    strides, dilations = ints(n.attr("strides"), nd, 1), ints(n.attr("dilations"), nd, 1)
    padding = ints(n.attr("output_padding"), nd, 0)[-nd:]
    pads = _transpose_pads(n.op.attrs, tuple(xs[2:]), kernel, strides, dilations, padding)  # as the kernel pads
    g = gy = n.grad()
    size = ys[2:]
    if any(p < 0 for p in pads):  # an output larger than the op fills (output_shape): its edges get nothing
        begins = [max(0, -p) for p in pads[:nd]]
        size = [size[i] - begins[i] - max(0, -pads[nd + i]) for i in range(nd)]
        g = ops.Slice(gy, _i64(begins), _i64([b + e for b, e in zip(begins, size)]), _i64(range(2, 2 + nd)))
        pads = [max(0, p) for p in pads]
    out: list = [None] * len(n.inputs)
    if n.need(0):
        gx = ops.Conv(g, w, group=group, strides=strides, dilations=dilations, pads=pads)
        reach = [(size[i] + pads[i] + pads[nd + i] - (kernel[i] - 1) * dilations[i] - 1) // strides[i] + 1
                 for i in range(nd)]
        if reach != xs[2:]:  # output_padding past the last stride: rows no input reaches
            gx = ops.Slice(gx, _i64([0] * nd), _i64(xs[2:]), _i64(range(2, 2 + nd)))
        out[0] = gx
    if n.need(1):
        out[1] = _weight_grad(g, x, group, ws[1], size, kernel, strides, dilations, pads)
    if len(n.inputs) > 2 and n.need(2):
        out[2] = ops.ReduceSum(gy, _i64([0, *range(2, rank(gy))]), keepdims=0)
    return out


def maxpool_vjp(n: Node) -> list:
    """MaxPool: the gradient back to the positions the maxima came from."""
    x = n.given(0)
    attrs = n.own_attrs("storage_order")
    _, indices = ops.MaxPool(x, **attrs)
    win = _Window(n, n.attr("kernel_shape"))
    apart = all(win.strides[i] >= win.extent(i) for i in range(win.nd))  # each element in one window at most
    return [scatter_back(n.grad(), x, indices, n, unique=apart)]


def avgpool_vjp(n: Node) -> list:
    """AveragePool: each window's share spread back over it by a ConvTranspose of ones."""
    x = n.given(0)
    if int(n.attr("ceil_mode", 0)):
        raise n.fail("ceil_mode=0", "ceil_mode=1")
    win = _Window(n, n.attr("kernel_shape"))
    channels = x.type.shape[1]  # type: ignore[index]
    if type(channels) is not int:
        raise n.fail("a known channel count", repr(x.type))
    area = int(np.prod(win.kernel))
    g = n.grad()
    if any(win.pads) and not int(n.attr("count_include_pad", 0)):
        ones = ops.ConstantOfShape(shape_of(x), value=const([1], x))
        share = ops.AveragePool(ones, kernel_shape=win.kernel, strides=win.strides, pads=win.pads, count_include_pad=1)
        g = ops.Div(g, ops.Mul(share, const(area, x)))
    else:
        g = ops.Mul(g, const(1 / area, g))
    kernel = const(np.ones((channels, 1, *win.kernel)), x)
    return [win.transpose(g, kernel, channels)]  # type: ignore[arg-type]


def _normalised(x: Value, axes: list[int], eps: float) -> tuple[Value, Value]:
    """``(x - mean) * inv`` and ``inv = 1/sqrt(var + eps)`` over ``axes``."""
    centred = ops.Sub(x, ops.ReduceMean(x, axes=axes, keepdims=1))
    inv = ops.Reciprocal(ops.Sqrt(ops.Add(ops.ReduceMean(ops.Mul(centred, centred), axes=axes, keepdims=1),
                                          const(eps, x))))
    return ops.Mul(centred, inv), inv


def _only_first_output(n: Node) -> None:
    """An error naming the op when the loss reads a statistics output (mean, variance): the
    rules differentiate the normalised output only."""
    if any(g is not None for g in n.grads[1:]):
        raise n.fail("a loss that reads only the normalised output", "a gradient of a statistics output")


def _through_norm(gx_hat: Value, x_hat: Value, inv: Value, axes: list[int]) -> Value:
    """The input gradient of a normalisation from the gradient of its normalised value."""
    mean_g = ops.ReduceMean(gx_hat, axes=axes, keepdims=1)
    mean_gx = ops.ReduceMean(ops.Mul(gx_hat, x_hat), axes=axes, keepdims=1)
    return ops.Mul(inv, ops.Sub(ops.Sub(gx_hat, mean_g), ops.Mul(x_hat, mean_gx)))


def _batch_statistics_vjp(n: Node, x: Value, g: Value, gamma: Value, axes: list[int]) -> list:
    """The input, scale and bias gradients of BatchNormalization with batch statistics. The
    two per-channel sums of the scale and bias gradients also give the means the input
    gradient needs (``mean(g * gamma) = gamma * sum(g) / n``), so the backward reduces twice
    over the batch rather than four times."""
    x_hat, inv = _normalised(x, axes, float(n.attr("epsilon", 1e-5)))
    sum_axes = _i64(axes)
    sum_g = ops.ReduceSum(g, sum_axes, keepdims=1)
    sum_gx = ops.ReduceSum(ops.Mul(g, x_hat), sum_axes, keepdims=1)
    per = ops.Div(size_of(x), shape_of(x, 1, 2))  # values per channel (a constant once shapes are known)
    share = ops.Div(const(1, x), ops.Cast(per, to=const(0, x).dtype))
    centred = ops.Sub(ops.Sub(g, ops.Mul(sum_g, share)), ops.Mul(x_hat, ops.Mul(sum_gx, share)))
    flat = _i64([-1])
    return [ops.Mul(ops.Mul(inv, gamma), centred) if n.need(0) else None,
            ops.Reshape(sum_gx, flat) if n.need(1) else None, ops.Reshape(sum_g, flat) if n.need(2) else None]


def batchnorm_vjp(n: Node) -> list:
    """BatchNormalization, with batch statistics (``training_mode=1``) or running ones."""
    x, scale = n.given(0, 1)
    _only_first_output(n)
    r = rank(x, n)
    axes = [0, *range(2, r)]
    eps = float(n.attr("epsilon", 1e-5))
    g = n.grad()
    per_channel = _i64([-1, *([1] * (r - 2))])
    gamma = ops.Reshape(scale, per_channel)
    if int(n.attr("training_mode", 0)) and n.need(0):
        return [*_batch_statistics_vjp(n, x, g, gamma, axes), None, None][:len(n.inputs)]
    if int(n.attr("training_mode", 0)):
        x_hat, inv = _normalised(x, axes, eps)
        gx = _through_norm(ops.Mul(g, gamma), x_hat, inv, axes)
    else:
        mean, var = n.given(3, 4)
        typed = var if var.type is not None else x  # a running variance read from a Variable is untyped
        inv = ops.Reshape(ops.Reciprocal(ops.Sqrt(ops.Add(var, const(eps, typed)))), per_channel)
        x_hat = ops.Mul(ops.Sub(x, ops.Reshape(mean, per_channel)), inv)
        gx = ops.Mul(g, ops.Mul(gamma, inv))
    sum_axes = _i64(axes)
    stats: list = [None, None]
    if not int(n.attr("training_mode", 0)) and (n.need(3) or n.need(4)):  # running statistics as inputs
        stats = [ops.Neg(ops.ReduceSum(gx, sum_axes, keepdims=0)),
                 ops.Mul(ops.ReduceSum(ops.Mul(gx, x_hat), sum_axes, keepdims=0),
                         ops.Mul(ops.Reshape(inv, _i64([-1])), const(-0.5, typed)))]
    return [gx if n.need(0) else None,
            ops.ReduceSum(ops.Mul(g, x_hat), sum_axes, keepdims=0) if n.need(1) else None,
            ops.ReduceSum(g, sum_axes, keepdims=0) if n.need(2) else None, *stats][:len(n.inputs)]


def instancenorm_vjp(n: Node) -> list:
    """InstanceNormalization: normalised over each sample's and channel's spatial axes; scale
    and bias per channel."""
    x, scale = n.given(0, 1)
    r = rank(x, n)
    axes = list(range(2, r))
    x_hat, inv = _normalised(x, axes, float(n.attr("epsilon", 1e-5)))
    g = n.grad()
    per_channel = _i64([-1, *([1] * (r - 2))])
    sum_axes = _i64([0, *axes])
    return [_through_norm(ops.Mul(g, ops.Reshape(scale, per_channel)), x_hat, inv, axes) if n.need(0) else None,
            ops.ReduceSum(ops.Mul(g, x_hat), sum_axes, keepdims=0) if n.need(1) else None,
            ops.ReduceSum(g, sum_axes, keepdims=0) if n.need(2) else None][:len(n.inputs)]


def layernorm_vjp(n: Node) -> list:
    """LayerNormalization over the axes from ``axis`` on."""
    x, scale = n.given(0, 1)
    _only_first_output(n)
    r = rank(x, n)
    axes = list(range(int(n.attr("axis", -1)) % r, r))
    x_hat, inv = _normalised(x, axes, float(n.attr("epsilon", 1e-5)))
    g = n.grad()
    out: list = [_through_norm(ops.Mul(g, scale), x_hat, inv, axes) if n.need(0) else None,
                 unbroadcast(ops.Mul(g, x_hat), scale) if n.need(1) else None]
    if len(n.inputs) > 2:
        bias = n.inputs[2]
        out.append(unbroadcast(g, bias) if n.need(2) and bias is not None else None)
    return out


def _label_coefficients(n: Node, scores: Value, labels: Value) -> tuple[Value, Value]:
    """The labels with ``ignore_index`` made safe to one-hot, and each label's coefficient of
    the output gradient (class weight, zero where ignored, divided as the mean divides), shaped
    to multiply ``[N, C, ...]``; shared by SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss."""
    weights = n.inputs[2] if len(n.inputs) > 2 else None
    if n.need(2):  # never zeros in silence
        raise n.fail("class weights the loss is not differentiated by (constants)", "weights that need a gradient")
    g = n.grad()
    ignore = n.attr("ignore_index")
    safe: Value = labels
    w: Value | None = None
    if ignore is not None:
        keep = ops.Not(ops.Equal(labels, np.array(int(ignore), np.int64)))
        safe = ops.Where(keep, labels, np.array(0, np.int64))
        w = ops.Cast(keep, to=np.dtype(scores.type.dtype))
    if weights is not None:
        picked = ops.Gather(weights, safe)
        w = picked if w is None else ops.Mul(picked, w)
    coef = g if w is None else ops.Mul(g, w)
    if n.attr("reduction", "mean") == "mean":
        count = ops.Cast(size_of(labels), to=np.dtype(scores.type.dtype)) if w is None else ops.ReduceSum(w, keepdims=0)
        coef = ops.Div(coef, count)
    if rank(coef) > 0:
        coef = ops.Unsqueeze(coef, _i64([1]))
    return safe, coef


def _onehot(safe: Value, scores: Value) -> Value:
    return ops.OneHot(safe, shape_of(scores, 1, 2), const([0, 1], scores), axis=1)


def softmax_xent_vjp(n: Node) -> list:
    """SoftmaxCrossEntropyLoss (reductions none/sum/mean, class weights, ignore_index):
    ``(softmax(scores) - onehot(labels)) * weight``, divided as the mean divided; a gradient
    of the ``log_prob`` output goes back through its log-softmax."""
    scores, labels = n.given(0, 1)
    safe, coef = _label_coefficients(n, scores, labels)
    gx = ops.Mul(ops.Sub(ops.Softmax(scores, axis=1), _onehot(safe, scores)), coef)
    if len(n.grads) > 1 and n.grads[1] is not None:
        g1, axis = n.grads[1], _i64([1])
        gx = ops.Add(gx, ops.Sub(g1, ops.Mul(ops.Exp(n.outputs[1]), ops.ReduceSum(g1, axis, keepdims=1))))
    return [gx] + [None] * (len(n.inputs) - 1)


def nll_vjp(n: Node) -> list:
    """NegativeLogLikelihoodLoss (reductions, class weights, ignore_index): ``-onehot(labels)``
    times each label's coefficient."""
    scores, labels = n.given(0, 1)
    safe, coef = _label_coefficients(n, scores, labels)
    return [ops.Neg(ops.Mul(_onehot(safe, scores), coef))] + [None] * (len(n.inputs) - 1)
