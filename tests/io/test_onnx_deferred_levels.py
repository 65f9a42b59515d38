"""A nested ONNX import makes each module container's level when it is first opened: the tree
is indistinguishable from one built at once (equality, hashing, fields, uids, invariants), the
file's faults are still reported at load, and threads opening one level see the same children."""

from __future__ import annotations

import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import amanda  # noqa: E402
from amanda.containers.container import Container  # noqa: E402
from amanda.containers.deferred import deferred, is_deferred, open_level  # noqa: E402
from amanda.containers.edge import Port  # noqa: E402
from amanda.containers.traverse import walk  # noqa: E402
from amanda.containers.values import EMPTY, attrs_equal  # noqa: E402
from amanda.errors import FormatError  # noqa: E402
from amanda.io.onnx import hierarchy as onnx_hierarchy  # noqa: E402
from amanda.io.onnx import read_graph as onnx_read_graph  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402
from amanda.io.onnx.pending import PendingOp, can_wait, pending_op  # noqa: E402
from tests.fixtures.onnx import hierarchy_models as fx  # noqa: E402
from tests.io.test_nest_levels import eager_nest  # noqa: E402


def _eager(path, monkeypatch) -> Container:  # noqa: ANN001
    """The same file imported with every op and level built at once (the design before)."""
    with monkeypatch.context() as patch:
        patch.setattr(onnx_read_graph, "pending_op", lambda *args, **kwargs: None)
        patch.setattr(onnx_hierarchy, "nest_levels", eager_nest)
        return amanda.load(path)


def _fields(node: Container) -> tuple:
    return (node.type, node.name, node.inputs, node.outputs, node.controls, tuple(node.edges),
            tuple(node.tombstones), tuple(c.name for c in node.children))


@pytest.mark.parametrize(("model", "kind"), fx.CASES)
def test_deferred_tree_equals_the_eager_tree(model: str, kind: str, monkeypatch) -> None:  # noqa: ANN001
    """Level by level, every field of every container equals the eager import's, and so do
    equality and hashing of the whole tree (levels opened by the walk or by ``==`` alike)."""
    lazy, eager = amanda.load(fx.path(model, kind)), _eager(fx.path(model, kind), monkeypatch)
    assert any(is_deferred(c) for c in lazy.children)
    assert not any(is_deferred(c) for c in eager.children)
    assert hash(lazy) == hash(eager) and lazy == eager
    again = amanda.load(fx.path(model, kind))
    pairs = list(zip(walk(again), walk(eager), strict=True))
    assert pairs and all(a[0] == b[0] and _fields(a[1]) == _fields(b[1]) for a, b in pairs)
    assert all(attrs_equal(a[1]._attrs, b[1]._attrs) for a, b in pairs)
    assert not any(is_deferred(node) for _, node, _ in walk(again))
    amanda.validate(again)


def test_levels_open_when_read_and_keep_their_uids() -> None:
    """A level is made on its first read and stays as made: uids read before and after
    opening agree, a Session runs the tree, and queries open only what they visit."""
    tree = amanda.load(fx.path("gpt2", "torchscript"))
    block = tree.descendant(("transformer",))
    assert not is_deferred(tree) and is_deferred(block)  # reached, not opened
    inner = [c for c in block.children if is_deferred(c)]
    assert type(block) is Container
    assert inner, "the transformer's blocks are not opened by opening the transformer"
    uid = inner[0].uid
    assert inner[0].children is inner[0].children and inner[0].uid == uid
    assert type(inner[0]) is Container and open_level(inner[0]) is inner[0]
    got = amanda.Session(tree).run(fx.info("gpt2")["outputs"], fx.feeds("gpt2"))
    for ours, theirs in zip(got, fx.expected("gpt2"), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_threads_opening_one_level_see_the_same_children() -> None:
    """Eight threads opening the same deferred level all get the very same child objects."""
    tree = amanda.load(fx.path("mobilenet", "torchscript"))
    target = next(c for c in tree.children if is_deferred(c))
    start, seen = threading.Barrier(8), []

    def read() -> None:
        start.wait()
        seen.append([id(c) for c in target.children])

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 8 and all(s == seen[0] for s in seen) and seen[0]


def test_deferred_container_unit() -> None:
    """``deferred`` calls ``make`` once, on the first read of children, edges or a child."""
    calls = []
    relu = amanda.op("Relu", "r", inputs=["x"], outputs=["y"])
    built = Container("Block", "b", inputs=["x"], outputs=["y"], children=[relu],
                      edges=[("b:x", "r:x"), ("r:y", "b:y")], uid="u")

    def make():  # noqa: ANN202
        calls.append(1)
        return [relu], list(built.edges)

    made = deferred("Block", "b", (Port("x"),), (Port("y"),), EMPTY, "u", make)
    assert is_deferred(made) and made.type == "Block" and made.input_names == ("x",) and calls == []
    assert made.has_child("r") and calls == [1]
    assert made.child("r") is relu and len(made.edges) == 2 and calls == [1]
    assert made == built and hash(made) == hash(built) and made.uid == "u"
    other = deferred("Block", "b", (Port("x"),), (Port("y"),), EMPTY, "v", make)
    assert hash(other) == hash(built) and other == built and not is_deferred(other)
    amanda.validate(other)


def _scoped_model(bad: str | None = None) -> onnx.ModelProto:
    """x -> /block/Relu -> /block/Neg -> y (two ops of module ``block``)."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="/block/Relu"),
             helper.make_node("Neg", [bad or "a"], ["y"], name="/block/Neg")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_faults_are_reported_at_load() -> None:
    """A node reading an undefined value inside a module is refused by the import itself."""
    with pytest.raises(FormatError, match="nowhere"):
        from_onnx(_scoped_model("nowhere"))
    tree = from_onnx(_scoped_model())
    assert is_deferred(tree.child("block")) and tree.child("block").child("Neg").type == "Neg"


def test_flat_graphs_have_no_ops_left_to_build() -> None:
    """A graph without scopes imports flat, every op built, under ``hierarchy='auto'``."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    flat = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8))
    assert all(type(c) is Container for c in flat.children)


def test_pending_ops_wait_only_when_nothing_is_left_to_check() -> None:
    """An op waits unless it has an attribute amanda interprets (but ``initializer: true``),
    a port name twice, or an invalid name; built, it is the op the reader builds at once."""
    x, y = Port("X"), Port("Y")
    assert can_wait({"axis": 1}, [x], ("Y",)) and can_wait({"initializer": True, "value": 1}, [], ("output",))
    assert not can_wait({"namespace": "n"}, [x], ("Y",)) and not can_wait({"initializer": 1}, [], ("output",))
    assert not can_wait({}, [x, x], ("Y",)) and not can_wait({}, [x], ("Y", "Y"))
    assert pending_op("Relu", "", [x], ("Y",), ("y",), {}, {}, None) is None
    waiting = pending_op("Relu", "r", [x], ("Y",), ("y",), {}, {"alpha": 0.5}, "uid-1")
    assert isinstance(waiting, PendingOp) and waiting.value_of("Y") == "y" and waiting.value_of("Z") is None
    built = waiting.build("relu")
    assert built == amanda.op("Relu", "relu", inputs=[x], outputs=[Port("Y", attrs={"onnx_name": "y"})],
                              attrs={"alpha": 0.5}) and built.uid == "uid-1"
    assert y.name == "Y"
