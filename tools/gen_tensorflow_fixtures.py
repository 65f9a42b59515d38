"""Write small TensorFlow models, once, into tests/fixtures/tensorflow/, so that CI checks the
TensorFlow importer (and later its executor and conversion) without TensorFlow installed.

    pip install tensorflow-cpu keras      # 2.21 / Keras 3 were used for the committed files
    python tools/gen_tensorflow_fixtures.py

Every model has random weights from a fixed seed and small widths. For each model ``<name>``
the script writes, as the model allows:

- ``<name>.pb``: a frozen ``GraphDef`` (binary): variables folded into ``Const`` nodes by
  ``convert_variables_to_constants_v2`` (TF2) or ``graph_util.convert_variables_to_constants``
  (TF1); ``<name>.pbtxt`` the same graph in protobuf text format (the dense graph only);
- ``<name>.savedmodel/``: a SavedModel (``saved_model.pb`` + ``variables/``) with a
  ``serving_default`` signature;
- ``<name>.npz``: the inputs and TensorFlow's own outputs, keyed as the manifest says;
- ``<name>.json``: the manifest (shape documented in docs/tensorflow.md)::

      {"name": ..., "tensorflow": "2.21.0", "keras": "3.x", "description": ...,
       "frozen": "<name>.pb" | null, "pbtxt": "<name>.pbtxt" | null,
       "graphdef": "<name>.graph.pb" | null,            # an unfrozen GraphDef (TF1 graph)
       "saved_model": "<name>.savedmodel" | null, "signature": "serving_default" | null,
       "inputs":  [{"key": npz key, "tensor": "x:0" in the frozen graph,
                    "signature_tensor": "serving_default_x:0", "dtype": ..., "shape": [...]}],
       "outputs": [{"key": npz key, "tensor": "Identity:0", "signature_key": "output_0",
                    "signature_tensor": "StatefulPartitionedCall:0", "dtype": ..., "shape": [...]}],
       "init": ["init"] | [], "producer": GraphDef versions.producer,
       "op_types": {type: count over the graph and its library}, "nodes": graph-level nodes,
       "control_inputs": graph-level control inputs, "functions": [library function names],
       "lowered": ..., "lowered_op_types": ..., "lowered_counts": {...}}   # control_flow only

The ``control_flow`` model is written twice: ``control_flow.pb`` keeps ``While``/``StatelessIf``
functional, with their bodies in the function library (and a ``PartitionedCall`` inside the loop
body); ``control_flow_lowered.pb`` has them lowered to ``Switch``/``Merge``/``Enter``/``Exit``/
``NextIteration``/``LoopCond``. Nothing here is imported by amanda or its tests.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import saved_model_pb2  # noqa: E402
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2,
)

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "tensorflow"
SEED = 0


# -- the models -------------------------------------------------------------------------------


def mobilenet_v2() -> keras.Model:
    """keras.applications.MobileNetV2, alpha 0.35, 32x32 input, no top, global average pool and a
    Dense(10) head (the stock top would add 1280x1000 weights)."""
    base = keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, include_top=False,
                                          weights=None, pooling="avg")
    out = keras.layers.Dense(10, name="predictions")(base.output)
    return keras.Model(base.input, out, name="mobilenetv2_035")


def _bottleneck(x: Any, filters: int, stride: int, name: str) -> Any:
    layers = keras.layers
    shortcut = x
    if stride != 1 or x.shape[-1] != 4 * filters:
        shortcut = layers.Conv2D(4 * filters, 1, strides=stride, name=name + "_0_conv")(x)
        shortcut = layers.BatchNormalization(epsilon=1.001e-5, name=name + "_0_bn")(shortcut)
    x = layers.Conv2D(filters, 1, strides=stride, name=name + "_1_conv")(x)
    x = layers.BatchNormalization(epsilon=1.001e-5, name=name + "_1_bn")(x)
    x = layers.Activation("relu", name=name + "_1_relu")(x)
    x = layers.Conv2D(filters, 3, padding="same", name=name + "_2_conv")(x)
    x = layers.BatchNormalization(epsilon=1.001e-5, name=name + "_2_bn")(x)
    x = layers.Activation("relu", name=name + "_2_relu")(x)
    x = layers.Conv2D(4 * filters, 1, name=name + "_3_conv")(x)
    x = layers.BatchNormalization(epsilon=1.001e-5, name=name + "_3_bn")(x)
    x = layers.Add(name=name + "_add")([shortcut, x])
    return layers.Activation("relu", name=name + "_out")(x)


def resnet_small() -> keras.Model:
    """ResNet50's structure (stem conv 7x7/2 + BN + ReLU + max pool, bottleneck stages with
    projection shortcuts, layer names as keras.applications.ResNet50 spells them) at widths of
    8 to 32 and two blocks per stage over three stages."""
    layers = keras.layers
    inp = keras.Input((32, 32, 3), name="input")
    x = layers.ZeroPadding2D(3, name="conv1_pad")(inp)
    x = layers.Conv2D(8, 7, strides=2, name="conv1_conv")(x)
    x = layers.BatchNormalization(epsilon=1.001e-5, name="conv1_bn")(x)
    x = layers.Activation("relu", name="conv1_relu")(x)
    x = layers.ZeroPadding2D(1, name="pool1_pad")(x)
    x = layers.MaxPooling2D(3, strides=2, name="pool1_pool")(x)
    for stage, (filters, stride) in enumerate([(4, 1), (8, 2), (8, 2)], start=2):
        for block in (1, 2):
            x = _bottleneck(x, filters, stride if block == 1 else 1, f"conv{stage}_block{block}")
    x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
    out = layers.Dense(10, activation="softmax", name="predictions")(x)
    return keras.Model(inp, out, name="resnet_small")


def lstm_classifier() -> keras.Model:
    """Token ids -> Embedding(50, 8) -> LSTM(8) -> Dense(2, softmax)."""
    inp = keras.Input((6,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(50, 8, name="embedding")(inp)
    x = keras.layers.LSTM(8, name="lstm")(x)
    out = keras.layers.Dense(2, activation="softmax", name="dense")(x)
    return keras.Model(inp, out, name="lstm_classifier")


def transformer_block() -> keras.Model:
    """A post-norm encoder block: MultiHeadAttention(2 heads, key_dim 4) + residual + LayerNorm,
    Dense(16, relu) -> Dense(8) + residual + LayerNorm, on (batch, 5, 8)."""
    layers = keras.layers
    inp = keras.Input((5, 8), name="x")
    att = layers.MultiHeadAttention(num_heads=2, key_dim=4, name="attention")(inp, inp)
    x = layers.LayerNormalization(epsilon=1e-6, name="norm1")(layers.Add(name="add1")([inp, att]))
    ffn = layers.Dense(16, activation="relu", name="ffn_1")(x)
    ffn = layers.Dense(8, name="ffn_2")(ffn)
    out = layers.LayerNormalization(epsilon=1e-6, name="norm2")(layers.Add(name="add2")([x, ffn]))
    return keras.Model(inp, out, name="transformer_block")


class ControlFlow(tf.Module):
    """A tf.function with a tf.while_loop (whose body calls another tf.function, kept as a
    PartitionedCall) and a tf.cond, over one variable."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = tf.Variable(np.float32(0.5), name="scale")

    @tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32, name="x"),
                                  tf.TensorSpec([], tf.int32, name="n")])
    def __call__(self, x: tf.Tensor, n: tf.Tensor) -> tf.Tensor:
        @tf.function(experimental_attributes={"_noinline": True})
        def step(v: tf.Tensor) -> tf.Tensor:
            return tf.tanh(v * self.scale + 1.0)

        with tf.name_scope("loop"):
            _, y = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, step(v)),
                                 (tf.constant(0), x))
        with tf.name_scope("branch"):
            return tf.cond(tf.reduce_sum(y) > 0.0, lambda: y * 2.0, lambda: y - 1.0)


