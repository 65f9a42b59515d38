"""A real TensorFlow GraphDef (a Keras MobileNetV2, frozen by TensorFlow 2.21) imported, queried,
run in amanda's Session, converted to ONNX and run in onnxruntime, both against the outputs
TensorFlow computed (stored beside the graph in tests/fixtures/tensorflow)."""

import json
from pathlib import Path

import numpy as np

import amanda
from amanda.io.tensorflow import endpoint
from amanda.io.tensorflow.files import load_graphdef
from amanda.rewrite.mapping.convert import convert

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "tensorflow"


def main() -> None:
    spec = json.loads((FIXTURES / "mobilenet_v2.json").read_text(encoding="utf-8"))
    expected = np.load(FIXTURES / "mobilenet_v2.npz")
    # 1. import: name scopes become containers; the namespace comes from versions.producer
    graph = amanda.load(FIXTURES / "mobilenet_v2.pb")
    print(f"imported {spec['frozen']}: namespace {graph.namespace}, {len(graph.children)} top-level children")
    # 2. query: every depthwise convolution, wherever its scope put it
    depthwise = graph.select("$..[?is_op && type == 'DepthwiseConv2dNative']")
    print(f"{len(list(depthwise))} depthwise convolutions, e.g. {'/'.join(next(iter(depthwise))[0])}")
    print(f"validation problems: {len(amanda.validate(graph))}")
    # 3. run in amanda's Session, flat (rules folding constants see them at the op's level)
    flat = load_graphdef(FIXTURES / "mobilenet_v2.pb", hierarchy=False)
    x = expected[spec["inputs"][0]["key"]]
    tensor = spec["outputs"][0]["tensor"]
    (ours,) = amanda.Session(flat).run([str(endpoint(flat, tensor))], {str(endpoint(flat, spec["inputs"][0]["tensor"])): x})
    want = expected[spec["outputs"][0]["key"]]
    print(f"Session vs TensorFlow: max |diff| {np.max(np.abs(ours - want)):.2e}")
    # 4. convert to ONNX 17 (no source=: the graph says its namespace) and run in onnxruntime
    onnx_graph = convert(flat, "amanda/onnx/17", outputs={"probabilities": str(endpoint(flat, tensor))})
    print(f"converted: {len(onnx_graph.children)} ONNX ops, types {sorted({c.type for c in onnx_graph.children})[:6]} ...")
    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime is not installed: skipping the ONNX run")
        return
    from amanda.io.onnx import to_onnx

    session = ort.InferenceSession(to_onnx(onnx_graph).SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(["probabilities"], {session.get_inputs()[0].name: x})
    print(f"onnxruntime vs TensorFlow: max |diff| {np.max(np.abs(got - want)):.2e}")


if __name__ == "__main__":
    main()
