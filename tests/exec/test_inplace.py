"""In-place reuse of dead buffers: only where nobody else can see the buffer."""

import sys
from pathlib import Path

import numpy as np
import pytest

from amanda import Container, op
from amanda.exec import Session
from amanda.ops.registry import ONNX, entries

onnx = pytest.importorskip("onnx")
FRESH = frozenset(e.op_type for e in entries(ONNX, "") if e.fresh)
INPLACE = {e.op_type: e.inplace for e in entries(ONNX, "") if e.inplace}
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))
import onnx_cases  # noqa: E402


@pytest.mark.parametrize("op_type", sorted(FRESH))
def test_fresh_kernels_return_memory_no_input_shares(op_type):
    """Every backend case of a FRESH op type yields outputs sharing memory with no input."""
    from amanda.exec.kernels import registry

    cases = [c for c in onnx_cases.cases_by_op().get(op_type, []) if len(c.model.graph.node) == 1]
    assert cases, f"no backend case exercises {op_type}"
    for case in cases:
        node = case.model.graph.node[0]
        initial = {t.name: onnx.numpy_helper.to_array(t) for t in case.model.graph.initializer}
        feeds = [i.name for i in case.model.graph.input if i.name not in initial]
        env = {**initial, **dict(zip(feeds, case.inputs))}
        args = [env[name] if name else None for name in node.input]
        version = registry.lookup(node.op_type, onnx_cases._opsets(case.model).get(""),
                                  tuple(getattr(a, "dtype", None) for a in args))
        attrs = {a.name: onnx_cases.attribute_value(a) for a in node.attribute}
        attrs.setdefault("num_outputs", len(node.output))
        outputs = [o for o in registry.run_kernel(version, attrs, args) if isinstance(o, np.ndarray)]
        for out in outputs:
            for arg in args:
                if isinstance(arg, np.ndarray):
                    assert not np.shares_memory(out, arg), f"{case.name}: output shares an input's memory"
        for a_index, a in enumerate(outputs):
            for b in outputs[a_index + 1:]:
                assert not np.shares_memory(a, b), f"{case.name}: two outputs share memory"


def graph(fetch_mm: bool = False, second_reader: bool = False) -> Container:
    children = [op("MatMul", "mm", ["A", "B"], ["Y"]), op("Relu", "relu", ["X"], ["Y"])]
    edges = [("g:x", "mm:A"), ("g:w", "mm:B"), ("mm:Y", "relu:X"), ("relu:Y", "g:y")]
    outputs = ["y"]
    if fetch_mm:
        outputs.append("h")
        edges.append(("mm:Y", "g:h"))
    if second_reader:
        children.append(op("Neg", "neg", ["X"], ["Y"]))
        edges += [("mm:Y", "neg:X"), ("neg:Y", "g:n")]
        outputs.append("n")
    return Container("Graph", "g", inputs=["x", "w"], outputs=outputs, children=children, edges=edges, attrs={"namespace": "amanda/onnx/17"})


def feeds():
    rng = np.random.default_rng(1)
    return {"x": rng.standard_normal((4, 3)).astype(np.float32), "w": rng.standard_normal((3, 5)).astype(np.float32)}


def expected():
    f = feeds()
    return f["x"] @ f["w"]


@pytest.mark.parametrize("threads", [1, 2])
def test_values_that_stay_visible_are_never_overwritten(threads):
    """A fetched, twice-read or fed value keeps its contents; results match plain numpy."""
    given = feeds()
    copies = {k: v.copy() for k, v in given.items()}
    y, h = Session(graph(fetch_mm=True), threads=threads).run(["y", "h"], given)
    assert np.allclose(h, expected()) and np.allclose(y, np.maximum(expected(), 0))
    y, n = Session(graph(second_reader=True), threads=threads).run(["y", "n"], given)
    assert np.allclose(n, -expected()) and np.allclose(y, np.maximum(expected(), 0))
    assert all(np.array_equal(given[k], copies[k]) for k in given)


def test_donation_happens_where_safe_and_only_there():
    """The Relu after a MatMul with no other reader runs in place; otherwise it does not."""
    from amanda.exec.inplace import donate  # noqa: F401 - the plan builder uses it

    def relu_step_is_inplace(model, fetches):
        session = Session(model, threads=1)
        session.run(fetches, feeds())
        plan = next(iter(session._plans.values()))
        fn = plan.steps[[i.op_type for i in plan.infos].index("Relu")][0]
        return "make.<locals>.run" in getattr(getattr(fn, "func", None), "__qualname__", "")

    assert relu_step_is_inplace(graph(), ["y"])
    assert relu_step_is_inplace(graph(second_reader=True), ["y"])  # the other reader is pruned
    assert not relu_step_is_inplace(graph(second_reader=True), ["y", "n"])
    assert not relu_step_is_inplace(graph(fetch_mm=True), ["y", "h"])


def test_inplace_variants_agree_with_kernels():
    """Each in-place variant writes into the donated array exactly what its kernel computes,
    and falls back to the kernel (leaving its inputs alone) where it may not write."""
    from amanda.exec.kernels.registry import lookup

    rng = np.random.default_rng(0)
    binary = ("Add", "Mul", "Sub", "Div")
    for op_type, (positions, make) in INPLACE.items():
        for position in positions:
            a = rng.uniform(0.5, 2.0, (64, 128)).astype(np.float32)
            b = rng.uniform(0.5, 2.0, (128,)).astype(np.float32)
            args = (a, b) if op_type in binary else (a,)
            if op_type in binary and position == 1:
                args = (b, a)  # the donated operand is the full-size one
            kernel = lookup(op_type, 17, [x.dtype for x in args]).fn
            want = kernel({}, *args)[0]
            given = tuple(x.copy() for x in args)
            got = make(position)(kernel, {}, *given)[0]
            assert got is given[position] and np.allclose(got, want), op_type
            small = tuple(x[:2].copy() if x.ndim == 2 else x for x in args)
            kept = tuple(x.copy() for x in small)
            out = make(position)(kernel, {}, *small)[0]  # too small to be worth reusing
            assert np.allclose(out, kernel({}, *kept)[0])
            assert all(np.array_equal(x, y) for x, y in zip(small, kept)), op_type
            ints = tuple(x.astype(np.int32) for x in args)
            if op_type in ("Relu", "Neg", "Add", "Mul", "Sub"):
                int_kernel = lookup(op_type, 17, [np.dtype(np.int32)]).fn
                assert np.array_equal(make(position)(int_kernel, {}, *ints)[0], int_kernel({}, *ints)[0])
