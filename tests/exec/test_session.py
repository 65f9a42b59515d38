"""Session.run: fetch kinds, feeds, pruning of fed values, phases, plan caching and errors."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import Container, Edge, Endpoint, op
from amanda.errors import ExecutionError
from amanda.exec import Session

NS = {"namespace": "amanda/onnx/17"}
X = np.array([-1.0, 2.0, -3.0], np.float32)


def block_model() -> Container:
    """x -> block(relu -> neg) -> abs -> y; z is the block's output too."""
    block = Container(
        "Block", "b", inputs=["x"], outputs=["y"],
        children=[op("Relu", "r", ["X"], ["Y"]), op("Neg", "n", ["X"], ["Y"])],
        edges=[("b:x", "r:X"), ("r:Y", "n:X"), ("n:Y", "b:y")],
    )
    return Container(
        "G", "g", inputs=["x"], outputs=["y", "z"], attrs=NS,
        children=[block, op("Abs", "a", ["X"], ["Y"])],
        edges=[("g:x", "b:x"), ("b:y", "a:X"), ("a:Y", "g:y"), ("b:y", "g:z")],
    )


def test_run_returns_fetches_in_order() -> None:
    """run gives one value per fetch, in the order asked, whatever the graph order."""
    with Session(block_model()) as s:
        z, y = s.run(["z", "y"], {"x": X})
    np.testing.assert_array_equal(y, np.abs(-np.maximum(X, 0)))
    np.testing.assert_array_equal(z, -np.maximum(X, 0))


def test_single_fetch_string_gives_a_list() -> None:
    """A single fetch name is accepted and still gives a list."""
    out = Session(block_model()).run("y", {"x": X})
    assert isinstance(out, list) and len(out) == 1


@pytest.mark.parametrize(
    "fetch, expected",
    [
        ("b:y", -np.maximum(X, 0)),  # a container's output port
        ("b/r:Y", np.maximum(X, 0)),  # a leaf output by path string
        (Endpoint(("b", "r"), "Y"), np.maximum(X, 0)),  # an Endpoint with a tuple path
        ((("b", "n"), 0), -np.maximum(X, 0)),  # an output by index
        ("b/n:X", np.maximum(X, 0)),  # a leaf input: the value flowing into it
        ("a:X", -np.maximum(X, 0)),
        ("g:x", X),  # the top container's own input
        ("g:y", np.abs(-np.maximum(X, 0))),
    ],
)
def test_fetch_endpoints(fetch: object, expected: np.ndarray) -> None:
    """Every way of naming a value fetches that value."""
    (got,) = Session(block_model(), threads=1).run([fetch], {"x": X})
    np.testing.assert_array_equal(got, expected)


def test_feeding_an_intermediate_cuts_off_upstream() -> None:
    """Feeding b/r:Y makes r (and the input x) unnecessary: no feed for x, r not planned."""
    s = Session(block_model())
    (y,) = s.run(["y"], {"b/r:Y": np.array([5.0], np.float32)})
    np.testing.assert_array_equal(y, [5.0])
    assert s.plan(["y"], ["b/r:Y"]).paths == (("b", "n"), ("a",))


def test_feed_an_op_input_and_a_container_input() -> None:
    """Feeding an input port replaces what that op (or the ops inside that container) read."""
    s = Session(block_model())
    np.testing.assert_array_equal(s.run(["y"], {"a:X": np.float32([-7])})[0], [7])
    np.testing.assert_array_equal(s.run(["y"], {"b:x": np.float32([-7, 7])})[0], [0, 7])
    np.testing.assert_array_equal(s.run(["y"], {"g:x": np.float32([4])})[0], [4])


def test_feed_overrides_fetch_of_the_same_value() -> None:
    """A fetched value that is fed comes back as fed, and nothing runs."""
    s = Session(block_model())
    fed = np.float32([9])
    (got,) = s.run(["b:y"], {"b/n:Y": fed})
    assert got is fed
    assert s.plan(["b:y"], ["b/n:Y"]).paths == ()


def test_unknown_feed_and_fetch_names_raise() -> None:
    """Names that match nothing raise ExecutionError listing what exists."""
    s = Session(block_model())
    with pytest.raises(ExecutionError, match="top input"):
        s.run(["y"], {"nope": X})
    with pytest.raises(ExecutionError, match="top output"):
        s.run(["nope"], {"x": X})
    with pytest.raises(ExecutionError, match="a port of"):
        s.run(["a:nope"], {"x": X})


def test_missing_feed_names_the_port_and_the_fetch() -> None:
    """Without a feed for x, the error names input x and the fetch that needs it."""
    with pytest.raises(ExecutionError) as info:
        Session(block_model()).run(["z"])
    assert "missing feed for input `x`" in str(info.value)
    assert "needed by fetch `z`" in str(info.value)