# -- writing ----------------------------------------------------------------------------------


def _spec_entry(key: str, tensor: Any, value: np.ndarray) -> dict[str, Any]:
    return {"key": key, "tensor": tensor.name, "dtype": str(value.dtype), "shape": list(value.shape)}


def _op_types(graph_def: Any) -> dict[str, int]:
    types = Counter(node.op for node in graph_def.node)
    for fn in graph_def.library.function:
        types.update(node.op for node in fn.node_def)
    return dict(sorted(types.items()))


def _counts(graph_def: Any) -> dict[str, Any]:
    """What a test checks an import against: node and control-input counts (graph level, with
    duplicates of one control input counted once), the library's functions."""
    return {"nodes": len(graph_def.node),
            "control_inputs": sum(len({i for i in n.input if i.startswith("^")}) for n in graph_def.node),
            "functions": sorted(fn.signature.name for fn in graph_def.library.function)}


def _write_frozen(path: Path, func: Any, lower: bool) -> tuple[Any, Any]:
    frozen = convert_variables_to_constants_v2(func, lower_control_flow=lower)
    graph_def = frozen.graph.as_graph_def()
    path.write_bytes(graph_def.SerializeToString(deterministic=True))  # attr maps in key order
    return frozen, graph_def


def _signature(saved_dir: Path) -> tuple[dict[str, str], dict[str, str]]:
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((saved_dir / "saved_model.pb").read_bytes())
    sig = proto.meta_graphs[0].signature_def["serving_default"]
    return ({k: v.name for k, v in sig.inputs.items()}, {k: v.name for k, v in sig.outputs.items()})


