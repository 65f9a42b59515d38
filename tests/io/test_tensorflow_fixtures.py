"""Real TensorFlow 2.21 / Keras 3 files (tools/gen_tensorflow_fixtures.py, committed so CI needs
no TensorFlow): each imports, validates, has its name scopes as containers, its control inputs
as control edges, its function bodies, its variables' checkpoint values, and survives
``load(dump(g))``. Expected counts come from TensorFlow (each fixture's JSON manifest), expected
values from TensorFlow's outputs (its npz)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("google.protobuf")

import amanda  # noqa: E402
from amanda.containers.container import Container  # noqa: E402
from amanda.containers.flatten import effective_edges  # noqa: E402
from amanda.errors import ArgumentError  # noqa: E402
from amanda.io.tensorflow import endpoint, op_path  # noqa: E402
from amanda.io.tensorflow.saved_model import SAVED_MODEL_ATTR  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "tensorflow"
MANIFESTS = {p.stem: json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))}
GRAPH_FILES = sorted(
    [m[k] for m in MANIFESTS.values() for k in ("frozen", "graphdef", "lowered", "pbtxt") if m.get(k)])
SAVED_MODELS = sorted(m["saved_model"] for m in MANIFESTS.values() if m.get("saved_model"))
BODY_ATTRS = ("cond", "body", "then_branch", "else_branch")


def manifest_of(file: str) -> dict[str, Any]:
    return next(m for m in MANIFESTS.values() if file in (m.get(k) for k in
                ("frozen", "graphdef", "lowered", "pbtxt", "saved_model")))


def graph_level(g: Container) -> list[Container]:
    """The ops of the graph itself: leaves and call containers, not what bodies hold."""
    found, stack = [], list(g.children)
    while stack:
        node = stack.pop()
        if node.children and node.type is None:
            stack += node.children
        else:
            found.append(node)
    return found


def all_types(g: Container, seen: set[int] | None = None) -> Counter:
    """Op types of the graph and of every function body it uses (each body once)."""
    seen = set() if seen is None else seen
    types: Counter = Counter()
    for node in graph_level(g):
        types[node.type] += 1
        bodies = [node.attrs[k] for k in BODY_ATTRS if isinstance(node.attrs.get(k), Container)]
        bodies += list(node.children)
        for body in bodies:
            if id(body) not in seen:
                seen.add(id(body))
                types += all_types(body, seen)
    return types


def test_every_listed_file_exists() -> None:
    assert len(MANIFESTS) == 7
    for file in [*GRAPH_FILES, *SAVED_MODELS]:
        assert (FIXTURES / file).exists(), file
        assert manifest_of(file)["tensorflow"] == "2.21.0"


@pytest.mark.parametrize("file", GRAPH_FILES)
def test_graphdef_imports_with_tensorflows_counts(file: str) -> None:
    """Every node is an op (or call), every function of the library a body, every control input
    a control edge; the vocabulary is chosen from the producer."""
    spec = manifest_of(file)
    counts = spec.get("lowered_counts") if file == spec.get("lowered") else spec
    g = amanda.load(FIXTURES / file)
    assert g.namespace == "amanda/tensorflow/2.21.0"
    assert g.attrs["tensorflow"]["producer"] == spec["producer"]
    assert len(graph_level(g)) == counts["nodes"]
    controls = [e for e in g.edges if e.dst.port == -1]  # the graph's, held at the top by path
    assert all(e.src.port == -1 for e in controls)
    assert len(controls) == counts["control_inputs"]
    types = set(all_types(g))
    want = spec["lowered_op_types"] if file == spec.get("lowered") else spec["op_types"]
    assert types == set(want)
    flat = amanda.load(FIXTURES / file, hierarchy=False)
    assert len(flat.children) == counts["nodes"]
    assert sorted(c.name for c in flat.children) == sorted(
        (c.attrs.get("tf_node") or {}).get("name") or c.name for c in flat.children)


@pytest.mark.parametrize("file", [f for f in GRAPH_FILES if "lowered" not in f] + SAVED_MODELS)
def test_fixture_validates(file: str) -> None:
    assert amanda.validate(amanda.load(FIXTURES / file)) == []


def test_lowered_loop_is_a_cycle_through_next_iteration() -> None:
    """A lowered while loop (NextIteration -> Merge) is the one thing validate reports."""
    g = amanda.load(FIXTURES / "control_flow_lowered.pb")
    problems = amanda.validate(g)
    assert problems and all("acyclic" in p.expected for p in problems)
    ops, _ = effective_edges(g)
    for problem in problems:  # every cycle passes a NextIteration op
        cycle = str(problem.found).removeprefix("the cycle ").split(" -> ")
        assert any(ops[tuple(step.split("/"))].type == "NextIteration" for step in cycle
                   if tuple(step.split("/")) in ops), problem


def test_dense_scopes_and_the_node_that_is_also_a_scope() -> None:
    """``dense/MatMul`` is a node and the scope of ``dense/MatMul/ReadVariableOp``: the scope is
    the container ``MatMul``, the node the op ``MatMul_`` beside it, with its name kept."""
    g = amanda.load(FIXTURES / "dense.pb")
    assert g.name == "dense_graph"
    found = g.select("$..[?name=='dense']")
    assert found.paths == (("dense",),)
    dense = g.child("dense")
    assert dense.attrs["scope"] == "dense"
    assert dense.child("MatMul").child("ReadVariableOp").type == "Identity"
    matmul = dense.child("MatMul_")
    assert matmul.type == "MatMul" and matmul.attrs["tf_node"]["name"] == "dense/MatMul"
    assert matmul.input_names == ("a", "b")
    kernel = dense.child("kernel")
    assert kernel.type == "Const" and kernel.attrs["value"].shape == (4, 3)
    ops, edges = effective_edges(g)
    sources = {(e.dst.op, e.dst.port): e.src.op for e in edges}
    assert sources[(("dense", "MatMul_"), "a")] == ("x",)
    assert sources[(("dense", "MatMul_"), "b")] == ("dense", "MatMul", "ReadVariableOp")


def test_dense_frozen_kernel_computes_tensorflows_output() -> None:
    g = amanda.load(FIXTURES / "dense.pbtxt")
    data = np.load(FIXTURES / "dense.npz")
    kernel = g.child("dense").child("kernel").attrs["value"]
    bias = g.child("dense").child("bias").attrs["value"]
    np.testing.assert_allclose(np.maximum(data["x"] @ kernel + bias, 0), data["output_0"], rtol=1e-6)
    assert g == amanda.load(FIXTURES / "dense.pb")


def test_tf1_variables_initialisers_and_control_dependencies() -> None:
    g = amanda.load(FIXTURES / "tf1_variables.graph.pb")
    layer = g.child("layer")
    w = layer.child("w_")
    assert w.type == "VariableV2" and w.attrs["tf_node"]["name"] == "layer/w"
    assert layer.child("w").child("Assign").type == "Assign"
    assert layer.child("w").child("initial_value").attrs["value"].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    _, edges = effective_edges(g)
    controls = {(e.src.op, e.dst.op) for e in edges if e.dst.port == -1}
    assert (("step", "bump_"), ("step", "MatMul")) in controls
    assert {src for src, dst in controls if dst == ("init",)} == {
        ("layer", n, "Assign") for n in ("w", "b", "counter")}


def test_functional_control_flow_bodies() -> None:
    """While and StatelessIf hold their functions; the loop body calls a function through a
    StatefulPartitionedCall, a call container holding that function."""
    g = amanda.load(FIXTURES / "control_flow.pb")
    spec = MANIFESTS["control_flow"]
    loop = g.child("loop").child("while_")
    assert loop.type == "While"
    body, cond = loop.attrs["body"], loop.attrs["cond"]
    assert {body.name, cond.name} <= set(spec["functions"])
    assert len(body.inputs) == len(loop.inputs) == 6
    call = body.select("$..[?type=='StatefulPartitionedCall']").containers
    assert len(call) == 1 and call[0].attrs["f"] in spec["functions"]
    (step,) = call[0].children
    assert step.name == call[0].attrs["f"] and "tf_function" in step.attrs
    assert [c.type for c in step.children if c.type == "Tanh"] == ["Tanh"]
    branch = g.child("branch").child("cond_")
    assert branch.type == "StatelessIf"
    assert {branch.attrs["then_branch"].name, branch.attrs["else_branch"].name} <= set(spec["functions"])


def _numpy_control_flow(x: np.ndarray, n: int, scale: float) -> np.ndarray:
    y = x
    for _ in range(n):
        y = np.tanh(y * scale + 1.0)
    return y * 2.0 if y.sum() > 0 else y - 1.0


def test_saved_model_variables_hold_checkpoint_values() -> None:
    """Values read from the checkpoint give TensorFlow's outputs (numpy computes the model)."""
    data = np.load(FIXTURES / "control_flow.npz")
    g = amanda.load(FIXTURES / "control_flow.savedmodel")
    assert g.child("scale").type == "VarHandleOp"
    scale = float(g.child("scale").attrs["initial_value"])
    want = _numpy_control_flow(data["x"], int(data["n"]), scale)
    np.testing.assert_allclose(want, data["output_0"], rtol=1e-5)
    info = g.attrs[SAVED_MODEL_ATTR]
    assert info["signature"] == "serving_default" and info["tags"] == ("serve",)
    assert info["inputs"] == {"x": "serving_default_x:0", "n": "serving_default_n:0"}
    dense = amanda.load(FIXTURES / "dense.savedmodel")
    ddata = np.load(FIXTURES / "dense.npz")
    kernel = dense.child("dense").child("kernel").attrs["initial_value"]
    bias = dense.child("dense").child("bias").attrs["initial_value"]
    np.testing.assert_allclose(np.maximum(ddata["x"] @ kernel + bias, 0), ddata["output_0"], rtol=1e-6)


