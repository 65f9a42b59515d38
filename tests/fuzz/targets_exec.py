"""Fuzz targets over execution: small random models run with and without the Session's
optimisation, twice each, and exported.

A model is a chain of random steps (products by constant weights, foldable constant
subgraphs, ``ConstantOfShape(Shape(h))`` zeros, identities), maybe with an input passed
straight through as an output, maybe wrapped by ``amanda.grad`` with a ``wrt`` entry the loss
does not use. ``run`` raises ``InvalidResult`` when a model that runs as given fails or
computes otherwise once optimised, when a second run gives other bits than the first, when
an unused ``wrt`` entry's gradient is not zeros, when the optimised model does not validate
though the model did, when a model refuses feeds of its inputs' types, or when
onnxruntime computes otherwise from the export.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import amanda
from amanda import Input, model, ops
from amanda.errors import AmandaError
from tests.fuzz.harness import InvalidResult, Source, Target

STEPS = ("relu", "neg", "bias", "matmul", "gemm", "fold", "zeros", "identity")


def generate_model(src: Source) -> tuple:
    """A recipe: seed, rows, columns, steps, passthrough, wrt, threads, feed kind, export."""
    big = src.boolean(0.3)  # products large enough for BLAS's other kernels
    rows = src.integer(17, 80) if big else src.integer(1, 6)
    cols = src.integer(17, 80) if big else src.integer(1, 6)
    steps = tuple(src.choice(STEPS) for _ in range(src.integer(0, 5)))  # none: the input is the output
    wrt = src.choice([(), (), ("x",), ("y",), ("x", "y")])
    return (src.integer(0, 2**31), rows, cols, steps, src.boolean(0.3), wrt, src.choice([None, 1, 2]),
            src.integer(0, 9), src.boolean(0.3))


def _step(step: str, h: Any, width: int, rng: np.random.Generator, big: bool) -> tuple[Any, int]:
    def const(*shape: int) -> Any:
        return ops.Constant(value=rng.standard_normal(shape).astype(np.float32))

    if step in ("matmul", "gemm"):
        n = int(rng.integers(17, 81) if big else rng.integers(1, 7))
        return (ops.MatMul(h, const(width, n)) if step == "matmul" else ops.Gemm(h, const(width, n), const(n))), n
    if step == "bias":
        return ops.Add(h, const(width)), width
    if step == "fold":  # Neg of a constant: folded at plan time
        return ops.Add(h, ops.Neg(const(width))), width
    if step == "zeros":  # the shape subgraph of amanda.grad's zeros
        return ops.Add(h, ops.ConstantOfShape(ops.Shape(h))), width
    return {"relu": ops.Relu, "neg": ops.Neg, "identity": ops.Identity}[step](h), width


def build(case: tuple) -> tuple[amanda.Container, dict, set[str]]:
    """The model of a recipe, its feeds and the outputs that must be zeros."""
    seed, rows, cols, steps, passthrough, wrt, _, feed_kind, _ = case
    rng = np.random.default_rng(seed)
    x, y = Input("x", "float32", (rows, cols)), Input("y", "float32", (rows, cols))
    h, width = x, cols
    for step in steps:
        h, width = _step(step, h, width, rng, rows > 6)
    outputs: dict[str, Any] = {"loss": ops.ReduceSum(h, keepdims=0) if wrt else h}
    if passthrough:
        outputs["same"] = x
    g = model([x, y], outputs, name="net")
    zeros: set[str] = set()
    if wrt:
        g = amanda.grad(g, "loss", list(wrt))
        zeros = {"grad/y"} & set(g.output_names)  # y reaches no output
    feeds = {"x": rng.standard_normal((rows, cols)).astype(np.float32),
             "y": rng.standard_normal((rows, cols)).astype(np.float32)}
    if feed_kind == 0:
        feeds["x"] = feeds["x"].astype(np.float64)
    elif feed_kind == 1:
        feeds["x"] = feeds["x"][:, :0]
    return g, feeds, zeros


def _same(name: str, a: Any, b: Any, what: str, exact: bool = False) -> None:
    a, b = np.asarray(a), np.asarray(b)
    ok = np.array_equal(a, b) if exact else a.shape == b.shape and np.allclose(a, b, rtol=1e-3, atol=1e-3)
    if not ok:
        raise InvalidResult(f"{name}: {what}")


def run_model(case: tuple) -> None:
    """The model runs alike as given and optimised, twice to the bit, gives zeros for an unused
    wrt entry, validates once optimised, and exports to what onnxruntime computes alike."""
    g, feeds, zeros = build(case)
    threads, export = case[6], case[8]
    names = list(g.output_names)
    valid = not amanda.validate(g)
    try:
        with amanda.Session(g, optimize=False, threads=threads) as session:
            plain = session.run(names, feeds)
    except AmandaError as exc:
        if case[7] >= 2:  # a model amanda.model built from Inputs, fed what they declare
            raise InvalidResult(f"a model refuses feeds of its input types: {exc}") from exc
        raise
    try:
        with amanda.Session(g, threads=threads) as session:
            first, second = session.run(names, feeds), session.run(names, feeds)
    except AmandaError as exc:
        raise InvalidResult(f"optimize=True fails where optimize=False runs: {exc}") from exc
    for name, a, b, c in zip(names, plain, first, second):
        _same(name, a, b, "optimised run differs from the model as given")
        _same(name, b, c, f"the second run differs in bits from the first (threads={threads})", exact=True)
        if name in zeros and np.any(np.asarray(b) != 0):
            raise InvalidResult(f"{name}: the gradient of an unused wrt entry is not zeros")
    if valid:
        problems = amanda.validate(amanda.optimize(g, quiet=True).model)
        if problems:
            raise InvalidResult(f"the optimised model does not validate: {problems[0]}")
    if export:
        _exported_agrees(g, feeds, names, plain)


def _exported_agrees(g: amanda.Container, feeds: dict, names: list[str], plain: list) -> None:
    try:
        import onnxruntime as ort
    except ImportError:
        return
    from amanda.io.onnx import to_onnx

    proto = to_onnx(g)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for name, ours, theirs in zip(names, plain, session.run(names, feeds)):
        _same(name, ours, theirs, "onnxruntime computes otherwise from the export")


TARGETS = (Target("exec_model", generate_model, run_model),)
