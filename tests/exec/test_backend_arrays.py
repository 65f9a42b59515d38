"""Array devices (amanda/exec/backends/arrays.py): ``Session(model, backend="cupy")`` runs the
kernels the registry marks ``device_arrays`` on the device's arrays and the rest on numpy.

No GPU is needed: :mod:`tests.exec.device_standin` stands in for CuPy (a numpy ndarray subclass
that dispatches ``np.*`` calls as CuPy does and refuses host arrays, host ``out=`` buffers and
raw memory). References come from ONNX's node cases, numpy formulas and amanda's numpy
executor. The tests with real CuPy at the end skip without CuPy and a GPU.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import amanda
from amanda.errors import ArgumentError, ExecutionError
from amanda.exec.backends import arrays
from amanda.exec.kernels.math_util import as_array, host
from amanda.ops.catalog import DEVICE_ARRAYS
from amanda.ops.registry import ONNX, fact
from tests.exec.device_standin import CALLS, STANDIN, DeviceArray, HostArrayError, to_device, to_host

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from amanda.io.onnx.importer import from_onnx  # noqa: E402
from tests.conformance import onnx_cases  # noqa: E402


class Counting:
    """The stand-in library, counting its copies to and from the device."""

    def __init__(self) -> None:
        self.to_device = self.to_host = 0

    def library(self) -> arrays.ArrayLibrary:
        def down(value, index):
            self.to_device += 1
            return to_device(value, index)

        def up(value):
            self.to_host += 1
            return to_host(value)

        return dataclasses.replace(STANDIN, to_device=down, to_host=up)


@pytest.fixture
def device(monkeypatch):
    """The ``cupy`` device kind backed by the stand-in; yields its copy counter."""
    counter = Counting()
    monkeypatch.setitem(arrays.LIBRARIES, "cupy", counter.library())
    return counter


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    return from_onnx(proto)


def _split_model():
    """MatMul and Add (device kernels), TopK (numpy only), Relu (device)."""
    w = np.arange(9, dtype=np.float32).reshape(3, 3) / 4
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "x"], ["s"]),
             helper.make_node("TopK", ["s", "k"], ["v", "i"], axis=-1), helper.make_node("Relu", ["v"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
                  [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([2]), "k")]), w


# ---- which kernels run on device arrays: the registry's fact, held to ONNX's node cases ----

def _standard(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind in "biufc" or value is None


#: the most array calls (ufuncs, array functions, indexing) a device kernel makes on one node
#: case: the marked kernels make at most 27; a Python-level loop over elements makes more
MOST_CALLS = 64


def _on_device(case) -> str | None:
    """Why ``case`` fails with its inputs on the stand-in device, or None where it passes."""
    CALLS[0] = 0
    try:
        with np.errstate(all="ignore"):
            got = onnx_cases.run_model(case.model, [v if v is None else to_device(v, 0) for v in case.inputs])
    except Exception as exc:  # noqa: BLE001 - a kernel's refusal is the answer
        return type(exc).__name__
    if not all(isinstance(g, DeviceArray) for g in got):
        return "an output on the host"
    if CALLS[0] > MOST_CALLS:
        return f"{CALLS[0]} array calls: a Python-level loop"
    for expected, actual in zip(case.outputs, got):
        why = onnx_cases.mismatch(expected, to_host(actual), case.rtol, case.atol)
        if why:
            return why
    return None


def _device_cases() -> dict[str, list]:
    groups: dict[str, list] = {}
    for op_type, cases in onnx_cases.cases_by_op("").items():
        kept = [c for c in cases if all(map(_standard, c.inputs)) and all(map(_standard, c.outputs))]
        if kept:
            groups[op_type] = kept
    return groups


MARKED = sorted(t for t in onnx_cases.cases_by_op("") if fact(ONNX, t, DEVICE_ARRAYS, False))


@pytest.mark.parametrize("op_type", MARKED)
def test_every_marked_kernel_passes_its_node_cases_on_device_arrays(op_type):
    cases = _device_cases()[op_type]
    failures = [f"{c.name}: {why}" for c in cases if (why := _on_device(c))]
    assert not failures


def test_every_unmarked_kernel_fails_a_node_case_on_device_arrays():
    """The list is complete: an op type left unmarked does not run on device arrays."""
    passing = sorted(t for t, cases in _device_cases().items()
                     if not fact(ONNX, t, DEVICE_ARRAYS, False) and not any(map(_on_device, cases)))
    # OptionalGetElement: its cases are tensors, its values also sequences; Mod: CuPy's fmod
    # differs from C's on ONNX's edge cases (infinities, zeros), which only a GPU shows
    assert passing == ["Mod", "OptionalGetElement"]


def test_the_stand_in_refuses_host_memory_as_cupy_does():
    x = to_device(np.ones(3, np.float32), 0)
    assert isinstance(np.add(x, x), DeviceArray) and isinstance(np.concatenate([x, x]), DeviceArray)
    with pytest.raises(HostArrayError):
        np.add(x, np.ones(3, np.float32))
    with pytest.raises(HostArrayError):
        np.add(x, x, out=np.empty(3, np.float32))
    with pytest.raises(HostArrayError):
        _ = x.ctypes


def test_as_array_keeps_device_arrays_on_the_device():
    x = to_device(np.arange(3), 0)
    got = as_array(x, np.float32)
    assert isinstance(got, DeviceArray) and got.dtype == np.float32
    assert type(as_array(np.float32(2))) is np.ndarray


def test_host_copies_a_device_array_explicitly():
    """Metadata inputs (axes, shapes) are read through ``host``: a device array refuses
    ``np.asarray``, as CuPy's does, and ``host`` copies it with ``get()`` instead."""
    x = to_device(np.array([0, 2], np.int64), 0)
    with pytest.raises(HostArrayError):
        np.asarray(x)
    got = host(x)
    assert type(got) is np.ndarray and got.tolist() == [0, 2]
    assert host([1, 2]).tolist() == [1, 2] and type(host(np.ones(2))) is np.ndarray