@pytest.mark.parametrize("file", SAVED_MODELS)
def test_every_saved_model_variable_has_its_value(file: str) -> None:
    g = amanda.load(FIXTURES / file)
    found = g.select("$..[?type=='VarHandleOp' || type=='VariableV2']").containers
    assert found
    for var in found:
        value = var.attrs["initial_value"]
        assert value.dtype == np.dtype(var.attrs["dtype"])
        assert value.shape == tuple(var.attrs["shape"])
    assert g.select("$..[?type=='SaveV2' || type=='RestoreV2']").paths == ()


def _without_saved_model(g: Container) -> Container:
    attrs = {k: v for k, v in g.attrs.items() if k != SAVED_MODEL_ATTR}
    return Container(g.type, g.name, children=g.children, edges=g.edges, attrs=attrs)


@pytest.mark.parametrize("file", GRAPH_FILES + SAVED_MODELS)
@pytest.mark.parametrize("suffix", [".pb", ".pbtxt"])
def test_load_dump_load_is_equal(file: str, suffix: str, tmp_path: Path) -> None:
    """A GraphDef holds everything but a SavedModel's signature (the ``tf_saved_model`` attr)."""
    g = amanda.load(FIXTURES / file)
    stem = Path(file).stem  # the top container is named by it
    path = tmp_path / (stem + suffix)
    assert amanda.dump(g, path) is None
    back = amanda.load(path)
    assert back == _without_saved_model(g)
    assert amanda.validate(back) == amanda.validate(_without_saved_model(g))


