"""Feeds are checked against the dtype and shape their port declares, once per run, and never cast."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from amanda import Container, Port, op
from amanda.errors import ExecutionError
from amanda.exec import Session
from amanda.exec.feeds import check_feeds, declared_type
from amanda.io.onnx import from_onnx

NS = {"namespace": "amanda/onnx/17"}


def typed_add(x_shape: object = ("N", 2), y_shape: object = ("N", 2), dtype: str = "float32") -> Container:
    """x + y -> z, with both inputs declaring ``dtype`` and the given shapes."""
    def port(name: str, shape: object) -> Port:
        attrs = {"dtype": dtype} if shape == "absent" else {"dtype": dtype, "shape": shape}
        return Port(name, attrs=attrs)

    return Container("G", "g", inputs=[port("x", x_shape), port("y", y_shape)], outputs=["z"], attrs=NS,
                     children=[op("Add", "add", ["A", "B"], ["C"])],
                     edges=[("g:x", "add:A"), ("g:y", "add:B"), ("add:C", "g:z")])


def matmul_proto() -> object:
    """An ONNX model: y = x @ w with x declared float32[N, 3] and w a float32 initializer."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 2], np.arange(6, dtype=np.float32).tolist())
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_int64_into_a_float32_port_raises_instead_of_computing() -> None:
    """Feeding int64 to an imported float32 input raises an ExecutionError naming the port,
    the declared and the fed type, and runs nothing."""
    with Session(from_onnx(matmul_proto())) as s:
        with pytest.raises(ExecutionError) as info:
            s.run(["y"], {"x": np.ones((2, 3), np.int64)})
        message = str(info.value)
        assert "input `x`" in message and "expected float32[N,3]" in message and "found int64[2,3]" in message
        assert info.value.expected == "float32[N,3]" and info.value.found == "int64[2,3]"
        (y,) = s.run(["y"], {"x": np.ones((2, 3), np.float32)})  # the session stays usable
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, np.ones((2, 3), np.float32) @ np.arange(6, dtype=np.float32).reshape(3, 2))


@pytest.mark.parametrize("fed", [np.ones((2, 2), np.float64), np.ones((2, 2), np.float16), np.ones((2, 2), np.int32)])
def test_every_other_dtype_is_refused(fed: np.ndarray) -> None:
    """No dtype but the declared one is accepted, however safe a cast would be."""
    with pytest.raises(ExecutionError, match=rf"expected float32\[N,2\], found {fed.dtype}\[2,2\]"):
        Session(typed_add()).run(["z"], {"x": fed, "y": np.ones((2, 2), np.float32)})


@pytest.mark.parametrize("fed, hint", [
    (np.ones((2,), np.float32), "rank 2 expected"),
    (np.ones((2, 3), np.float32), "axis 1 must be 2"),
    (np.ones((1, 2, 2), np.float32), "rank 2 expected"),
])
def test_wrong_rank_or_fixed_size_is_refused(fed: np.ndarray, hint: str) -> None:
    """A fed array of another rank, or another size where the port fixes one, is refused."""
    with pytest.raises(ExecutionError, match=hint):
        Session(typed_add()).run(["z"], {"x": fed, "y": np.ones((2, 2), np.float32)})


def test_symbols_bind_consistently_within_a_run_and_afresh_in_the_next() -> None:
    """A symbol takes the size first fed for it; a different size for it in the same run is
    an error naming the symbol, and the next run may bind it anew."""
    with Session(typed_add()) as s:
        with pytest.raises(ExecutionError, match=r"`N` is 3 in feed `x`, 4 here"):
            s.run(["z"], {"x": np.ones((3, 2), np.float32), "y": np.ones((4, 2), np.float32)})
        assert s.run(["z"], {"x": np.ones((3, 2), np.float32), "y": np.ones((3, 2), np.float32)})[0].shape == (3, 2)
        assert s.run(["z"], {"x": np.ones((5, 2), np.float32), "y": np.ones((5, 2), np.float32)})[0].shape == (5, 2)


def test_unknown_dimensions_and_unknown_rank_accept_any_size() -> None:
    """None dimensions accept any size, and a port without a shape any rank (dtype still checked)."""
    model = typed_add(x_shape=(None, None), y_shape="absent")
    (z,) = Session(model).run(["z"], {"x": np.ones((3, 4), np.float32), "y": np.float32(2)})
    np.testing.assert_array_equal(z, np.full((3, 4), 3, np.float32))
    with pytest.raises(ExecutionError, match=r"feed `y` does not match input `y` of `g`: expected float32, found int64"):
        Session(model).run(["z"], {"x": np.ones((3, 4), np.float32), "y": np.int64(2)})