def test_fetching_an_op_runs_it_for_effects() -> None:
    """A bare op path as a fetch gives None."""
    assert Session(block_model()).run(["b/r", "y"], {"x": X})[0] is None


def test_kernel_failure_message_format() -> None:
    """A failing kernel raises ExecutionError naming path, type, namespace and input shapes."""
    inner = Container("Blk", "block1", inputs=["a", "b"], outputs=["y"],
                      children=[op("MatMul", "conv", ["A", "B"], ["Y"])],
                      edges=[("block1:a", "conv:A"), ("block1:b", "conv:B"), ("conv:Y", "block1:y")])
    g = Container("G", "g", inputs=["a", "b"], outputs=["y"], attrs=NS, children=[inner],
                  edges=[("g:a", "block1:a"), ("g:b", "block1:b"), ("block1:y", "g:y")])
    feeds = {"a": np.zeros((64, 784), np.float32), "b": np.zeros((3, 3), np.float32)}
    for threads in (1, 2):
        with Session(g, threads=threads) as s, pytest.raises(ExecutionError) as info:
            s.run(["y"], feeds)
        text = str(info.value)
        assert text.startswith(
            "while executing `block1/conv` (MatMul, amanda/onnx/17) with inputs float32[64,784], float32[3,3]: "
        ), text
        assert "ValueError" in text
        assert isinstance(info.value.__cause__, ValueError)
        assert info.value.path == "block1/conv"


def test_namespace_without_kernels_is_reported() -> None:
    """An op of a namespace with no kernels raises naming the op type and the namespace."""
    g = Container("G", "g", outputs=["y"], attrs={"namespace": "amanda/caffe/1"},
                  children=[op("InnerProduct", "m", [], ["product"])], edges=[("m:product", "g:y")])
    with pytest.raises(ExecutionError, match=r"namespace `amanda/caffe/1` has no kernels.*InnerProduct"):
        Session(g).run(["y"])


def test_unknown_op_type_is_reported() -> None:
    """An op type the namespace has no kernel for names the type and the namespace."""
    g = Container("G", "g", outputs=["y"], attrs=NS, children=[op("Frobnicate", "f", [], ["y"])],
                  edges=[("f:y", "g:y")])
    with pytest.raises(ExecutionError, match=r"no kernel for op type `Frobnicate` in namespace `amanda/onnx/17`"):
        Session(g).run(["y"])


def test_op_without_namespace_is_reported() -> None:
    """An op with no namespace anywhere above it says how to fix that."""
    g = Container("G", "g", outputs=["y"], children=[op("Relu", "r", [], ["Y"])], edges=[("r:Y", "g:y")])
    with pytest.raises(ExecutionError, match="has no namespace"):
        Session(g).run(["y"])


def test_optional_input_without_producer_is_none() -> None:
    """A declared input with no edge reaches the kernel as None (an omitted optional input)."""
    g = Container("G", "g", inputs=["a", "b"], outputs=["y"], attrs=NS,
                  children=[op("Gemm", "gemm", ["A", "B", "C"], ["Y"])],
                  edges=[("g:a", "gemm:A"), ("g:b", "gemm:B"), ("gemm:Y", "g:y")])
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(Session(g).run(["y"], {"a": a, "b": b})[0], a @ b)


def test_plans_are_cached_per_fetches_feeds_and_phase() -> None:
    """The same fetches, fed names, phase and feed types reuse one plan; any difference compiles another."""
    s = Session(block_model())
    p1 = s.plan(["y"], ["x"])
    assert s.plan(("y",), ("x",)) is p1
    assert s.plan(["z"], ["x"]) is not p1
    phased = Session(phase_model())  # a phase must be one the model has
    train = phased.plan(["y"], ["x"], phase="train")
    assert phased.plan(("y",), ("x",), phase="train") is train and phased.plan(["y"], ["x"], phase="eval") is not train
    typed = s.plan(["y"], {"x": X})  # values: the plan is specialised to their types
    assert typed is not p1 and s.plan(("y",), {"x": X.copy()}) is typed
    s.run(["y"], {"x": X})
    assert s.plan(["y"], {"x": X}) is typed
    assert s.plan(["y"], {"x": np.concatenate([X, X])}) is not typed


def phase_model() -> Container:
    """y = relu(x) in phase train, neg(x) in phase eval."""
    return Container(
        "G", "g", inputs=["x"], outputs=["y"], attrs=NS,
        children=[op("Relu", "r", ["X"], ["Y"]), op("Neg", "n", ["X"], ["Y"])],
        edges=[("g:x", "r:X"), ("g:x", "n:X"),
               Edge("r:Y", "g:y", attrs={"phase": "train"}), Edge("n:Y", "g:y", attrs={"phase": "eval"})],
    )


