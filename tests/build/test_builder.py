"""The typed op builder: ops from schemas, types inferred at each call, mistakes caught at the
line that made them, and models that run as numpy and onnxruntime compute them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import amanda
from amanda import Input, model, ops
from amanda.build import Ops
from amanda.namespaces import namespace
from tests.strategies import check_invariants


def mlp() -> tuple[amanda.Container, list[np.ndarray]]:
    rng = np.random.default_rng(0)
    w1, b1 = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    w2 = rng.standard_normal((10, 16)).astype(np.float32)
    x = Input("x", "float32", ("batch", 8))
    h = ops.Relu(ops.Add(ops.MatMul(x, w1), b1))
    y = ops.Gemm(h, w2, transB=1)
    return model([x], {"logits": y}, name="mlp"), [w1, b1, w2]


def test_an_mlp_builds_with_types_runs_and_exports() -> None:
    """Types are known at each call; the model validates, runs as numpy computes it, and
    exports to a file onnxruntime runs to the same result."""
    m, (w1, b1, w2) = mlp()
    assert str(m.outputs[0].attrs["shape"]) == "('batch', 10)" and m.namespace == "amanda/onnx/17"
    assert amanda.validate(m) == []
    check_invariants(m)
    x = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    want = np.maximum(x @ w1 + b1, 0) @ w2.T
    with amanda.Session(m) as session:
        np.testing.assert_allclose(session.run(["logits"], {"x": x})[0], want, rtol=1e-5, atol=1e-5)
    assert amanda.loads(amanda.dumps(m)) == m
    ort = pytest.importorskip("onnxruntime")
    from amanda.io.onnx.export import to_onnx

    session = ort.InferenceSession(to_onnx(m).SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-5)


def test_types_are_inferred_at_each_call() -> None:
    """Each call's result carries its type: symbols flow, reshapes resolve, dtypes follow."""
    x = Input("x", "float32", ("batch", 3, 4))
    flat = ops.Reshape(x, np.array([0, -1], np.int64))
    assert str(flat.type) == "float32[batch,12]"
    assert str(ops.Cast(flat, to=7).type) == "int64[batch,12]"
    values, indices = ops.TopK(flat, np.array([5], np.int64))
    assert (str(values.type), str(indices.type)) == ("float32[batch,5]", "int64[batch,5]")


def test_mistakes_raise_at_the_call_with_the_valid_names() -> None:
    """A misspelt op or attribute, too many inputs, or ill-typed inputs raise when built."""
    x = Input("x", "float32", (2, 4))
    with pytest.raises(amanda.SchemaError, match="did you mean 'Relu'"):
        ops.Relux(x)
    assert not hasattr(ops, "Relux") and hasattr(ops, "Relu")
    with pytest.raises(amanda.ArgumentError, match="did you mean 'transB'"):
        ops.Gemm(x, x, transb=1)
    with pytest.raises(amanda.ArgumentError, match="at most 2 inputs"):
        ops.Add(x, x, x)
    with pytest.raises(amanda.ArgumentError, match="broadcast"):
        ops.Add(x, np.ones((3, 3), np.float32))
    with pytest.raises(amanda.ArgumentError, match="dtype"):
        Input("y", "flot32", (2,))
    with pytest.raises(amanda.ArgumentError):
        ops.Relu("x")  # a name is not a value
    with pytest.raises(amanda.ArgumentError, match=r"nested lists of one shape.*\[\[1.0\], \[1.0, 2.0\]\]"):
        ops.Add(x, [[1.0], [1.0, 2.0]])  # a ragged list is no array
    with pytest.raises(amanda.ArgumentError, match="/B: expected a Value"):
        ops.Add(x, [2**70])  # nor an int beyond int64


def test_optional_inputs_defaults_and_other_namespaces() -> None:
    """None leaves an optional input out; schema defaults are filled in; any namespace builds."""
    x = Input("x", "float32", (2, 4))
    clipped = ops.Clip(x, None, np.float32(1.0))
    assert clipped.producer.op.input_names == ("input", "min", "max") or "max" in clipped.producer.op.input_names
    gemm = ops.Gemm(x, np.ones((4, 4), np.float32))
    assert gemm.producer.op.attrs["transB"] == 0 and gemm.producer.op.attrs["alpha"] == 1.0
    old = Ops("amanda/onnx/13").ReduceSum(x, np.array([1], np.int64), keepdims=0)
    assert str(old.type) == "float32[2]"
    tf = Ops("amanda/tensorflow/2.21.0").MatMul(Input("a", "float32", (2, 3)), Input("b", "float32", (3, 5)))
    assert tf.producer.op.input_names == ("a", "b") and tf.producer.op.namespace == "amanda/tensorflow/2.21.0"


def test_every_op_type_of_the_default_opset_has_a_builder_with_its_schema_ports() -> None:
    """For every op type of the default namespace, the builder names the schema's inputs."""
    ns = namespace("amanda/onnx/17")
    for op_type in ns.op_types:
        builder = getattr(ops, op_type)
        assert builder.schema.type == op_type
        for port in ns.schema(op_type).inputs:
            assert port.name in repr(builder)


def test_model_needs_every_input_it_reads() -> None:
    """A value built from an input that inputs= does not list is refused, naming the op port."""
    x, y = Input("x", "float32", (2,)), Input("y", "float32", (2,))
    with pytest.raises(amanda.ArgumentError, match="inputs= does not list"):
        model([x], ops.Add(x, y))


UNARY = {"Relu": lambda a: np.maximum(a, 0), "Neg": np.negative, "Abs": np.abs, "Tanh": np.tanh,
         "Exp": lambda a: np.exp(np.clip(a, -5, 5))}


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(sorted(UNARY)), min_size=1, max_size=6), st.integers(0, 1000))
def test_random_stacks_build_infer_run_and_round_trip(stack: list[str], seed: int) -> None:
    """Random stacks of elementwise ops with a residual add build, keep their type, run as
    numpy computes them, and round-trip through YAML and JSON."""
    x = Input("x", "float32", ("n", 3))
    value, want = x, lambda a: a
    for name in stack:
        fn = UNARY[name]
        if name == "Exp":
            value = ops.Exp(ops.Clip(value, np.float32(-5), np.float32(5)))
        else:
            value = getattr(ops, name)(value)
        want = (lambda f, g: lambda a: f(g(a)))(fn, want)
    out = ops.Add(value, x)
    assert str(out.type) == "float32[n,3]"
    m = model([x], {"y": out})
    data = np.random.default_rng(seed).standard_normal((4, 3)).astype(np.float32)
    with amanda.Session(m, threads=1) as session:
        np.testing.assert_allclose(session.run(["y"], {"x": data})[0], want(data) + data, rtol=1e-5, atol=1e-6)
    for fmt in ("yaml", "json"):
        assert amanda.loads(amanda.dumps(m, fmt), fmt) == m
