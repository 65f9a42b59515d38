"""TensorFlow graphs in a Session: converted where kernels are lacking, state kept natively."""

import numpy as np
import pytest

import amanda
from amanda import Container, Edge, op
from amanda.errors import ExecutionError

TF_GRAPH = "tests/fixtures/documents/tensorflow_dense_graph.yaml"
TF = "amanda/tensorflow/1.13.1"


def test_dense_graph_runs_with_its_own_names():
    """The example TensorFlow graph fetches dense/Relu:activations fed by Placeholder:output and dense/kernel:ref."""
    graph = amanda.load(TF_GRAPH)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 784)).astype(np.float32)
    w = rng.standard_normal((784, 10)).astype(np.float32)
    (y,) = amanda.Session(graph).run(["dense/Relu:activations"], {"Placeholder:output": x, "dense/kernel:ref": w})
    assert y.shape == (1, 10) and np.allclose(y, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)


def counter(control_edge: bool) -> Container:
    """v = 0 by `init`; `inc` adds 1; `read` is Identity(v), after `inc` when control_edge."""
    children = [
        op("VariableV2", "v", [], ["ref"], {"shape": (), "dtype": "float32", "container": "", "shared_name": ""}),
        op("Const", "zero", [], ["output"], {"value": np.float32(0), "dtype": "float32"}),
        op("Const", "one", [], ["output"], {"value": np.float32(1), "dtype": "float32"}),
        op("Assign", "init", ["ref", "value"], ["output_ref"], {"T": "float32"}),
        op("AssignAdd", "inc", ["ref", "value"], ["output_ref"], {"T": "float32"}),
        op("Identity", "read", ["input"], ["output"], {"T": "float32"}),
    ]
    edges = [("v:ref", "init:ref"), ("zero:output", "init:value"), ("v:ref", "inc:ref"),
             ("one:output", "inc:value"), ("v:ref", "read:input")]
    if control_edge:
        edges.append(("inc:-1", "read:-1"))
    return Container(children=children, edges=edges, attrs={"namespace": TF})


def test_variables_keep_state_and_control_edges_order_updates():
    """With inc -> read, two runs of read give 1.0 then 2.0 after init; without it, 0.0."""
    session = amanda.Session(counter(control_edge=True))
    assert session.run(["init"]) == [None]
    assert [float(session.run(["read:output"])[0]) for _ in range(2)] == [1.0, 2.0]
    pruned = amanda.Session(counter(control_edge=False))
    pruned.run(["init"])
    assert float(pruned.run(["read:output"])[0]) == 0.0
    assert float(pruned.run(["read:output"])[0]) == 0.0


def test_fetching_a_reference_gives_the_value_and_uninitialised_reads_fail():
    """A fetched ref reads as the variable's value; reading before any Assign names the variable."""
    session = amanda.Session(counter(control_edge=True))
    with pytest.raises(ExecutionError, match="never assigned"):
        session.run(["read:output"])
    session.run(["init"])
    assert float(session.run(["init:output_ref"])[0]) == 0.0


def test_unfed_placeholder_is_named():
    """Running a TF graph without feeding its Placeholder names what to feed."""
    with pytest.raises(amanda.AmandaError, match="Placeholder"):
        amanda.Session(amanda.load(TF_GRAPH)).run(["dense/Relu:activations"], {"dense/kernel:ref": np.zeros((784, 10), np.float32)})


def test_trained_variable_feeds_a_converted_layer():
    """A variable assigned in the session feeds the converted MatMul through a read op."""
    graph = amanda.load(TF_GRAPH)
    w = np.full((784, 10), 0.5, np.float32)
    init = op("Assign", "init", ["ref", "value"], ["output_ref"], {"T": "float32"})
    value = op("Const", "w0", [], ["output"], {"value": w, "dtype": "float32"})
    graph = graph.evolve(children=[*graph.children, value, init],
                         edges=[*graph.edges, Edge("dense/kernel:ref", "init:ref"), Edge("w0:output", "init:value")])
    session = amanda.Session(graph)
    session.run(["init"])
    x = np.ones((1, 784), np.float32)
    (y,) = session.run(["dense/Relu:activations"], {"Placeholder:output": x})
    assert np.allclose(y, 392.0)