def test_runs_on_arrays_follows_the_registry():
    add, conv, const = (amanda.op(t, t.lower()) for t in ("Add", "Conv", "Constant"))
    assert arrays.runs_on_arrays(add, "amanda/onnx/17")
    assert not arrays.runs_on_arrays(conv, "amanda/onnx/17")  # its kernel calls BLAS by pointer
    assert arrays.runs_on_arrays(const, "amanda/onnx/17")  # a value, copied with the plan
    assert not arrays.runs_on_arrays(add, "amanda/core")


# ---- the plumbing: placement, transfers, profile ----

def test_backend_cupy_runs_device_kernels_there_and_the_rest_on_numpy(device):
    model, w = _split_model()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    session = amanda.Session(model, backend="cupy")
    (y,) = session.run(["y"], {"x": x})
    s = x @ w + x
    expected = np.maximum(-np.sort(-s, axis=-1)[:, :2], 0)
    assert type(y) is np.ndarray
    np.testing.assert_allclose(y, expected, rtol=1e-6)
    np.testing.assert_allclose(y, amanda.Session(model).run(["y"], {"x": x})[0], rtol=1e-6)
    assert [r[1] for r in session._remote.records] == ["cupy:0", "cpu:0", "cupy:0"]
    copies = device.to_device
    session.run(["y"], {"x": x})
    # each run: the feed, and TopK's values back to the device; the weight stays there
    assert device.to_device - copies == 2


def test_the_profile_counts_the_bytes_each_device_receives(device):
    model, _ = _split_model()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    session = amanda.Session(model, backend="cupy:0", profile=True)
    session.run(["y"], {"x": x})
    moved: dict = {}
    for e in session.profile.events:
        moved[e.device] = moved.get(e.device, 0) + e.moved
    # x to the device (24 bytes), the sum to numpy (24), TopK's two values back (16)
    assert moved == {"cupy:0": 24 + 16, "cpu:0": 24}
    assert {e.op_type: e.device for e in session.profile.events if e.op_type not in ("Send", "Recv")} == {
        "MatMul": "cupy:0", "Add": "cupy:0", "TopK": "cpu:0", "Relu": "cupy:0"}


