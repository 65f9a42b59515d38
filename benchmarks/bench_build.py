"""Building a ResNet-50 from layers against building the same graph with onnx.helper.

amanda: ``amanda.layers`` applied to symbolic values (``Conv``, ``BatchNorm``, ``relu``,
``MaxPool``, ``GlobalAvgPool``, ``Dense``; residual sums with ``ops.Add``), ``amanda.model``, then
``layers.seeded`` (which finds every weight already keyed and draws nothing again). Weights are
drawn as the layers draw them (He-normal convolutions, Glorot-uniform dense), every type is
inferred as the layers are applied.

Baseline: the same nodes (Conv, BatchNormalization, Relu, MaxPool, Add, GlobalAveragePool,
Flatten, MatMul, Add) made with ``onnx.helper.make_node``, initializers drawn by the same rules with
numpy and wrapped by ``numpy_helper.from_array``, then ``make_graph`` and ``make_model``.

Both are built in the same run, alternately, and timed as medians. The amanda model is checked:
its parameter count equals the baseline's initializers' (plus BatchNorm's running statistics,
which both hold), and its output type is ``float32[batch,1000]``. Target: at most 3x.

    python benchmarks/bench_build.py [--repeat 5] [--profile]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import median_time, table

import amanda
from amanda import Input, layers, ops

STAGES = [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]  # width, blocks, first stride


def resnet50_layers() -> amanda.Container:
    """ResNet-50 (v1.5: the stride on the 3x3 convolution) from amanda layers."""
    x = Input("image", "float32", ("batch", 3, 224, 224))

    def conv_bn(v: Any, cin: int, cout: int, k: int, stride: int, name: str, relu: bool = True) -> Any:
        v = layers.Conv(cin, cout, k, stride=stride, padding=k // 2, use_bias=False, name=f"{name}_conv")(v)
        v = layers.BatchNorm(cout, name=f"{name}_bn")(v)
        return layers.relu(name=f"{name}_relu")(v) if relu else v

    v = conv_bn(x, 3, 64, 7, 2, "stem")
    v = layers.MaxPool(3, 2, 1, name="stem_pool")(v)
    cin = 64
    for s, (width, blocks, stride) in enumerate(STAGES):
        for b in range(blocks):
            name = f"s{s}b{b}"
            step = stride if b == 0 else 1
            h = conv_bn(v, cin, width, 1, 1, f"{name}_a")
            h = conv_bn(h, width, width, 3, step, f"{name}_b")
            h = conv_bn(h, width, width * 4, 1, 1, f"{name}_c", relu=False)
            short = conv_bn(v, cin, width * 4, 1, step, f"{name}_down", relu=False) if b == 0 else v
            v = layers.relu(name=f"{name}_out")(ops.Add(h, short, name=f"{name}_add"))
            cin = width * 4
    v = layers.GlobalAvgPool(name="pool")(v)
    logits = layers.Dense(cin, 1000, name="fc")(v)
    return layers.seeded(amanda.model([x], {"logits": logits}, name="resnet50"), 0)


def resnet50_onnx() -> Any:
    """The same graph with onnx.helper and numpy initializers."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits = [], []

    def init(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def conv_bn(v: str, cin: int, cout: int, k: int, stride: int, name: str, relu: bool = True) -> str:
        w = init(f"{name}_w", rng.standard_normal((cout, cin, k, k)) * np.sqrt(2 / (cin * k * k)))
        nodes.append(helper.make_node("Conv", [v, w], [f"{name}_c"], kernel_shape=[k, k], strides=[stride] * 2,
                                      pads=[k // 2] * 4, dilations=[1, 1], group=1))
        stats = [init(f"{name}_{p}", np.full(cout, fill)) for p, fill in
                 (("scale", 1.0), ("bias", 0.0), ("mean", 0.0), ("var", 1.0))]
        nodes.append(helper.make_node("BatchNormalization", [f"{name}_c", *stats], [f"{name}_n"], epsilon=1e-5,
                                      momentum=0.9))
        if not relu:
            return f"{name}_n"
        nodes.append(helper.make_node("Relu", [f"{name}_n"], [f"{name}_r"]))
        return f"{name}_r"

    v = conv_bn("image", 3, 64, 7, 2, "stem")
    nodes.append(helper.make_node("MaxPool", [v], ["stem_pool"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
    v, cin = "stem_pool", 64
    for s, (width, blocks, stride) in enumerate(STAGES):
        for b in range(blocks):
            name = f"s{s}b{b}"
            step = stride if b == 0 else 1
            h = conv_bn(v, cin, width, 1, 1, f"{name}_a")
            h = conv_bn(h, width, width, 3, step, f"{name}_b")
            h = conv_bn(h, width, width * 4, 1, 1, f"{name}_c", relu=False)
            short = conv_bn(v, cin, width * 4, 1, step, f"{name}_down", relu=False) if b == 0 else v
            nodes.append(helper.make_node("Add", [h, short], [f"{name}_sum"]))
            nodes.append(helper.make_node("Relu", [f"{name}_sum"], [f"{name}_out"]))
            v, cin = f"{name}_out", width * 4
    nodes.append(helper.make_node("GlobalAveragePool", [v], ["pooled"]))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["flat"], axis=1))
    limit = np.sqrt(6 / (cin + 1000))
    nodes.append(helper.make_node("MatMul", ["flat", init("fc_w", rng.uniform(-limit, limit, (cin, 1000)))], ["mm"]))
    nodes.append(helper.make_node("Add", ["mm", init("fc_b", np.zeros(1000))], ["logits"]))
    graph = helper.make_graph(nodes, "resnet50", [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                                                ["batch", 3, 224, 224])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1000])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def count_layers(model: amanda.Container) -> int:
    return sum(1 for c in model.children if not c.is_op)


def check(model: amanda.Container, proto: Any) -> None:
    """Same parameters; the model's output is typed float32[batch,1000]."""
    from onnx import numpy_helper

    want = sum(numpy_helper.to_array(t).size for t in proto.graph.initializer)
    got = amanda.summary(model).total
    assert got == want, (got, want)
    assert str(model.outputs[0].attrs["shape"]) == "('batch', 1000)", model.outputs[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="print the top of a cProfile of the amanda build")
    args = parser.parse_args()
    model, proto = resnet50_layers(), resnet50_onnx()
    check(model, proto)
    print(f"ResNet-50: {count_layers(model)} layers, {amanda.summary(model).total:,} parameters, "
          f"{len(proto.graph.node)} ONNX nodes")
    pairs = [(median_time(resnet50_layers, 1), median_time(resnet50_onnx, 1)) for _ in range(args.repeat)]
    ours, base = (statistics.median(times) for times in zip(*pairs))  # alternated: both see the same load
    print(table([("ResNet-50 built from layers (weights included)", ours, f"onnx.helper {base:.2f} s",
                  ours / base, "<= 3x")]))
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(resnet50_layers)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