def test_python_scalars_and_lists_are_not_cast() -> None:
    """A Python float becomes a float64 0-d array and is then checked strictly; a list is not a
    tensor; numpy scalars of the declared dtype are accepted."""
    model = typed_add(x_shape=(), y_shape=())
    with Session(model) as s:
        with pytest.raises(ExecutionError, match=r"expected float32\[\], found float64\[\]"):
            s.run(["z"], {"x": 1.5, "y": np.float32(1)})
        with pytest.raises(ExecutionError, match=r"found sequence\[1\] \(feed a numpy array"):
            s.run(["z"], {"x": [1.5], "y": np.float32(1)})
        with pytest.raises(ExecutionError, match=r"found None"):
            s.run(["z"], {"x": None, "y": np.float32(1)})
        assert s.run(["z"], {"x": np.float32(1.5), "y": np.float32(1)})[0] == np.float32(2.5)
    (z,) = Session(typed_add(x_shape=(), y_shape=(), dtype="float64")).run(["z"], {"x": 1.5, "y": 1.0})
    assert z.dtype == np.float64 and z == 2.5


def test_fed_inner_ports_are_checked_when_they_declare_a_type() -> None:
    """Feeding an op's input port checks that port's declared type; an untyped port takes anything."""
    children = [op("Relu", "r", [Port("X", attrs={"dtype": "float32", "shape": (2,)})], ["Y"]), op("Neg", "n", ["X"], ["Y"])]
    g = Container("G", "g", inputs=["x"], outputs=["y", "w"], attrs=NS, children=children,
                  edges=[("g:x", "r:X"), ("r:Y", "g:y"), ("g:x", "n:X"), ("n:Y", "g:w")])
    with Session(g) as s:
        with pytest.raises(ExecutionError, match=r"feed `r:X` does not match input `X` of `r`: expected float32\[2\]"):
            s.run(["y"], {"r:X": np.ones(2, np.int32)})
        np.testing.assert_array_equal(s.run(["y"], {"r:X": np.array([-1, 1], np.float32)})[0], [0, 1])
        np.testing.assert_array_equal(s.run(["w"], {"n:X": np.array([1, 2], np.int32)})[0], [-1, -2])


def test_string_ports_take_string_arrays() -> None:
    """A port declaring dtype "string" accepts numpy string and object arrays, not numbers."""
    g = Container("G", "g", inputs=[Port("x", attrs={"dtype": "string", "shape": (None,)})], outputs=["y"], attrs=NS,
                  children=[op("Identity", "i", ["input"], ["output"])],
                  edges=[("g:x", "i:input"), ("i:output", "g:y")])
    with Session(g) as s:
        assert s.run(["y"], {"x": np.array(["a", "b"])})[0].tolist() == ["a", "b"]
        assert s.run(["y"], {"x": np.array(["a"], dtype=object)})[0].tolist() == ["a"]
        with pytest.raises(ExecutionError, match=r"expected string\[\?\], found float32\[1\]"):
            s.run(["y"], {"x": np.ones(1, np.float32)})


def test_a_malformed_declared_shape_is_reported_at_plan_time() -> None:
    """A port whose shape attribute is not a tuple of sizes is an ExecutionError naming the port."""
    g = Container("G", "g", inputs=[Port("x", attrs={"dtype": "float32", "shape": "2x2"})], outputs=["y"], attrs=NS,
                  children=[op("Neg", "n", ["X"], ["Y"])], edges=[("g:x", "n:X"), ("n:Y", "g:y")])
    with pytest.raises(ExecutionError, match=r"input `x` of `g`: expected a shape tuple"):
        Session(g).run(["y"], {"x": np.ones((2, 2), np.float32)})


def _oracle_accepts(declared: list, fed: list[tuple[int, ...]]) -> bool:
    """Plain-Python statement of the rule: fixed sizes equal, None anything, a symbol one size per run."""
    bound: dict[str, int] = {}
    for dims, shape in zip(declared, fed):
        if dims is None:
            continue
        if len(dims) != len(shape):
            return False
        for want, size in zip(dims, shape):
            if isinstance(want, str):
                if bound.setdefault(want, size) != size:
                    return False
            elif want is not None and want != size:
                return False
    return True


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_shape_check_agrees_with_a_plain_statement_of_the_rule(data: st.DataObject) -> None:
    """For random declared shapes (sizes, symbols, unknowns, unknown rank) and random fed shapes,
    check_feeds accepts exactly the feeds the plain rule accepts."""
    dim = st.one_of(st.integers(0, 3), st.sampled_from(["N", "M"]), st.none())
    declared = data.draw(st.lists(st.one_of(st.none(), st.lists(dim, max_size=3)), min_size=1, max_size=3))
    fed = [data.draw(st.tuples(*[st.integers(0, 3)] * data.draw(st.integers(0, 3)))) for _ in declared]
    types = {f"x{i}": declared_type(Port(f"x{i}", attrs={"dtype": "float32", "shape": None if d is None else tuple(d)}),
                                    f"input `x{i}`") for i, d in enumerate(declared)}
    feeds = {f"x{i}": np.zeros(shape, np.float32) for i, shape in enumerate(fed)}
    try:
        check_feeds({k: v for k, v in types.items() if v is not None}, feeds)
        accepted = True
    except ExecutionError:
        accepted = False
    assert accepted == _oracle_accepts(declared, fed)
