"""``amanda.summary`` on models built from layers: inferred output types and parameter counts,
checked against tables written out by hand (Keras's numbers for the same layers)."""

import numpy as np
import pytest

import amanda
from amanda import Input, layers


def _mlp() -> amanda.Container:
    x = Input("image", "float32", ("batch", 784))
    h = layers.Dense(784, 128, activation="relu")(x)
    h = layers.Dropout(0.2)(h)
    h = layers.Dense(128, 10)(h)
    return amanda.model([x], {"probs": layers.softmax()(h)}, name="mlp")


def _cnn() -> amanda.Container:
    x = Input("image", "float32", ("batch", 1, 28, 28))
    h = layers.Conv(1, 32, 3, padding="same")(x)
    h = layers.BatchNorm(32)(h)
    h = layers.relu()(h)
    h = layers.MaxPool(2)(h)
    h = layers.Conv(32, 64, 3)(h)
    h = layers.relu()(h)
    h = layers.GlobalAvgPool()(h)
    h = layers.Flatten()(h)
    h = layers.Reshape((8, 8))(h)
    h = layers.Flatten(name="unsplit")(h)
    return amanda.model([x], {"logits": layers.Dense(64, 10)(h)}, name="cnn")


MLP_TABLE = """\
path      type         output                params
dense     Dense        float32[batch,128]   100,480
dropout   Dropout      float32[batch,128]         0
dense_1   Dense        float32[batch,10]      1,290
softmax   Activation   float32[batch,10]          0
total parameters: 101,770"""

# conv: 32*1*3*3 + 32; batchnorm: scale, bias, moving mean and variance of 32; conv_1:
# 64*32*3*3 + 64; dense: 64*10 + 10 (Keras: 320, 128, 18,496, 650)
CNN_TABLE = """\
path             type            output                    params
conv             Conv            float32[batch,32,28,28]      320
batchnorm        BatchNorm       float32[batch,32,28,28]      128
relu             Activation      float32[batch,32,28,28]        0
maxpool          MaxPool         float32[batch,32,14,14]        0
conv_1           Conv            float32[batch,64,12,12]   18,496
relu_1           Activation      float32[batch,64,12,12]        0
global_avgpool   GlobalAvgPool   float32[batch,64]              0
flatten          Flatten         float32[batch,64]              0
reshape          Reshape         float32[batch,8,8]             0
unsplit          Flatten         float32[batch,64]              0
dense            Dense           float32[batch,10]            650
total parameters: 19,594"""


def test_mlp_summary_shows_inferred_output_types_and_keras_parameter_counts() -> None:
    """An MLP built on a typed Input lists each layer's dtype and symbolic shape, its
    parameters (none for Dropout and activations) and the total."""
    assert str(amanda.summary(_mlp())) == MLP_TABLE


def test_cnn_summary_shows_inferred_output_types_and_keras_parameter_counts() -> None:
    """A CNN's table gives every layer's [batch, channels, height, width] type as inference
    computes it through padding, pooling and flattening, and Keras's parameter counts."""
    table = amanda.summary(_cnn())
    assert str(table) == CNN_TABLE
    assert table.rows[4] == (("conv_1",), "Conv", "float32[batch,64,12,12]", 18_496)
    assert table.total == 19_594


def test_summary_descends_into_layers_with_their_ops_types() -> None:
    """depth=2 lists a layer's ops under its path with their own inferred types."""
    rows = amanda.summary(_mlp(), depth=2).rows
    assert [(r.path, r.type, r.outputs, r.params) for r in rows[:5]] == [
        (("dense",), "Dense", "float32[batch,128]", 100_480),
        (("dense", "kernel"), "Constant", "float32[784,128]", 100_352),
        (("dense", "matmul"), "MatMul", "float32[batch,128]", 0),
        (("dense", "bias"), "Constant", "float32[128]", 128),
        (("dense", "add"), "Add", "float32[batch,128]", 0)]


def test_bare_chain_is_typed_from_given_inputs() -> None:
    """A chain whose input declares only its dtype shows shapes once ``inputs`` gives the input
    type, and only dtypes without it."""
    mlp = amanda.chain(layers.Dense(4, 8, activation="relu"), layers.Dense(8, 2), name="mlp")
    typed = amanda.summary(mlp, inputs={"x": ("float32", ("n", 4))})
    assert [r.outputs for r in typed.rows] == ["float32[n,8]", "float32[n,2]"]
    assert typed.total == 4 * 8 + 8 + 8 * 2 + 2
    assert [r.outputs for r in amanda.summary(mlp).rows] == ["float32[*]", "float32[*]"]


def test_summary_rejects_inputs_it_cannot_read() -> None:
    """An input type that is neither a type, a (dtype, shape) pair, attributes nor an array is
    an AmandaError naming the input."""
    with pytest.raises(amanda.AmandaError, match="x"):
        amanda.summary(amanda.chain(layers.Dense(4, 8), name="m"), inputs={"x": object()})


def test_scalars_and_int64_arrays_are_not_parameters() -> None:
    """A float scalar and an int64 vector held by Constants count no parameters; a float
    vector counts its elements."""
    consts = [amanda.op("Constant", n, [], ["output"], {"value": v}) for n, v in
              [("ratio", np.float32(0.5)), ("shape", np.array([2, 3], np.int64)), ("w", np.ones(5, np.float16))]]
    table = amanda.summary(amanda.Container("Net", "net", children=consts))
    assert [r.params for r in table.rows] == [0, 0, 5] and table.total == 5