def _manifest(name: str, description: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": name, "tensorflow": tf.__version__, "keras": keras.__version__,
                            "description": description, "frozen": None, "pbtxt": None,
                            "graphdef": None, "saved_model": None, "signature": None, "init": []}
    base.update(fields)
    return base


def export_tf2(name: str, description: str, module: Any, fn: Any, inputs: dict[str, np.ndarray],
               *, lowered_too: bool = False, saved_model: bool = True) -> None:
    """Freeze ``fn`` (a tf.function with an input signature), save ``module`` as a SavedModel with
    ``fn`` as its serving signature (unless ``saved_model`` is false), run both and write npz +
    manifest."""
    concrete = fn.get_concrete_function()
    # control flow stays functional (While/If with bodies in the library), except in the
    # "_lowered" copy, which has Switch/Merge/Enter/Exit/NextIteration/LoopCond instead
    frozen, graph_def = _write_frozen(OUT / f"{name}.pb", concrete, lower=False)
    saved = OUT / f"{name}.savedmodel"
    shutil.rmtree(saved, ignore_errors=True)
    sig_in: dict[str, str] = {}
    sig_out: dict[str, str] = {}
    if saved_model:
        tf.saved_model.save(module, str(saved), signatures={"serving_default": concrete})
        sig_in, sig_out = _signature(saved)
    results = concrete(**{k: tf.constant(v) for k, v in inputs.items()})
    results = results if isinstance(results, (list, tuple)) else [results]
    arrays: dict[str, np.ndarray] = dict(inputs)
    ins = []
    for key, tensor in zip(inputs, frozen.inputs, strict=True):
        entry = _spec_entry(key, tensor, inputs[key])
        if saved_model:
            entry["signature_tensor"] = sig_in[key]
        ins.append(entry)
    outs = []
    sig_keys = sorted(sig_out) or [""] * len(results)
    for i, (tensor, value) in enumerate(zip(frozen.outputs, results, strict=True)):
        arrays[f"output_{i}"] = value.numpy()
        entry = _spec_entry(f"output_{i}", tensor, arrays[f"output_{i}"])
        if saved_model:
            entry["signature_key"] = sig_keys[i]
            entry["signature_tensor"] = sig_out[sig_keys[i]]
        outs.append(entry)
    # the frozen graph computes what the function computes
    check = frozen(*[tf.constant(inputs[k]) for k in inputs])
    check = check if isinstance(check, (list, tuple)) else [check]
    for i, value in enumerate(check):
        np.testing.assert_allclose(value.numpy(), arrays[f"output_{i}"], rtol=1e-5, atol=1e-6)
    manifest = _manifest(name, description, frozen=f"{name}.pb",
                         saved_model=saved.name if saved_model else None,
                         signature="serving_default" if saved_model else None, inputs=ins, outputs=outs,
                         producer=graph_def.versions.producer, op_types=_op_types(graph_def), **_counts(graph_def))
    if lowered_too:
        _, lowered_def = _write_frozen(OUT / f"{name}_lowered.pb", concrete, lower=True)
        manifest["lowered"] = f"{name}_lowered.pb"
        manifest["lowered_op_types"] = _op_types(lowered_def)
        manifest["lowered_counts"] = _counts(lowered_def)
    np.savez(OUT / f"{name}.npz", **arrays)
    (OUT / f"{name}.json").write_text(json.dumps(manifest, indent=1) + "\n")


