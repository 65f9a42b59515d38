"""YAML and JSON round trips are lossless: ``loads(dumps(c)) == c`` for every container the
constructor accepts (attribute values of every kind) and for every model the ONNX importer
produces, which still runs to the same outputs afterwards."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from amanda import Container, dumps, loads, op
from amanda.errors import FormatError
from amanda.io import to_document
from tests.strategies import valued_containers

FORMATS = ("yaml", "json")


def _round_trips(c: Container) -> None:
    for fmt in FORMATS:
        text = dumps(c, fmt)
        back = loads(text, fmt)
        assert back == c, fmt
        # uids and every written value come back too
        assert to_document(back) == to_document(c), fmt


@given(valued_containers())
def test_containers_with_any_attribute_values_round_trip(c):
    """Containers with random values (nested lists/dicts, huge ints, NaN/inf/-0.0, bytes, unicode and
    YAML-special strings, arrays of many dtypes incl. 0-size and 0-d, dtypes, numpy scalars,
    containers) on themselves, a child, a port and an edge read back equal in YAML and JSON."""
    _round_trips(c)


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), -float("inf"), -0.0, np.dtype("float32"), np.float64(1.5),
     2**20_000, "\ud800", {"__ndarray__": 1}, {"__float__": "nan", "x": 2},
     op("Body", "b", ["x"], ["y"], {"w": np.arange(3.0)})],
    ids=lambda value: type(value).__name__,  # str() of a 6,000-digit int raises
)
def test_values_plain_text_would_lose_round_trip(value):
    """Each value issue 11 names (NaN, dtype, np.float64, bodies) and each marker-like value reads back."""
    _round_trips(op("A", "a", attrs={"v": value}))


def test_json_is_strict_json():
    """JSON output has no NaN/Infinity literals: other JSON readers can parse it."""
    import json

    text = dumps(op("A", "a", attrs={"v": [float("nan"), float("-inf")]}), "json")
    json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard constant {name}"))


def test_an_op_with_pass_through_edges_round_trips():
    """A container without children but with an edge is written as a subgraph, so it reads back."""
    c = Container("T", "t", inputs=["x"], outputs=["y"], edges=[("t:x", "t:y")])
    _round_trips(c)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("op: {name: a, attrs: {v: {__float__: nope}}}", "op.attrs.v.__float__"),
        ("op: {name: a, attrs: {v: {__dtype__: no_such}}}", "op.attrs.v.__dtype__"),
        ("op: {name: a, attrs: {v: {__int__: xyz}}}", "op.attrs.v.__int__"),
        ("op: {name: a, attrs: {v: {__str__: '!!'}}}", "op.attrs.v.__str__"),
        ("op: {name: a, attrs: {v: {__mapping__: 3}}}", "op.attrs.v.__mapping__"),
        ("op: {name: a, attrs: {v: {__container__: {edge: 1}}}}", "op.attrs.v.__container__"),
        ("op: {name: a, attrs: {v: {__container__: {op: {name: ''}}}}}", "op.attrs.v.__container__.op.name"),
        ("op: {name: a, attrs: {v: {__dtype__: '<f4', x: 1}}}", "op.attrs.v"),
    ],
)
def test_bad_markers_are_format_errors_at_their_path(text, field):
    """A malformed marker raises a FormatError naming its path in the document."""
    with pytest.raises(FormatError, match=f"at {field.replace('.', '[.]')}:"):
        loads(text)


# -- every ONNX model the tests build -----------------------------------------------------------

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper

from amanda.exec import Session
from amanda.io.onnx import from_onnx
from tests.exec import test_control_flow as cf
from tests.fixtures.onnx import onnx_models as models


def _feeds_for(proto: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Fixed random inputs: 2 for symbolic or missing dims, small trip counts, true conditions."""
    rng = np.random.default_rng(seed)
    out = {}
    initializers = {i.name for i in proto.graph.initializer}
    for value in proto.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 2 for d in tensor.shape.dim] if tensor.HasField(
            "shape") else [2]
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if dtype == np.bool_:
            out[value.name] = np.ones(shape, bool)
        elif dtype.kind in "iu":
            out[value.name] = np.full(shape, 3, dtype)
        else:
            out[value.name] = rng.standard_normal(shape).astype(dtype)
    return out


def _every_kind_model() -> onnx.ModelProto:
    """One custom node with an attribute of every ONNX kind (not run: no kernel)."""
    vi = helper.make_tensor_value_info
    tensor = numpy_helper.from_array(np.arange(4, dtype=np.int32).reshape(2, 2))
    body = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "body",
                             [vi("x", TensorProto.FLOAT, [1])], [vi("y", TensorProto.FLOAT, [1])])
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.5], np.float32)),
                                       numpy_helper.from_array(np.array([3], np.int64)), [6])
    node = helper.make_node("Custom", ["x"], ["y"], name="custom", domain="com.example", f=0.1, i=3,
                            s="text", raw=b"\xff\xfe", t=tensor, g=body, fs=[0.5, 2.0], is_=[1, 2],
                            ss=["a", "b"], ts=[tensor], gs=[body], sp=sparse)
    bf16 = helper.make_tensor("bf", TensorProto.BFLOAT16, [2], [1.0, 2.0])
    i4 = helper.make_tensor("i4", TensorProto.INT4, [3], [1, -2, 3])
    strings = numpy_helper.from_array(np.array([b"ab", b"c"], dtype=object), "s")
    graph = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, [1])],
                              [vi("y", TensorProto.FLOAT, [1]), vi("bf", TensorProto.BFLOAT16, [2]),
                               vi("i4", TensorProto.INT4, [3]), vi("s", TensorProto.STRING, [2])],
                              [bf16, i4, strings])
    return models.model(graph, {"": 17, "com.example": 1})


