"""Sessions over weights mapped from their files: read in place, never kept as copies, and
copied into a variable only when training first writes it."""

from __future__ import annotations

import numpy as np
import pytest

from amanda.containers.container import Container, op
from amanda.containers.lazy import LazyTensor, is_mapped, stamp_of
from amanda.exec import Session
from amanda.exec.kernels.relaid import mark_constant, relaid, relaid_if_constant
from amanda.opset.onnx import linalg
from amanda.optim.variables import trainable


@pytest.fixture
def weight(tmp_path):
    path = tmp_path / "w.bin"
    values = np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32)
    path.write_bytes(values.tobytes())
    return LazyTensor(stamp_of(path), 0, np.float32, values.shape, name="w"), values


def _dense(value):
    x = op("MatMul", "mm", inputs=["A", "B"], outputs=["Y"])
    w = op("Constant", "w", outputs=["output"], attrs={"value": value, "initializer": True})
    return Container(None, "g", inputs=["x"], outputs=["y"], children=[w, x],
                     edges=[("g:x", "mm:A"), ("w:output", "mm:B"), ("mm:Y", "g:y")], attrs={"namespace": "amanda/onnx/17"})


def test_a_mapped_weight_is_read_in_place_and_never_relaid(weight):
    """A MatMul over a lazy weight gives numpy's product run after run, and no transposed copy of
    the mapped weight is kept (one is kept for the same weight in memory)."""
    lazy, values = weight
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    session = Session(_dense(lazy))
    for _ in range(3):
        np.testing.assert_allclose(session.run(["y"], {"x": x})[0], x @ values, rtol=1e-5, atol=1e-5)
    (fetched,) = session.run(["w:output"])
    assert is_mapped(fetched)  # the Constant hands on the weight it holds, not a copy
    mapped = lazy.array()
    mark_constant(mapped)  # as a plan marks its constants: a mapped one is not taken
    for _ in range(3):
        assert relaid_if_constant(mapped, "T", lambda w: np.ascontiguousarray(w.T)) is None
    in_memory = values.copy()
    in_memory.setflags(write=False)
    mark_constant(in_memory)
    assert relaid_if_constant(in_memory, "T", lambda w: np.ascontiguousarray(w.T)) is not None
    assert relaid(mapped, "once", lambda w: w.T.copy()).shape == (48, 64)  # a layout a kernel needs is still made


def test_a_variable_of_a_lazy_weight_is_copied_on_first_write(weight):
    """A Variable initialised from a lazy weight holds the mapped array itself until an update
    writes a new value; the file and the container keep the old one."""
    lazy, values = weight
    g = Container("G", "g", outputs=["read", "new"], attrs={"namespace": "amanda/core"}, children=[
        op("Variable", "v", outputs=["ref"], attrs={"value": lazy}),
        op("Read", "read", inputs=["ref"], outputs=["value"]),
        op("AssignAdd", "inc", inputs=["ref", "delta"], outputs=["value"]),
        op("Constant", "one", outputs=["output"], attrs={"value": np.float32(1), "namespace": "amanda/onnx/17"})],
        edges=[("v:ref", "read:ref"), ("v:ref", "inc:ref"), ("one:output", "inc:delta"),
               ("read:value", "g:read"), ("inc:value", "g:new")])
    session = Session(g, threads=1)
    (before,) = session.run(["read"])
    assert is_mapped(before) and not before.flags.writeable
    (after,) = session.run(["new"])
    assert not is_mapped(after) and not after.flags.writeable
    np.testing.assert_array_equal(after, values + 1)
    np.testing.assert_array_equal(session.run(["read"])[0], values + 1)
    np.testing.assert_array_equal(lazy.array(), values)
    assert g.child("v")._attrs["value"] is lazy


def test_trainable_keeps_a_lazy_weight_lazy(weight):
    """Making a lazy weight trainable stores the same lazy tensor in its Variable (no copy)."""
    lazy, _ = weight
    t = trainable(_dense(lazy), ["w"])
    stored = t.child("w").child("variable")._attrs["value"]
    assert type(stored) is LazyTensor and stored == lazy


def test_narrow_weights_widen_a_slab_at_a_time(monkeypatch):
    """A large float16 weight is multiplied in float32 slabs, matching the float32 product."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 5, 96)).astype(np.float16)
    b = (rng.standard_normal((96, 40)) / 10).astype(np.float16)
    monkeypatch.setattr(linalg, "SLAB_BYTES", 40 * 4 * 7)  # seven rows a slab
    product = linalg._slabbed(a, b)
    assert product is not None and product.dtype == np.float16 and product.shape == (3, 5, 40)
    expected = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(product.astype(np.float32), expected, rtol=2e-3, atol=2e-3)
    (out,) = linalg.matmul_kernel({}, a[0], b)
    np.testing.assert_allclose(out.astype(np.float32), expected[0], rtol=2e-3, atol=2e-3)
    assert linalg._slabbed(a.astype(np.float32), b.astype(np.float32)) is None
