"""Convert the example TensorFlow graph (a dense layer) to ONNX, export it and run it.

The graph is amanda/tensorflow/1.13.1 (Placeholder -> MatMul with a VariableV2 kernel -> Relu).
``amanda.convert`` finds the shipped TensorFlow -> ONNX 17 table (and, for another opset, the
opset adapters after it); the Placeholder and the variable become graph inputs named after their
ops, and ``outputs=`` exposes the Relu as the graph output ``logits``. The name map says where
each TensorFlow value lives in the ONNX graph. onnxruntime runs the model when it is installed;
numpy checks the result either way.
"""

from pathlib import Path

import numpy as np

import amanda
from amanda.namespaces.model_fit import validate
from amanda.rewrite.mapping import load_mapping
from amanda.rewrite.mapping.convert import convert

TF_GRAPH = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "documents" / "tensorflow_dense_graph.yaml"


def main() -> None:
    graph = amanda.load(TF_GRAPH)
    print(f"TensorFlow graph: {graph.namespace}, ops {[op.type for op in graph]}")
    for target in ("amanda/onnx/17", "amanda/onnx/13"):
        onnx_graph, names = convert(graph, target, with_names=True,
                                    outputs={"logits": "dense/Relu:activations"})
        problems = validate(onnx_graph)
        print(f"{target}: ops {[op.type for op in onnx_graph]}, inputs "
              f"{[p.name for p in onnx_graph.inputs]}, {len(problems)} validation problems")
    for tf_name in ("Placeholder:output", "dense/kernel:ref", "dense/MatMul:product", "dense/Relu:activations"):
        print(f"  {tf_name:24} -> {names.resolve(tf_name)}")

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 784)).astype(np.float32)
    kernel = rng.standard_normal((784, 10)).astype(np.float32)
    expected = np.maximum(x @ kernel, 0)
    try:
        import onnxruntime

        from amanda.io.onnx import to_onnx
    except ImportError:
        print("onnxruntime is not installed; skipped running the model")
        return
    model = to_onnx(onnx_graph)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (logits,) = session.run(["logits"], {"Placeholder": x, "dense/kernel": kernel})
    print(f"onnxruntime logits match numpy: {np.allclose(logits, expected, atol=1e-4)}")

    # A mapping table is data: the same kind of rule, written in YAML and applied directly.
    table = load_mapping("""
mapping:
  source: amanda/tensorflow
  target: my/activations
  rules:
    - name: relu
      match: { ops: { $r: Relu } }
      map: { ops: { $r: { type: Rectifier, attrs: { from: "${$r.type}" } } } }
""")
    mapped = table.apply(graph, on_unmatched="pass")
    print(f"custom table: {[(op.type, op.attrs.get('namespace', mapped.namespace)) for op in mapped]}")


if __name__ == "__main__":
    main()
