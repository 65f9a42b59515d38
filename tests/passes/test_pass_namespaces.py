"""Ops a pass puts in place of others live in the namespace of the ops they replace.

A model whose ops carry their own ``namespace`` attribute, in a container that carries none (a
gradient container, a model assembled from parts of several opsets), must still validate and
run after every pass; a folded or fused op without a namespace has no kernel.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import amanda
from amanda import Container, Input, model, op, ops
from amanda.cli import main
from amanda.passes import PASSES, optimize
from amanda.passes.fuse import fuse_gelu_internal, fuse_matmul_add_internal, fuse_swish_internal

RNG = np.random.default_rng(11)


def _own(namespace: str) -> dict:
    return {"namespace": namespace}


def _const(name: str, value: np.ndarray, namespace: str = "amanda/onnx/17") -> Container:
    return op("Constant", name, [], ["output"], {"value": np.asarray(value, np.float32), **_own(namespace)})


def _unnamespaced(children: list, edges: list, inputs: tuple = ("x",)) -> Container:
    return Container(None, "g", inputs=list(inputs), outputs=["y"], children=children, edges=edges)


def folded_model() -> Container:
    """y = x + Neg(c): Neg of a constant folds."""
    ns = _own("amanda/onnx/17")
    return _unnamespaced([_const("c", [1.0, 2.0]), op("Neg", "n", ["X"], ["Y"], ns), op("Add", "a", ["A", "B"], ["C"], ns)],
                         [("c:output", "n:X"), ("g:x", "a:A"), ("n:Y", "a:B"), ("a:C", "g:y")])


def conv_bn_model() -> Container:
    ns = _own("amanda/onnx/17")
    children = [_const("w", RNG.standard_normal((2, 1, 1, 1))), _const("s", [2.0, 3.0]), _const("b", [1.0, -1.0]),
                _const("m", [0.5, 0.0]), _const("v", [1.0, 4.0]), op("Conv", "conv", ["X", "W"], ["Y"], ns),
                op("BatchNormalization", "bn", ["X", "scale", "B", "input_mean", "input_var"], ["Y"],
                   {"epsilon": 0.0, **ns})]
    edges = [("g:x", "conv:X"), ("w:output", "conv:W"), ("conv:Y", "bn:X"), ("s:output", "bn:scale"),
             ("b:output", "bn:B"), ("m:output", "bn:input_mean"), ("v:output", "bn:input_var"), ("bn:Y", "g:y")]
    return _unnamespaced(children, edges)


def matmul_add_model() -> Container:
    ns = _own("amanda/onnx/17")
    children = [_const("w", RNG.standard_normal((3, 2))), _const("b", [0.5, -0.5]),
                op("MatMul", "mm", ["A", "B"], ["Y"], ns), op("Add", "add", ["A", "B"], ["C"], ns)]
    g = Container(None, "g", inputs=[amanda.Port("x", attrs={"dtype": "float32", "shape": (4, 3)})], outputs=["y"],
                  children=children, edges=[("g:x", "mm:A"), ("w:output", "mm:B"), ("mm:Y", "add:A"),
                                            ("b:output", "add:B"), ("add:C", "g:y")])
    return g


def gelu_model(opset: int) -> Container:
    namespace = f"amanda/onnx/{opset}"
    ns = _own(namespace)
    children = [_const("r2", 2 ** 0.5, namespace), _const("one", 1.0, namespace), _const("half", 0.5, namespace),
                op("Div", "d", ["A", "B"], ["C"], ns), op("Erf", "e", ["input"], ["output"], ns),
                op("Add", "a", ["A", "B"], ["C"], ns), op("Mul", "m", ["A", "B"], ["C"], ns),
                op("Mul", "h", ["A", "B"], ["C"], ns)]
    edges = [("g:x", "d:A"), ("r2:output", "d:B"), ("d:C", "e:input"), ("e:output", "a:A"), ("one:output", "a:B"),
             ("g:x", "m:A"), ("a:C", "m:B"), ("m:C", "h:A"), ("half:output", "h:B"), ("h:C", "g:y")]
    return _unnamespaced(children, edges)


def swish_model() -> Container:
    ns = _own("amanda/onnx/17")
    return _unnamespaced([op("Sigmoid", "s", ["X"], ["Y"], ns), op("Mul", "m", ["A", "B"], ["C"], ns)],
                         [("g:x", "s:X"), ("g:x", "m:A"), ("s:Y", "m:B"), ("m:C", "g:y")])


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


CASES = {
    "fold": (folded_model, (2,), lambda m, x: x - np.float32([1, 2])),
    "conv_bn": (conv_bn_model, (1, 1, 2, 2), None),
    "matmul_add": (matmul_add_model, (4, 3), None),
    "gelu17": (lambda: gelu_model(17), (5,), lambda m, x: _gelu(x)),
    "gelu20": (lambda: gelu_model(20), (5,), lambda m, x: _gelu(x)),
    "swish": (swish_model, (5,), lambda m, x: x / (1 + np.exp(-x))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_pass_keeps_the_namespace_of_the_ops_it_replaces(case):
    """Through every pass (the public ones and a Session's own) a model whose ops carry their own
    namespace stays valid, keeps a namespace on every op, and computes what it computed before
    (numpy, or the unoptimised run where the oracle would restate the model)."""
    build, shape, oracle = CASES[case]
    g = build()
    assert amanda.validate(g) == []
    x = RNG.standard_normal(shape).astype(np.float32)
    with amanda.Session(g, optimize=False) as plain:
        expected = plain.run(["y"], {"x": x})[0]
    if oracle is not None:
        np.testing.assert_allclose(expected, oracle(g, x), rtol=1e-5, atol=1e-6)
    result, reports = optimize(g, list(PASSES))
    internal, more = optimize(result, [fuse_gelu_internal, fuse_swish_internal, fuse_matmul_add_internal])
    assert any(r.changed for r in reports + more), case
    assert amanda.validate(result) == []
    # amanda/fused is amanda's own vocabulary, which only its executor knows
    assert amanda.validate(internal, unknown_namespace="skip") == []
    for candidate in (result, internal):
        assert all(o.namespace for o in candidate), [o.name for o in candidate if not o.namespace]
    for candidate, flag in ((result, False), (internal, False), (g, True), (result, True)):
        with amanda.Session(candidate, optimize=flag) as session:
            np.testing.assert_allclose(session.run(["y"], {"x": x})[0], expected, rtol=1e-5, atol=1e-6)


def grad_with_unused_input(wrt: tuple) -> Container:
    x, y = Input("x", "float32", (2, 3)), Input("y", "float32", (2, 3))
    w = ops.Constant(value=np.ones((3, 2), np.float32), name="w")
    net = model([x, y], {"loss": ops.ReduceSum(ops.MatMul(x, w, name="mm"), keepdims=0)}, name="net")
    return amanda.grad(net, "loss", list(wrt))


def _feeds() -> dict:
    return {"x": RNG.standard_normal((2, 3)).astype(np.float32), "y": RNG.standard_normal((2, 3)).astype(np.float32)}


@pytest.mark.parametrize("wrt", [("y",), ("x", "y")])
def test_grad_with_an_unused_wrt_runs_and_gives_zeros_when_optimised(wrt):
    """An entry of wrt the loss does not use gets zeros (its zeros fold to a constant in the
    model's namespace), with and without the Session's optimisation; d loss / dx is w summed."""
    g = grad_with_unused_input(wrt)
    feeds = _feeds()
    fetches = ["loss"] + [f"grad/{name}" for name in wrt]
    for flag in (True, False):
        with amanda.Session(g, optimize=flag) as session:
            found = dict(zip(fetches, session.run(fetches, feeds)))
        np.testing.assert_allclose(found["loss"], feeds["x"].sum() * 2, rtol=1e-5)
        np.testing.assert_array_equal(found["grad/y"], np.zeros((2, 3), np.float32))
        if "x" in wrt:
            np.testing.assert_array_equal(found["grad/x"], np.full((2, 3), 2.0, np.float32))


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_an_optimised_model_validates_is_saved_by_the_cli_and_runs(tmp_path, capsys, suffix):
    """`amanda optimize` writes a model that validates and runs in a Session, with the outputs
    of the model it read (the gradient container of an unused input, whose zeros fold)."""
    g = grad_with_unused_input(("y",))
    source, target = tmp_path / f"grad{suffix}", tmp_path / f"fast{suffix}"
    amanda.dump(g, source)
    assert main(["optimize", str(source), "-o", str(target), "--quiet"]) == 0
    assert "fold_constants: " in capsys.readouterr().out
    optimised = amanda.load(target)
    assert any(o.attrs.get("amanda_folded_from") for o in optimised)
    assert amanda.validate(optimised) == []
    feeds = _feeds()
    for flag in (False, True):
        with amanda.Session(optimised, optimize=flag) as session:
            loss, gy = session.run(["loss", "grad/y"], feeds)
        np.testing.assert_allclose(loss, feeds["x"].sum() * 2, rtol=1e-5)
        np.testing.assert_array_equal(gy, np.zeros((2, 3), np.float32))


def test_validate_reports_an_op_without_a_namespace_among_ops_with_one():
    """An op with no effective namespace in a model whose other ops have one cannot run: validate
    names its path; a model without any namespace makes no claim and stays valid."""
    ns = _own("amanda/onnx/17")
    g = _unnamespaced([op("Relu", "r", ["X"], ["Y"], ns), op("Neg", "bare", ["X"], ["Y"])],
                      [("g:x", "r:X"), ("r:Y", "bare:X"), ("bare:Y", "g:y")])
    problems = amanda.validate(g)
    assert [p.path for p in problems] == [("bare",)]
    assert "namespace" in str(problems[0])
    with pytest.raises(amanda.ExecutionError, match="bare"):
        amanda.Session(g).run(["y"], {"x": np.ones(2, np.float32)})
    plain = _unnamespaced([op("Relu", "r", ["X"], ["Y"]), op("Neg", "bare", ["X"], ["Y"])],
                          [("g:x", "r:X"), ("r:Y", "bare:X"), ("bare:Y", "g:y")])
    assert amanda.validate(plain) == []