def test_phase_binds_before_planning() -> None:
    """run(phase=p) computes phase p's value and runs only phase p's ops."""
    s = Session(phase_model())
    np.testing.assert_array_equal(s.run(["y"], {"x": X}, phase="train")[0], np.maximum(X, 0))
    np.testing.assert_array_equal(s.run(["y"], {"x": X}, phase="eval")[0], -X)
    assert s.plan(["y"], ["x"], phase="eval").paths == (("n",),)


def test_ambiguous_phase_raises() -> None:
    """Without a phase, a value with one producer per phase is an error that says so."""
    with pytest.raises(ExecutionError, match="one producer per phase"):
        Session(phase_model()).run(["y"], {"x": X})


def test_scalar_feeds_become_arrays() -> None:
    """Python and numpy scalars are fed as 0-d arrays."""
    g = Container("G", "g", inputs=["x"], outputs=["y"], attrs=NS, children=[op("Neg", "n", ["X"], ["Y"])],
                  edges=[("g:x", "n:X"), ("n:Y", "g:y")])
    (y,) = Session(g).run(["y"], {"x": 2.5})
    assert isinstance(y, np.ndarray) and y.shape == () and y == -2.5


def test_constants_are_folded_once_and_read_only() -> None:
    """Constant ops are evaluated at plan time; their values are shared and read-only."""
    g = Container("G", "g", outputs=["y"], attrs=NS,
                  children=[op("Constant", "c", [], ["output"], attrs={"value": np.arange(3.0), "initializer": True})],
                  edges=[("c:output", "g:y")])
    s = Session(g)
    first, second = s.run(["y"])[0], s.run(["y"])[0]
    assert first is second and not first.flags.writeable
    assert s.plan(["y"]).paths == ()


def test_session_repr_and_threads() -> None:
    """A session reports its thread setting."""
    s = Session(block_model(), threads=3)
    assert s.threads == 3 and "threads=3" in repr(s)
    with pytest.raises(amanda.AmandaError):
        Session(block_model(), threads=0)


def test_edited_model_runs_its_effective_view() -> None:
    """A non-destructive edit (tombstone + new op) runs as edited; the inner model is untouched,
    and a container output whose inner edge is tombstoned is followed to its new producer."""
    body = amanda.chain(op("Neg", "L1", ["x"], ["y"]), op("Relu", "L2", ["x"], ["y"]),
                        op("Abs", "L3", ["x"], ["y"]), name="body")
    body = body.with_attrs(**NS)
    skip = (amanda.edit(body).remove_edge("body/L2:y", "body/L3:x")
            .add(op("Add", "add", ["a", "b"], ["y"], attrs=NS))
            .connect("body/L1:y", "add:a").connect("body/L2:y", "add:b")
            .connect("add:y", "body/L3:x").build(name="resnet"))
    x = np.array([-1.0, 2.0], np.float32)
    (y,) = Session(skip).run([skip.output_names[0]], {skip.input_names[0]: x})
    np.testing.assert_array_equal(y, np.abs(-x + np.maximum(-x, 0)))
    (plain,) = Session(body).run([body.output_names[0]], {body.input_names[0]: x})
    np.testing.assert_array_equal(plain, np.abs(np.maximum(-x, 0)))
    # the value flowing into L3 now comes from add
    (into,) = Session(skip).run(["body/L3:x"], {skip.input_names[0]: x})
    np.testing.assert_array_equal(into, -x + np.maximum(-x, 0))
    (out,) = Session(skip).run(["body:" + body.output_names[0]], {skip.input_names[0]: x})
    np.testing.assert_array_equal(out, y)
    # feeding the tombstoned producer's output does not reach L3 any more
    (fed,) = Session(skip).run([skip.output_names[0]], {"body/L2:y": np.float32([5, 5]),
                                                       skip.input_names[0]: x})
    np.testing.assert_array_equal(fed, np.abs(-x + 5))


def test_sparse_constant_from_an_onnx_file_runs():
    """A Constant with a sparse_value, imported from ONNX, runs to the dense tensor."""
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    from amanda.io.onnx import from_onnx

    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5.0, 7.0], np.float32), "v"),
        numpy_helper.from_array(np.array([1, 4], np.int64), "i"),
        [2, 3],
    )
    node = helper.make_node("Constant", [], ["y"], sparse_value=sparse)
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])])
    model = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9))
    (y,) = amanda.Session(model).run(["y"])
    assert y.tolist() == [[0, 5, 0], [0, 7, 0]]