RUNNABLE = {
    **{name: build for name, build in models.BUILDERS.items()},
    "if": cf.if_model,
    "loop": cf.loop_model,
    "scan": cf.scan_model,
    "scan_reversed": lambda: cf.scan_model(scan_input_directions=[1], scan_output_axes=[1]),
}


NO_KERNELS = {"custom_domains"}  # ai.onnx.ml has no amanda kernels: checked for equality only


def _import_round_trips(proto: onnx.ModelProto) -> tuple[Container, list[Container]]:
    imported = from_onnx(proto)
    loaded = []
    for fmt in FORMATS:
        back = loads(dumps(imported, fmt), fmt)
        assert back == imported, fmt
        assert to_document(back) == to_document(imported), fmt
        loaded.append(back)
    return imported, loaded


@pytest.mark.parametrize("name", sorted(RUNNABLE))
def test_imported_models_round_trip_and_run_the_same(name):
    """Every model the tests build (MLP, CNN, attention, If/Loop/Scan bodies …) reads back equal from
    YAML and JSON, and the reloaded models run to the same outputs as the import and onnxruntime."""
    proto = RUNNABLE[name]()
    imported, loaded = _import_round_trips(proto)
    if name in NO_KERNELS:
        return
    feeds = models.feeds(name) if name in models.BUILDERS else _feeds_for(proto)
    names = [o.name for o in proto.graph.output]
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(names, feeds)
    with Session(imported) as s:
        before = s.run(names, feeds)
    for e, b in zip(expected, before):
        np.testing.assert_allclose(b, e, rtol=1e-5, atol=1e-6)
    for model in loaded:
        with Session(model) as s:
            after = s.run(names, feeds)
        for b, a in zip(before, after):
            assert a.dtype == b.dtype and np.array_equal(a, b)


def test_nested_control_flow_model_round_trips():
    """An If inside a Loop body (bodies two levels deep) reads back equal and runs the same."""
    vi = cf.vi
    then = helper.make_graph([helper.make_node("Add", ["s_in", "bonus"], ["t"])], "t", [], [vi("t")])
    other = helper.make_graph([helper.make_node("Identity", ["s_in"], ["e"])], "e", [], [vi("e")])
    body = helper.make_graph(
        [helper.make_node("If", ["c_in"], ["s_out"], then_branch=then, else_branch=other),
         helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [vi("i", TensorProto.INT64, []), vi("c_in", TensorProto.BOOL, []), vi("s_in", cf.F, [1])],
        [vi("c_out", TensorProto.BOOL, []), vi("s_out", cf.F, [1])],
    )
    proto = cf.model([helper.make_node("Loop", ["n", "cond", "s0"], ["s"], body=body)],
                     [vi("n", TensorProto.INT64, []), vi("cond", TensorProto.BOOL, []), vi("s0", cf.F, [1]),
                      vi("bonus", cf.F, [1])], [vi("s")])
    imported, loaded = _import_round_trips(proto)
    feeds = {"n": np.array(4, np.int64), "cond": np.array(True), "s0": np.zeros(1, np.float32),
             "bonus": np.array([1.5], np.float32)}
    for model in [imported, *loaded]:
        with Session(model) as s:
            assert s.run(["s"], feeds)[0].tolist() == [6.0]


def test_every_attribute_kind_and_exotic_dtypes_round_trip():
    """A node with every ONNX attribute kind, and bfloat16/int4/string initializers, read back equal."""
    _, loaded = _import_round_trips(_every_kind_model())
    assert loaded[0].child("bf").attrs["value"].dtype.name == "bfloat16"
    assert isinstance(loaded[1].child("custom").attrs["g"], Container)


def test_imported_weights_cannot_be_changed_through_the_container():
    """Arrays an ONNX import stores over the protos' raw bytes refuse every numpy mutation the
    container tests try: the model dumps the same afterwards."""
    from tests.containers.test_values import MUTATIONS, _arrays_in, _attempt

    c = from_onnx(models.cnn())
    text = dumps(c, "json")
    held = list(_arrays_in(c))
    assert held, "the CNN has weights"
    for mutation in sorted(MUTATIONS):
        for array in [*held, *_arrays_in(c)]:
            _attempt(mutation, array)
    assert dumps(c, "json") == text and c == loads(text, "json")