def export_keras(name: str, description: str, build: Callable[[], keras.Model],
                 inputs: dict[str, np.ndarray], saved_model: bool) -> None:
    model = build()
    (key, value), = inputs.items()
    spec = tf.TensorSpec((None, *value.shape[1:]), value.dtype, name=key)
    module = tf.Module()
    # track the weights only: tracking the Keras model itself would save every layer's call
    # functions too and make saved_model.pb ten times larger
    module.weights = [w.value for w in model.weights]
    serve = tf.function(lambda x: model(x, training=False), input_signature=[spec])
    export_tf2(name, description, module, serve, inputs, saved_model=saved_model)


# -- TF1 graphs -------------------------------------------------------------------------------


def _tf1_dense_graph() -> tuple[Any, Any]:
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(SEED)
        x = v1.placeholder(tf.float32, [None, 4], name="x")
        with v1.variable_scope("dense"):
            kernel = v1.get_variable("kernel", [4, 3], initializer=v1.random_normal_initializer())
            bias = v1.get_variable("bias", [3], initializer=v1.random_normal_initializer())
            y = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, kernel), bias), name="Relu")
    return graph, (x, y)


def export_dense() -> None:
    """The classic one-layer dense GraphDef: ``dense/kernel``, ``dense/MatMul``, ``dense/BiasAdd``,
    ``dense/Relu``, frozen (binary and text) and as a TF1 SavedModel (RestoreV2 in it)."""
    v1 = tf.compat.v1
    graph, (x, y) = _tf1_dense_graph()
    feed = np.random.default_rng(SEED).standard_normal((2, 4)).astype(np.float32)
    saved = OUT / "dense.savedmodel"
    shutil.rmtree(saved, ignore_errors=True)
    with v1.Session(graph=graph) as sess:
        sess.run(v1.global_variables_initializer())
        out = sess.run(y, {x: feed})
        frozen = v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), [y.op.name])
        builder = v1.saved_model.Builder(str(saved))
        sig = v1.saved_model.predict_signature_def({"x": x}, {"y": y})
        builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"serving_default": sig})
        builder.save()
    (OUT / "dense.pb").write_bytes(frozen.SerializeToString(deterministic=True))
    (OUT / "dense.pbtxt").write_text(str(frozen))
    sig_in, sig_out = _signature(saved)
    np.savez(OUT / "dense.npz", x=feed, output_0=out)
    manifest = _manifest(
        "dense", "one dense layer, TF1 style (dense/kernel, dense/MatMul), frozen and saved",
        frozen="dense.pb", pbtxt="dense.pbtxt", saved_model=saved.name, signature="serving_default",
        inputs=[dict(_spec_entry("x", x, feed), signature_tensor=sig_in["x"])],
        outputs=[dict(_spec_entry("output_0", y, out), signature_key="y",
                      signature_tensor=sig_out["y"])],
        producer=frozen.versions.producer, op_types=_op_types(frozen), **_counts(frozen))
    (OUT / "dense.json").write_text(json.dumps(manifest, indent=1) + "\n")