def test_a_feed_two_device_parts_read_is_copied_once_per_run(device):
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("TopK", ["r", "k"], ["v", "i"], axis=-1),
             helper.make_node("Add", ["v", "x"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
                   [numpy_helper.from_array(np.array([2]), "k")])
    x = np.array([[1, -2], [3, 4]], np.float32)
    session = amanda.Session(model, backend="cupy")
    session.run(["y"], {"x": x})
    before = device.to_device
    (y,) = session.run(["y"], {"x": x})
    np.testing.assert_allclose(y, -np.sort(-np.maximum(x, 0), axis=-1) + x)
    assert [r[1] for r in session._remote.records] == ["cupy:0", "cpu:0", "cupy:0"]
    assert device.to_device - before == 2  # x once, TopK's values once


def test_placement_puts_only_the_selected_ops_on_the_device(device):
    model, _ = _split_model()
    x = np.ones((2, 3), np.float32)
    session = amanda.Session(model, placement={"$..[?type=='Relu']": "cupy:0"})
    session.run(["y"], {"x": x})
    assert [r[1] for r in session._remote.records] == ["cpu:0", "cupy:0"]


def test_bad_array_devices_are_named(device):
    model, _ = _split_model()
    with pytest.raises(ArgumentError, match="device"):
        amanda.Session(model, placement={"$..[?type=='Relu']": "cupy:x"})
    with pytest.raises(ExecutionError, match=r"amanda\[gpu\]"):
        amanda.Session(model, placement={"$..[?type=='Relu']": "cupy:1"}).run(["y"], {"x": np.ones((2, 3), np.float32)})
    with pytest.raises(ArgumentError, match="did you mean"):
        amanda.Session(model, backend="cupyy")


def test_large_where_against_a_scalar_runs_on_the_device(device):
    """Where's bitwise path (a tensor of 4096 or more against a scalar), as a causal mask uses
    it: its operands stay device arrays (a real GPU found this one, not the node cases)."""
    nodes = [helper.make_node("Greater", ["x", "zero"], ["c"]), helper.make_node("Where", ["c", "x", "zero"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 128])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 128])],
                   [numpy_helper.from_array(np.array(0, np.float32), "zero")])
    x = np.random.default_rng(1).standard_normal((64, 128)).astype(np.float32)
    session = amanda.Session(model, backend="cupy")
    np.testing.assert_array_equal(session.run(["y"], {"x": x})[0], np.maximum(x, 0))
    assert [r[1] for r in session._remote.records] == ["cupy:0"]


def _hierarchy_cases():
    from tests.fixtures.onnx import hierarchy_models

    return hierarchy_models, hierarchy_models.CASES


