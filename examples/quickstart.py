"""Quickstart: load the example TensorFlow graph, look at its effective view, and round-trip it."""

from pathlib import Path

import amanda

DENSE_GRAPH = """
graph:
  namespace: amanda/tensorflow/1.13.1
  ops:
    - type: Placeholder
      name: Placeholder
      attrs: {shape: [1, 784], dtype: float32}
      output_ports: [{name: output}]
    - type: VariableV2
      name: dense/kernel
      attrs: {shape: [784, 10], dtype: float32}
      output_ports: [{name: ref}]
    - type: MatMul
      name: dense/MatMul
      input_ports: [{name: a}, {name: b}]
      output_ports: [{name: product}]
    - type: Relu
      name: dense/Relu
      input_ports: [{name: features}]
      output_ports: [{name: activations}]
  edges:
    - output_port: { op: Placeholder, port: output }
      input_port: { op: dense/MatMul, port: a }
    - output_port: { op: dense/kernel, port: ref }
      input_port: { op: dense/MatMul, port: b }
    - output_port: { op: dense/MatMul, port: product }
      input_port: { op: dense/Relu, port: features }
"""


def main() -> None:
    graph = amanda.loads(DENSE_GRAPH)
    print("namespace:", graph.namespace)
    print("ops in topological order:", [op.name for op in graph.sorted()])
    flat = amanda.flatten(graph)
    for edge in flat.edges:
        print(f"  {edge.src} -> {edge.dst}")
    # wrap the graph as a subgraph: the effective view is the same dataflow, one level deeper
    wrapped = amanda.Container("Model", "model", children=[graph.with_name("tf")])
    print("leaf paths after wrapping:", list(amanda.flatten(wrapped).ops))
    text = amanda.dumps(graph)
    assert amanda.loads(text) == graph, "YAML round trip must be lossless"
    print(f"YAML round trip ok ({len(text)} characters); JSON:", amanda.loads(amanda.dumps(graph, "json"), "json") == graph)
    out = Path("quickstart_graph.yaml")
    amanda.dump(graph, out)
    print("wrote", out, "and read it back equal:", amanda.load(out) == graph)
    out.unlink()


if __name__ == "__main__":
    main()