def export_tf1_variables() -> None:
    """A TF1 graph, not frozen: variables with initialisers (``init`` groups them), an update
    ``Assign`` under a control dependency, and a read after it; the GraphDef is written as is."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [2, 2], name="x")
        with v1.variable_scope("layer"):
            w = v1.Variable(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), name="w", use_resource=False)
            b = v1.Variable(np.array([0.5, -0.5], np.float32), name="b", use_resource=False)
            counter = v1.Variable(np.float32(0.0), name="counter", use_resource=False)
        with tf.name_scope("step"):
            bump = v1.assign_add(counter, 1.0, name="bump")
            with tf.control_dependencies([bump]):
                y = tf.add(tf.matmul(x, w), b, name="y")
                z = tf.multiply(y, counter.read_value() if hasattr(counter, "read_value")
                                else tf.identity(counter), name="z")
        init = v1.global_variables_initializer()
    feed = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    with v1.Session(graph=graph) as sess:
        sess.run(init)
        y_val, z_val = sess.run([y, z], {x: feed})
    graph_def = graph.as_graph_def()
    (OUT / "tf1_variables.graph.pb").write_bytes(graph_def.SerializeToString(deterministic=True))
    np.savez(OUT / "tf1_variables.npz", x=feed, output_0=y_val, output_1=z_val)
    manifest = _manifest(
        "tf1_variables", "TF1 graph with VariableV2, Assign initialisers, an AssignAdd under a "
        "control dependency; run init first, then fetch y and z once",
        graphdef="tf1_variables.graph.pb", init=[init.name],
        inputs=[_spec_entry("x", x, feed)],
        outputs=[_spec_entry("output_0", y, y_val), _spec_entry("output_1", z, z_val)],
        producer=graph_def.versions.producer, op_types=_op_types(graph_def), **_counts(graph_def))
    (OUT / "tf1_variables.json").write_text(json.dumps(manifest, indent=1) + "\n")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    keras.utils.set_random_seed(SEED)
    export_dense()
    export_tf1_variables()
    # MobileNetV2's 0.4M weights make a 1.9 MB frozen graph: no SavedModel copy of them as well
    keras_models: list[tuple[str, str, Callable[[], keras.Model], dict[str, np.ndarray], bool]] = [
        ("mobilenet_v2", "keras.applications.MobileNetV2(alpha=0.35) at 32x32, Dense(10) head",
         mobilenet_v2, {"x": rng.standard_normal((1, 32, 32, 3)).astype(np.float32)}, False),
        ("resnet_small", "ResNet50-style bottleneck net at widths 8-32", resnet_small,
         {"x": rng.standard_normal((1, 32, 32, 3)).astype(np.float32)}, True),
        ("lstm_classifier", "Embedding -> LSTM(8) -> Dense(2) text classifier", lstm_classifier,
         {"x": rng.integers(0, 50, (2, 6)).astype(np.int32)}, True),
        ("transformer_block", "MultiHeadAttention + LayerNormalization encoder block",
         transformer_block, {"x": rng.standard_normal((2, 5, 8)).astype(np.float32)}, True),
    ]
    for name, description, build, inputs, saved in keras_models:
        keras.utils.set_random_seed(SEED)
        export_keras(name, description, build, inputs, saved)
    module = ControlFlow()
    export_tf2("control_flow", "tf.function with tf.while_loop (calling a tf.function) and tf.cond; "
               "functional While/If in .pb, lowered in _lowered.pb", module, module.__call__,
               {"x": rng.standard_normal((2, 3)).astype(np.float32), "n": np.array(3, np.int32)},
               lowered_too=True)
    for path in sorted(OUT.rglob("*")):
        if path.is_file():
            print(f"{path.stat().st_size:>9}  {path.relative_to(OUT)}")


if __name__ == "__main__":
    main()