@pytest.mark.parametrize(("name", "kind"), _hierarchy_cases()[1])
def test_fixture_models_on_the_device_equal_numpy(device, name, kind):
    from amanda.io.onnx import load_onnx

    fx = _hierarchy_cases()[0]
    model = load_onnx(fx.path(name, kind))
    outputs = list(model.output_names)
    session = amanda.Session(model, backend="cupy")
    got = session.run(outputs, fx.feeds(name))
    for a, b in zip(got, amanda.Session(model).run(outputs, fx.feeds(name))):
        assert type(a) is np.ndarray
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    for a, b in zip(got, fx.expected(name)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
    assert "cupy:0" in [r[1] for r in session._remote.records]


def _has_gpu() -> bool:
    try:
        import cupy
    except ImportError:
        return False
    return arrays.CUPY.count(cupy) > 0


@pytest.mark.skipif(_has_gpu(), reason="this machine has CuPy and a GPU")
def test_backend_cupy_without_cupy_or_a_gpu_names_the_gpu_extra():
    model, _ = _split_model()
    with pytest.raises(ExecutionError, match=r"amanda\[gpu\]"):
        amanda.Session(model, backend="cupy")


@pytest.mark.parametrize(("name", "kind"), _hierarchy_cases()[1])
def test_real_cupy_runs_the_fixture_models_as_numpy_does(name, kind):
    pytest.importorskip("cupy")
    if not _has_gpu():
        pytest.skip("no CUDA GPU")
    from amanda.io.onnx import load_onnx

    fx = _hierarchy_cases()[0]
    model = load_onnx(fx.path(name, kind))
    outputs = list(model.output_names)
    got = amanda.Session(model, backend="cupy").run(outputs, fx.feeds(name))
    for a, b in zip(got, fx.expected(name)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


def _real_cupy():
    cupy = pytest.importorskip("cupy")
    if not _has_gpu():
        pytest.skip("no CUDA GPU")
    return cupy


@pytest.mark.parametrize("op_type", MARKED)
def test_real_cupy_passes_every_marked_kernels_node_cases(op_type):
    """The registry's list, held to real CuPy on a GPU: every node case of a marked op type runs
    with its inputs in GPU memory, gives CuPy arrays, and equals ONNX's expected outputs."""
    cupy = _real_cupy()
    failures = []
    for case in _device_cases()[op_type]:
        if not all(v is None or v.dtype.type.__module__ == "numpy" for v in (*case.inputs, *case.outputs)):
            continue  # float8 and the other narrow floats of ml_dtypes: CuPy has no such dtypes
        try:
            with np.errstate(all="ignore"):
                got = onnx_cases.run_model(case.model, [v if v is None else cupy.asarray(v) for v in case.inputs])
        except Exception as exc:  # noqa: BLE001 - the failure is reported with its case
            failures.append(f"{case.name}: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        if not all(isinstance(g, cupy.ndarray) for g in got):
            failures.append(f"{case.name}: an output on the host")
            continue
        why = next((w for e, g in zip(case.outputs, got)
                    if (w := onnx_cases.mismatch(e, cupy.asnumpy(g), case.rtol, case.atol))), None)
        if why:
            failures.append(f"{case.name}: {why}")
    assert not failures


def test_real_cupy_runs_the_split_model_as_numpy_does():
    pytest.importorskip("cupy")
    if not _has_gpu():
        pytest.skip("no CUDA GPU")
    model, _ = _split_model()
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    session = amanda.Session(model, backend="cupy")
    (y,) = session.run(["y"], {"x": x})
    assert type(y) is np.ndarray
    np.testing.assert_allclose(y, amanda.Session(model).run(["y"], {"x": x})[0], rtol=1e-5, atol=1e-6)
    assert [r[1] for r in session._remote.records] == ["cupy:0", "cpu:0", "cupy:0"]


def test_the_docs_list_the_marked_kernels():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "execution.md").read_text()
    listing = text.split("<!-- device-arrays -->")[1].split("<!-- /device-arrays -->")[0]
    import amanda.exec.kernels  # noqa: F401  (registers every kernel)
    from amanda.ops.registry import entries

    marked = sorted(e.op_type for e in entries(ONNX, "") if e.fact(DEVICE_ARRAYS, False))
    assert sorted(part.strip(" `\n") for part in listing.split(",")) == marked


def test_array_device_names_and_values(device):
    assert arrays.is_array_device("cupy") and arrays.is_array_device("cupy:1")
    assert not arrays.is_array_device("cpu:0") and not arrays.is_array_device(None)
    assert (arrays.device_index("cupy"), arrays.device_index("cupy:2")) == (0, 2)
    with pytest.raises(ArgumentError, match="device number"):
        arrays.device_index("cupy:first")
    assert arrays.library_of("cupy:0") is arrays.LIBRARIES["cupy"]
    assert arrays.check_array_device("cupy:0") is arrays.LIBRARIES["cupy"]
    assert arrays.movable(np.zeros(2, np.int8)) and not arrays.movable(np.array(["a"]))
    assert not arrays.movable(to_device(np.zeros(2), 0)) and not arrays.movable([1.0])
    x = to_device(np.arange(4, dtype=np.float64), 0)
    assert arrays.nbytes(x) == 32 and arrays.nbytes("text") == 0
    back = arrays.to_host(x)
    assert type(back) is np.ndarray and back.tolist() == [0, 1, 2, 3]
    template = [None, np.ones(2, np.float32), np.array(["s"]), 3]
    arrays.on_device(template, arrays.LIBRARIES["cupy"], 0)
    assert isinstance(template[1], DeviceArray) and type(template[2]) is np.ndarray and template[3] == 3