def test_imported_graphs_run_in_a_session_as_tensorflow_ran_them() -> None:
    """The dense graph and the TF1 graph (variables initialised by running ``init``, then one
    AssignAdd under a control dependency) give TensorFlow's outputs in amanda's Session."""
    for name, file in (("dense", "dense.pb"), ("tf1_variables", "tf1_variables.graph.pb")):
        spec, data = MANIFESTS[name], np.load(FIXTURES / f"{name}.npz")
        g = amanda.load(FIXTURES / file)
        session = amanda.Session(g)
        for op in spec["init"]:
            session.run("/".join(op_path(g, op)))
        feeds = {str(endpoint(g, i["tensor"])): data[i["key"]] for i in spec["inputs"]}
        fetches = [str(endpoint(g, o["tensor"])) for o in spec["outputs"]]
        for got, out in zip(session.run(fetches, feeds), spec["outputs"], strict=True):
            np.testing.assert_allclose(got, data[out["key"]], rtol=1e-6)


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_manifest_tensors_are_endpoints(name: str) -> None:
    """Every input and output tensor TensorFlow named is a port of an imported op."""
    spec = MANIFESTS[name]
    for key, tensor in (("frozen", "tensor"), ("graphdef", "tensor"), ("saved_model", "signature_tensor")):
        if not spec.get(key):
            continue
        g = amanda.load(FIXTURES / spec[key])
        for item in spec["inputs"] + spec["outputs"]:
            found = endpoint(g, item[tensor])
            node = g
            for step in found.op:
                node = node.child(step)
            assert found.port in node.output_names
    with pytest.raises(ArgumentError, match="did you mean"):
        endpoint(amanda.load(FIXTURES / "dense.pb"), "dense/Rleu:0")


@pytest.mark.parametrize("file", ["control_flow.pb", "lstm_classifier.pb", "tf1_variables.graph.pb",
                                  "dense.savedmodel", "transformer_block.savedmodel"])
def test_imported_graphs_survive_yaml_and_then_graphdef(file: str, tmp_path: Path) -> None:
    """An imported graph is an ordinary container: YAML keeps all of it, and the YAML copy
    still writes the same GraphDef."""
    g = amanda.load(FIXTURES / file)
    again = amanda.loads(amanda.dumps(g))
    assert again == g
    path = tmp_path / (Path(file).stem + ".pb")
    amanda.dump(again, path)
    assert amanda.load(path) == _without_saved_model(g)


def test_the_command_line_reads_tensorflow_files(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from amanda.cli import main

    assert main(["validate", str(FIXTURES / "control_flow.savedmodel")]) == 0
    assert main(["select", str(FIXTURES / "dense.pb"), "$..[?type=='MatMul']"]) == 0
    assert "dense/MatMul_" in capsys.readouterr().out
    assert main(["convert", str(FIXTURES / "dense.pb"), str(tmp_path / "dense.pbtxt")]) == 0
    assert amanda.load(tmp_path / "dense.pbtxt") == amanda.load(FIXTURES / "dense.pb")
