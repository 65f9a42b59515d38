"""Oracle (c) and checking: ill-typed graphs are reported at the right path, never raised."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import amanda
from amanda.types import check

NS = {"namespace": "amanda/onnx/17"}
X = amanda.Port("x", attrs={"dtype": "float32", "shape": ("batch", 4)})

GOOD = {
    "relu": lambda: ("Relu", None, {}),
    "add": lambda: ("Add", np.ones((4,), np.float32), {}),
    "matmul": lambda: ("MatMul", np.ones((4, 4), np.float32), {}),
    "softmax": lambda: ("Softmax", None, {"axis": -1}),
}
BAD = {  # each is wrong for a float32[batch, 4] input
    "broadcast": lambda: ("Add", np.ones((3,), np.float32), {}),
    "dtype": lambda: ("Add", np.ones((4,), np.int64), {}),
    "inner dims": lambda: ("MatMul", np.ones((5, 4), np.float32), {}),
    "rank": lambda: ("Transpose", None, {"perm": (0,)}),
    "attribute": lambda: ("Softmax", None, {"axis": 2}),
}


def _leaf(kind: tuple) -> tuple[list, list, str]:
    op_type, const, attrs = kind
    schema = amanda.namespace(NS["namespace"]).schema(op_type)
    ins, out = [p.name for p in schema.inputs], schema.outputs[0].name
    if const is None:
        op = amanda.op(op_type, "op", inputs=ins[:1], outputs=[out], attrs=attrs)
        return [op], [("SELF", f"op:{ins[0]}")], out
    ops = [amanda.op("Constant", "w", outputs=["output"], attrs={"value": const}),
           amanda.op(op_type, "op", inputs=ins[:2], outputs=[out], attrs=attrs)]
    return ops, [("SELF", f"op:{ins[0]}"), ("w:output", f"op:{ins[1]}")], out


def _block(name: str, kind: tuple, depth: int) -> tuple[amanda.Container, tuple]:
    children, wiring, out = _leaf(kind)
    edges = [(f"{name}:x" if s == "SELF" else s, d) for s, d in wiring] + [(f"op:{out}", f"{name}:y")]
    block = amanda.Container("Block", name, inputs=["x"], outputs=["y"], children=children, edges=edges)
    path: tuple = ("op",)
    for level in range(depth):
        inner = block
        wrap = f"{name}_w{level}"
        block = amanda.Container("Wrap", wrap, inputs=["x"], outputs=["y"], children=[inner.with_name(inner.name)],
                                 edges=[(f"{wrap}:x", f"{inner.name}:x"), (f"{inner.name}:y", f"{wrap}:y")])
        path = (inner.name, *path)
    return block, (block.name, *path)


def _model(kinds: list[tuple], depths: list[int]) -> tuple[amanda.Container, list[tuple]]:
    blocks, paths = [], []
    for i, (kind, depth) in enumerate(zip(kinds, depths)):
        block, path = _block(f"b{i}", kind, depth)
        blocks.append(block)
        paths.append(path)
    n = len(blocks)
    edges = [("g:x", f"{blocks[0].name}:x")]
    edges += [(f"{blocks[i].name}:y", f"{blocks[i + 1].name}:x") for i in range(n - 1)]
    edges += [(f"{blocks[-1].name}:y", "g:y")]
    return amanda.Container(None, "g", inputs=[X], outputs=["y"], children=blocks, edges=edges, attrs=NS), paths


chains = st.lists(st.tuples(st.sampled_from(sorted(GOOD)), st.integers(0, 3)), min_size=1, max_size=6)


@given(chains)
def test_well_typed_chains_have_no_problems(chain):
    """A chain of well-typed ops at random depths gives no problems and a typed output."""
    model, _ = _model([GOOD[k]() for k, _ in chain], [d for _, d in chain])
    assert check(model) == []
    assert amanda.types.infer_types(model)[(), "y"] is not None


@given(chains, st.sampled_from(sorted(BAD)), st.data())
def test_ill_typed_op_is_reported_at_its_path(chain, mistake, data):
    """One ill-typed op anywhere in a nested chain is reported, with its own path, and only it."""
    at = data.draw(st.integers(0, len(chain)))
    depth = data.draw(st.integers(0, 3))
    kinds = [GOOD[k]() for k, _ in chain]
    depths = [d for _, d in chain]
    kinds.insert(at, BAD[mistake]())
    depths.insert(at, depth)
    model, paths = _model(kinds, depths)
    problems = check(model)
    assert [p.path for p in problems] == [paths[at]], (mistake, problems)
    assert problems[0].expected and problems[0].found


def test_messages_say_expected_and_found():
    """A problem names the op type, what fits and what was found."""
    model, _ = _model([BAD["inner dims"]()], [1])
    (problem,) = check(model)
    assert str(problem) == "at b0_w0/b0/op: expected MatMul: the inner dims of a matrix product equal to 4, found 5"


def test_symbols_bind_consistently():
    """Two ops that pin the same symbol to different sizes are reported at the second."""
    y = amanda.Port("y", attrs={"dtype": "float32", "shape": ("batch", 4)})
    c5 = amanda.op("Constant", "c5", outputs=["output"], attrs={"value": np.ones((5, 4), np.float32)})
    c6 = amanda.op("Constant", "c6", outputs=["output"], attrs={"value": np.ones((6, 4), np.float32)})
    a1 = amanda.op("Concat", "a1", inputs=["inputs_0", "inputs_1"], outputs=["concat_result"], attrs={"axis": 1})
    a2 = amanda.op("Concat", "a2", inputs=["inputs_0", "inputs_1"], outputs=["concat_result"], attrs={"axis": 1})
    g = amanda.Container(None, "g", inputs=[X, y], outputs=["p", "q"], children=[c5, c6, a1, a2], attrs=NS,
                         edges=[("g:x", "a1:inputs_0"), ("c5:output", "a1:inputs_1"), ("g:y", "a2:inputs_0"),
                                ("c6:output", "a2:inputs_1"), ("a1:concat_result", "g:p"),
                                ("a2:concat_result", "g:q")])
    problems = check(g)
    assert [p.path for p in problems] == [("a2",)]
    assert "'batch' = 5" in problems[0].expected and problems[0].found == "6"
    assert amanda.types.infer_types(g)[(), "p"] == amanda.TensorType("float32", (5, 8))


def test_broadcasting_leaves_symbols_free():
    """A symbol broadcast against 5 in one op and 6 in another is no problem: it may be 1."""
    y = amanda.Port("y", attrs={"dtype": "float32", "shape": ("batch", 4)})
    c5 = amanda.op("Constant", "c5", outputs=["output"], attrs={"value": np.ones((5, 4), np.float32)})
    c6 = amanda.op("Constant", "c6", outputs=["output"], attrs={"value": np.ones((6, 4), np.float32)})
    a1 = amanda.op("Add", "a1", inputs=["A", "B"], outputs=["C"])
    a2 = amanda.op("Add", "a2", inputs=["A", "B"], outputs=["C"])
    g = amanda.Container(None, "g", inputs=[X, y], outputs=["p", "q"], children=[c5, c6, a1, a2], attrs=NS,
                         edges=[("g:x", "a1:A"), ("c5:output", "a1:B"), ("g:y", "a2:A"), ("c6:output", "a2:B"),
                                ("a1:C", "g:p"), ("a2:C", "g:q")])
    assert check(g) == []


def test_declared_type_contradicting_inference():
    """An output port declaring a type the op cannot produce is a problem at that op."""
    relu = amanda.op("Relu", "r", inputs=["X"], outputs=[amanda.Port("Y", attrs={"dtype": "int64"})])
    g = amanda.Container(None, "g", inputs=[X], outputs=["y"], children=[relu], attrs=NS,
                         edges=[("g:x", "r:X"), ("r:Y", "g:y")])
    (problem,) = check(g)
    assert problem.path == ("r",) and "int64" in problem.found


def test_validate_includes_type_problems():
    """amanda.validate reports type errors beside schema errors."""
    model, paths = _model([BAD["broadcast"]()], [0])
    assert [p.path for p in amanda.validate(model)] == [paths[0]]
    good, _ = _model([GOOD["add"](), GOOD["softmax"]()], [1, 0])
    assert amanda.validate(good) == []
