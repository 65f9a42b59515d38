"""Every layer computes what a plain-numpy computation written here computes (and, where the
layer exports, what onnxruntime computes on its ONNX export); bad hyper-parameters raise."""

from __future__ import annotations

import time

import numpy as np
import pytest

import amanda
from amanda import layers
from tests.layers.oracles import (
    ACTIVATIONS,
    arrays,
    attention,
    conv,
    layer_norm,
    onnxruntime_run,
    pool,
    run,
    same_pads,
)

RNG = np.random.default_rng(7)


def sample(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def test_dense_is_an_affine_map_then_its_activation() -> None:
    """Dense computes activation(x @ kernel + bias) over the last axis, for any leading axes."""
    layer = layers.Dense(5, 3, activation="tanh", name="d")
    w = arrays(layer)
    assert w["kernel"].shape == (5, 3) and not w["bias"].any()
    assert layer.type == "Dense" and layer.attrs["units"] == 3 and layer.attrs["activation"] == "tanh"
    for x in (sample(4, 5), sample(2, 3, 5)):
        np.testing.assert_allclose(run(layer, x)[0], np.tanh(x @ w["kernel"] + w["bias"]), rtol=1e-5, atol=1e-6)
    x = sample(4, 5)
    np.testing.assert_allclose(onnxruntime_run(layer, x), np.tanh(x @ w["kernel"]), rtol=1e-5, atol=1e-6)


def test_dense_without_bias_has_no_bias_weight() -> None:
    """use_bias=False leaves the bias out."""
    layer = layers.Dense(2, 2, use_bias=False)
    assert sorted(arrays(layer)) == ["kernel"]


def test_glorot_and_he_draws_have_their_rules_spread() -> None:
    """Glorot-uniform kernels stay within sqrt(6 / (fan_in + fan_out)); He-normal ones have a
    standard deviation near sqrt(2 / fan_in)."""
    kernel = arrays(layers.Dense(300, 200))["kernel"]
    limit = np.sqrt(6 / 500)
    assert np.abs(kernel).max() <= limit and np.abs(kernel).max() > 0.95 * limit
    he = arrays(layers.Conv(32, 64, 3))["kernel"]
    assert abs(he.std() - np.sqrt(2 / (32 * 9))) < 0.01


CONV_CASES = [
    # (dims, cin, cout, kernel, stride, padding, dilation, groups, size)
    (1, 3, 4, 3, 1, "valid", 1, 1, 9),
    (1, 4, 6, 2, 2, "same", 1, 2, 9),
    (2, 3, 5, 3, 1, "same", 1, 1, 7),
    (2, 4, 4, 3, 2, 1, 1, 4, 8),
    (2, 2, 4, (3, 2), (2, 1), "same", (2, 1), 2, 9),
    (2, 3, 2, 3, 1, (1, 2), 2, 1, 8),
    (3, 2, 3, 2, 1, "valid", 1, 1, 4),
    (3, 2, 2, 3, 2, "same", 1, 1, 5),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}d-k{c[3]}-s{c[4]}-p{c[5]}-d{c[6]}-g{c[7]}")
def test_conv_matches_a_windowed_numpy_convolution(case: tuple) -> None:
    """Conv in 1, 2 and 3 dimensions, with strides, padding ('same', 'valid', ints), dilation
    and groups, equals an explicit windowed convolution, and onnxruntime agrees."""
    dims, cin, cout, kernel, stride, padding, dilation, groups, size = case
    layer = layers.Conv(cin, cout, kernel, stride=stride, padding=padding, dilation=dilation, groups=groups,
                        dims=dims, seed=3)
    w = arrays(layer)
    w_bias = RNG.standard_normal(cout).astype(np.float32)
    layer = amanda.replace(layer, ["bias"], lambda op: op.with_attrs(value=w_bias))
    x = sample(2, cin, *[size] * dims)
    as_tuple = (lambda v: tuple(v) if isinstance(v, tuple) else (v,) * dims)
    k, s, d = as_tuple(kernel), as_tuple(stride), as_tuple(dilation)
    if padding == "same":
        pads = [same_pads(size, k[i], s[i], d[i]) for i in range(dims)]
    elif padding == "valid":
        pads = [(0, 0)] * dims
    else:
        pads = [(p, p) for p in as_tuple(padding)]
    want = conv(x, w["kernel"], w_bias, s, pads, d, groups)
    got = run(layer, x)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if padding == "same" and max(s) > 1 and max(d) > 1:
        return  # onnxruntime refuses SAME_UPPER with dilation (and pads then depend on the size)
    np.testing.assert_allclose(onnxruntime_run(layer, x), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("dims,kernel,stride,padding", [(1, 3, 2, "valid"), (2, 2, None, "valid"),
                                                        (2, 3, 2, "same"), (2, 3, 1, 1), (3, 2, 1, "valid")])
def test_pooling_matches_numpy_windows(kind: str, dims: int, kernel: int, stride: int | None, padding) -> None:
    """MaxPool and AvgPool take the maximum / mean (padding not counted) of each window."""
    make = layers.MaxPool if kind == "max" else layers.AvgPool
    layer = make(kernel, stride, padding, dims=dims)
    x = sample(2, 3, *[6] * dims)
    s = stride or kernel
    if padding == "same":
        pads = [same_pads(6, kernel, s, 1)] * dims
    else:
        pads = [(0, 0) if padding == "valid" else (padding, padding)] * dims
    want = pool(x, (kernel,) * dims, (s,) * dims, pads, kind)
    np.testing.assert_allclose(run(layer, x)[0], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(onnxruntime_run(layer, x), want, rtol=1e-5, atol=1e-6)


def test_global_average_pooling_averages_every_position() -> None:
    """GlobalAvgPool gives the per-channel spatial mean, as [batch, channels] or kept dims."""
    x = sample(2, 3, 4, 5)
    np.testing.assert_allclose(run(layers.GlobalAvgPool(), x)[0], x.mean((2, 3)), rtol=1e-5, atol=1e-6)
    assert run(layers.GlobalAvgPool(keepdims=True), x)[0].shape == (2, 3, 1, 1)


def test_batchnorm_trains_on_batch_statistics_and_infers_on_running_ones() -> None:
    """In training BatchNorm normalises by the batch and moves the running statistics by
    momentum; in inference it uses the running statistics; onnxruntime agrees on the frozen model."""
    bn = layers.BatchNorm(3, momentum=0.8, epsilon=1e-3)
    x = sample(4, 3, 2, 2) * 2 + 1
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    scale = (lambda m, v: (x - m.reshape(1, 3, 1, 1)) / np.sqrt(v.reshape(1, 3, 1, 1) + 1e-3))
    with amanda.Session(bn, threads=1) as session:
        y, _ = session.run(["y", "train"], {"x": x}, phase="train")
        np.testing.assert_allclose(y, scale(mean, var), rtol=1e-4, atol=1e-4)
        running_mean, running_var = 0.2 * mean, 0.8 + 0.2 * var
        got = [session.state[bn.child(n).uid] for n in ("moving_mean", "moving_var")]
        np.testing.assert_allclose(got[0], running_mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1], running_var, rtol=1e-5, atol=1e-6)
        inferred = session.run(["y"], {"x": x}, phase="inference")[0]
        np.testing.assert_allclose(inferred, scale(running_mean, running_var), rtol=1e-4, atol=1e-4)
        frozen = layers.freeze(bn, session.state)
    assert [c.type for c in frozen.children if c.name == "moving_mean"] == ["Constant"]
    with amanda.Session(frozen) as session:
        np.testing.assert_allclose(session.run(["y"], {"x": x})[0], inferred, rtol=1e-6)


def test_batchnorm_inference_before_training_is_the_initial_normalisation() -> None:
    """Untrained, BatchNorm in inference divides by sqrt(1 + eps) (running mean 0, variance 1)."""
    x = sample(2, 4)
    np.testing.assert_allclose(run(layers.BatchNorm(4), x, phase="inference")[0], x / np.sqrt(1 + 1e-5),
                               rtol=1e-5)
    np.testing.assert_allclose(onnxruntime_run(layers.BatchNorm(4), x), x / np.sqrt(1 + 1e-5), rtol=1e-5)


def test_layernorm_normalises_the_last_axis() -> None:
    """LayerNorm matches (x - mean) / sqrt(var + eps) * scale + bias over the last axis."""
    layer = layers.LayerNorm(6, epsilon=1e-4)
    x = sample(2, 3, 6)
    w = arrays(layer)
    want = layer_norm(x, w["scale"], w["bias"], 1e-4)
    np.testing.assert_allclose(run(layer, x)[0], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(onnxruntime_run(layer, x), want, rtol=1e-4, atol=1e-5)


def test_dropout_is_the_identity_in_inference_and_masks_in_training() -> None:
    """Dropout passes x through in inference; in training each element is 0 or x / (1 - rate)."""
    x = np.abs(sample(200, 50)) + 0.1
    np.testing.assert_array_equal(run(layers.Dropout(0.25), x, phase="inference")[0], x)
    y = run(layers.Dropout(0.25), x, phase="train")[0]
    kept = y != 0
    np.testing.assert_allclose(y[kept], x[kept] / 0.75, rtol=1e-6)
    assert 0.2 < 1 - kept.mean() < 0.3


def test_embedding_picks_rows() -> None:
    """Embedding returns table[ids] for int64 ids of any shape."""
    layer = layers.Embedding(10, 4)
    ids = np.array([[1, 9, 1], [0, 3, 2]], np.int64)
    np.testing.assert_array_equal(run(layer, ids)[0], arrays(layer)["table"][ids])


def test_flatten_and_reshape_keep_the_batch_axis() -> None:
    """Flatten folds the axes after `axis`; Reshape reshapes each sample (one -1 allowed)."""
    x = sample(2, 3, 4)
    np.testing.assert_array_equal(run(layers.Flatten(), x)[0], x.reshape(2, 12))
    np.testing.assert_array_equal(run(layers.Reshape((4, -1)), x)[0], x.reshape(2, 4, 3))
    np.testing.assert_array_equal(onnxruntime_run(layers.Reshape((4, -1)), x), x.reshape(2, 4, 3))


@pytest.mark.parametrize("kind", sorted(ACTIVATIONS))
def test_activations_match_their_formulas(kind: str) -> None:
    """Each activation layer computes its formula, and its lowercase function builds the same layer."""
    x = sample(3, 5)
    layer = getattr(layers, kind)()
    assert layer.type == "Activation" and layer.attrs["activation"] == kind
    np.testing.assert_allclose(run(layer, x)[0], ACTIVATIONS[kind](x.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_multi_head_attention_matches_numpy() -> None:
    """MultiHeadAttention computes per-head scaled dot-product attention and the output projection."""
    layer = layers.MultiHeadAttention(8, 2, seed=1)
    w = {k: v.astype(np.float64) for k, v in arrays(layer).items()}
    x = sample(2, 5, 8)
    want = attention(x.astype(np.float64), w, 2)
    np.testing.assert_allclose(run(layer, x)[0], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(onnxruntime_run(layer, x), want, rtol=1e-4, atol=1e-5)


def test_transformer_encoder_block_matches_numpy() -> None:
    """TransformerEncoder is norm1(x + attention(x)) then norm2(y + ffn2(relu(ffn1(y))))."""
    block = layers.TransformerEncoder(8, 2, 16, seed=2)
    sub = {c.name: arrays(c) for c in block.children if not c.is_op}
    x = sample(2, 4, 8).astype(np.float64)
    y = layer_norm(x + attention(x, sub["attention"], 2), sub["norm1"]["scale"], sub["norm1"]["bias"], 1e-5)
    hidden = np.maximum(y @ sub["ffn1"]["kernel"] + sub["ffn1"]["bias"], 0) @ sub["ffn2"]["kernel"]
    want = layer_norm(y + hidden + sub["ffn2"]["bias"], sub["norm2"]["scale"], sub["norm2"]["bias"], 1e-5)
    np.testing.assert_allclose(run(block, x.astype(np.float32))[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(onnxruntime_run(block, x.astype(np.float32)), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("build,where", [
    (lambda: layers.Dense(0, 3), "Dense/in_features"),
    (lambda: layers.Dense(3, 2, activation="relux"), "Dense/activation"),
    (lambda: layers.Conv(3, 4, 3, groups=2), "Conv/groups"),
    (lambda: layers.Conv(3, 4, (3, 3), dims=1), "Conv/dims"),
    (lambda: layers.Conv(3, 4, 3, padding="full"), "Conv/padding"),
    (lambda: layers.Conv(3, 4, 3, stride=(1, 2, 3)), "Conv/stride"),
    (lambda: layers.MaxPool(2, dims=4), "MaxPool/dims"),
    (lambda: layers.Dropout(1.0), "Dropout/rate"),
    (lambda: layers.BatchNorm(3, epsilon=0), "BatchNorm/epsilon"),
    (lambda: layers.MultiHeadAttention(10, 3), "MultiHeadAttention/num_heads"),
    (lambda: layers.Reshape((2, -1, -1)), "Reshape/shape"),
    (lambda: layers.Dense(3, 2, name="a/b"), "Dense/name"),
    (lambda: layers.Dense(3, 2, init="uniformish"), "kernel"),
    (lambda: layers.Activation("swishy"), "Activation/activation"),
    (lambda: layers.Activation(["relu"]), "Activation/activation"),  # type: ignore[arg-type]
    (lambda: layers.Dense(3, 2, activation=["relu"]), "Dense/activation"),  # type: ignore[arg-type]
    (lambda: layers.Dense(3, 2, init=["glorot"]), "kernel"),  # type: ignore[arg-type]
    (lambda: layers.Conv(3, 3, 3, padding=-1), "Conv/padding"),
    (lambda: layers.MaxPool(2, stride=0), "MaxPool/stride"),
    (lambda: layers.Embedding(3, 0), "Embedding/dim"),
    (lambda: layers.Flatten("1"), "Flatten/axis"),  # type: ignore[arg-type]
    (lambda: layers.seeded("net", 0), "model"),  # type: ignore[arg-type]
    (lambda: layers.seeded(layers.relu(), 0, prefix=(3,)), "prefix"),  # type: ignore[arg-type]
    (lambda: layers.Dense(3, 2, use_bias=np.ones(2, bool)), "Dense/use_bias"),
    (lambda: layers.Conv(3, 4, 3, use_bias="yes"), "Conv/use_bias"),  # type: ignore[arg-type]
    (lambda: layers.GlobalAvgPool(keepdims=np.zeros(3)), "GlobalAvgPool/keepdims"),  # type: ignore[arg-type]
    (lambda: layers.MaxPool(2, padding=np.zeros(2)), "MaxPool/padding"),
    (lambda: layers.MaxPool(2, dims=np.zeros(2)), "MaxPool/dims"),  # type: ignore[arg-type]
    (lambda: layers.Activation("relu", name=np.zeros(2)), "Activation/name"),  # type: ignore[arg-type]
    (lambda: layers.Activation("rleu"), "did you mean 'relu'"),
])
def test_bad_hyper_parameters_raise_an_argument_error_naming_the_field(build, where: str) -> None:
    """A wrong hyper-parameter raises ArgumentError at layer/field, not a bare Python error."""
    with pytest.raises(amanda.ArgumentError) as info:
        build()
    assert where in str(info.value)


@pytest.mark.parametrize("build", [
    lambda: layers.Dense(10**6, 10**6),
    lambda: layers.Embedding(10**7, 10**6),
    lambda: layers.Conv(10**4, 10**4, 100),
    lambda: layers.BatchNorm(10**13),
])
def test_a_layer_too_large_for_memory_is_refused_before_allocating(build) -> None:
    """A layer whose weight cannot fit in the memory available is an ArgumentError naming the
    weight, its shape and both sizes, raised before anything is allocated (no MemoryError), fast."""
    start = time.perf_counter()
    with pytest.raises(amanda.ArgumentError, match=r"expected a weight that fits in memory.*found shape \(\d+"):
        build()
    assert time.perf_counter() - start < 5


def test_a_phased_layer_run_without_a_phase_says_to_pass_one() -> None:
    """Running BatchNorm or Dropout without phase= raises an ExecutionError naming the phases."""
    for layer in (layers.BatchNorm(2), layers.Dropout(0.1)):
        with pytest.raises(amanda.ExecutionError, match="phase= one of them"):
            run(layer, sample(2, 2))


def test_two_default_named_layers_of_one_kind_build_in_one_model():
    """Two Flatten layers with their default names build (the second is not renamed like its own inner op) and run."""
    import numpy as np

    from amanda import Input, Session, layers, model

    x = Input("x", "float32", ("batch", 2, 3, 4))
    net = model([x], {"y": layers.Flatten()(layers.Reshape((2, 12))(layers.Flatten()(x)))})
    assert len({c.name for c in net.children}) == 3
    data = np.arange(48, dtype=np.float32).reshape(2, 2, 3, 4)
    with Session(net) as session:
        (y,) = session.run(["y"], {"x": data})
    np.testing.assert_array_equal(y, data.reshape(2, 24))
