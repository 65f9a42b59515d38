"""Models and oracles for the query tests: hand-built models, a random-model strategy,
a random-selector grammar, and a brute-force evaluator that shares no code with
amanda.query (it walks the tree recursively and asks jmespath about each view)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import jmespath
import numpy as np
from hypothesis import strategies as st

from amanda import SELF, Container, op
from tests.strategies import build_flat, build_nested, groupings, plans

# -- hand-built models --------------------------------------------------------------------------


def rnn_cell(name: str, probe_in_inference: bool) -> Container:
    """An RNN cell (``rnn_cell: true``) with a debug probe, optionally wired to the cell's
    own ``inference`` control port."""
    edges: list[Any] = [
        (f"{name}:x", "x_proj:a"), (f"{name}:h", "h_proj:a"),
        ("x_proj:y", "add:a"), ("h_proj:y", "add:b"), ("add:y", "act:x"),
        ("act:y", f"{name}:y"), ("act:y", "probe:x"),
    ]
    if probe_in_inference:
        edges.append(("probe:-1", (SELF, "inference")))
    return Container(
        "LSTMCell", name, inputs=["x", "h"], outputs=["y"], controls=["inference"],
        children=[
            op("Dot", "x_proj", ["a"], ["y"]), op("Dot", "h_proj", ["a"], ["y"]),
            op("Add", "add", ["a", "b"], ["y"]), op("Tanh", "act", ["x"], ["y"]),
            op("Print", "probe", ["x"], [], attrs={"debug": True}),
        ],
        edges=edges, attrs={"rnn_cell": True},
    )


def four_queries_model() -> Container:
    """The model behind the four example queries of docs/query.md.

    x -> embed -> rnn1 -> rnn2 -> dense/MatMul (a Dot fed by the initializer w_init) ->
    softmax -> y. Debug ops: print_logits (inference), grad_check (train only), and a probe
    in each cell (only rnn2's is wired to its cell's inference port).
    """
    children = [
        op("Const", "w_init", outputs=["w"], attrs={"initializer": True}),
        op("Const", "h0", outputs=["h"], attrs={"initializer": True}),
        op("Gather", "embed", ["ids"], ["y"]),
        rnn_cell("rnn1", probe_in_inference=False),
        rnn_cell("rnn2", probe_in_inference=True),
        op("Dot", "dense/MatMul", ["a", "b"], ["y"]),
        op("Softmax", "softmax", ["x"], ["y"]),
        op("Print", "print_logits", ["x"], [], attrs={"debug": True}),
        op("Print", "grad_check", ["x"], [], attrs={"debug": True}),
        op("AssignSub", "update", ["x"], []),
    ]
    edges: list[Any] = [
        ("model:x", "embed:ids"), ("embed:y", "rnn1:x"), ("h0:h", "rnn1:h"), ("rnn1:y", "rnn2:x"),
        ("h0:h", "rnn2:h"), ("rnn2:y", "dense/MatMul:a"), ("w_init:w", "dense/MatMul:b"),
        ("dense/MatMul:y", "softmax:x"), ("softmax:y", "model:y"),
        ("dense/MatMul:y", "print_logits:x"), ("softmax:y", "grad_check:x"), ("softmax:y", "update:x"),
        ("print_logits:-1", (SELF, "inference")),
        ("grad_check:-1", (SELF, "train")), ("update:-1", (SELF, "train")),
    ]
    return Container(
        "Model", "model", inputs=["x"], outputs=["y"], controls=["train", "inference"],
        children=children, edges=edges, attrs={"namespace": "amanda/onnx/17"},
    )


def branch_graph(name: str, kind: str) -> Container:
    """A small graph for an If body: x -> (kind) -> y."""
    return Container(
        "Graph", name, inputs=["x"], outputs=["y"], children=[op(kind, "inner", ["x"], ["y"], attrs={"tag": name})],
        edges=[(f"{name}:x", "inner:x"), ("inner:y", f"{name}:y")],
    )


def bodies_model() -> Container:
    """Ops holding graphs in attributes, ONNX-style: an If (two bodies) and a Loop holding a
    tuple of graphs, under a block with ``debug: true``."""
    cond = op("If", "if_1", ["cond"], ["y"], attrs={
        "then_branch": branch_graph("then_g", "Dot"), "else_branch": branch_graph("else_g", "Relu"),
    })
    loop = op("Loop", "loop", ["x"], ["y"], attrs={"bodies": (branch_graph("b0", "Dot"), branch_graph("b1", "Exp"))})
    block = Container("Block", "block", inputs=["x"], outputs=["y"], children=[cond, loop],
                      edges=[("block:x", "if_1:cond"), ("if_1:y", "loop:x"), ("loop:y", "block:y")],
                      attrs={"debug": True})
    return Container("Graph", "g", inputs=["x"], outputs=["y"], children=[op("Relu", "pre", ["x"], ["y"]), block],
                     edges=[("g:x", "pre:x"), ("pre:y", "block:x"), ("block:y", "g:y")])


# -- random models ------------------------------------------------------------------------------

GROUP_ATTRS = st.dictionaries(
    st.sampled_from(["debug", "i", "namespace", "rnn_cell", "tag"]),
    st.one_of(st.booleans(), st.integers(-3, 3), st.sampled_from(["abc", "xyz", "amanda/onnx/17"])),
    max_size=2,
).filter(lambda attrs: isinstance(attrs.get("namespace", ""), str))  # containers reject other namespaces


@st.composite
def query_models(draw: st.DrawFn, max_ops: int = 8) -> Container:
    """Random nested models: attributes on ops and groups, control and data edges, and
    sometimes graphs held in op attributes (single and tuples)."""
    plan = draw(plans(max_ops))
    grouping = draw(groupings([s["name"] for s in plan.ops]))
    group_attrs = {f"g{k}": draw(GROUP_ATTRS) for k in range(1, 6)}
    model = build_nested(plan, grouping, group_attrs=group_attrs)
    if draw(st.booleans()):
        model = model.with_attrs(**draw(GROUP_ATTRS))
    if draw(st.integers(0, 3)) == 0:
        body = build_flat(draw(plans(3)), name="sub")
        model = _hold(model, draw(st.sampled_from(sorted(s["name"] for s in plan.ops))), body, draw(st.booleans()))
    return model


def _hold(model: Container, leaf: str, body: Container, as_tuple: bool) -> Container:
    from amanda import replace

    path = next(p for p, _ in _preorder(model) if p and p[-1] == leaf)
    value = (body, body.with_name("sub2")) if as_tuple else body
    return replace(model, path, lambda node: node.with_attrs(**{"branches" if as_tuple else "body": value}))


# -- random selectors ---------------------------------------------------------------------------

NAMES = ["n0", "n1", "n3", "g1", "g2", "body", "branches[0]", "branches[1]", "inner_missing", "sub"]
FILTER_ATOMS = [
    "is_op", "!is_op", "type == 'Dot'", "type == 'MatMul'", "type != 'Add'", "name == 'n1'", "name == 'g1'",
    "attrs.i > `5`", "attrs.i < `0`", "attrs.i == `0`", "attrs.i == `1`", "attrs.i", "attrs.debug",
    "attrs.debug == `true`", "own_attrs.debug", "own_attrs.i >= `2`", "attrs.tag == 'abc'", "attrs.k",
    "attrs.k[0] == `1`", "attrs.scale <= `0.5`", "depth >= `2`", "depth == `1`", "length(inputs) > `1`",
    "contains(path, 'g1')", "starts_with(name, 'n')", "namespace", "namespace == 'amanda/onnx/17'",
    "type == `null`", "path[0] == 'g1'", "outputs[0] == 'o0'", "@.name == 'n0'", "`0`", "`1` == `true`",
    "attrs.rnn_cell", "!attrs.i", "attrs.i == own_attrs.i", "inputs", "controls", "abs(depth) > `1`",
    "attrs.tag > 'b'", "attrs.missing.deeper", "uid == 'nope'", "length(attrs) > `1`", "sort(keys(own_attrs))[0] == 'i'",
]


@st.composite
def filters(draw: st.DrawFn, depth: int = 2) -> str:
    """A JMESPath filter over a node's view, built from atoms with &&, || and !."""
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(FILTER_ATOMS))
    kind = draw(st.sampled_from(["and", "or", "not"]))
    if kind == "not":
        return f"!({draw(filters(depth - 1))})"
    symbol = "&&" if kind == "and" else "||"
    return f"({draw(filters(depth - 1))} {symbol} {draw(filters(depth - 1))})"


@st.composite
def selector_steps(draw: st.DrawFn) -> tuple[str, list[tuple]]:
    """A selector as text, and the same selector as ``(axis, test, arg)`` steps."""
    steps: list[tuple] = []
    text = "$"
    for _ in range(draw(st.integers(0, 3))):
        axis = draw(st.sampled_from(["child", "descendant"]))
        test = draw(st.sampled_from(["name", "any", "index", "slice", "filter", "filter"]))
        lead = "." if axis == "child" else ".."
        if test == "name":
            name = draw(st.sampled_from(NAMES))
            if re.fullmatch(r"[\w-]+", name) and draw(st.booleans()):
                text += f"{lead}{name}"
            elif draw(st.booleans()):
                text += f'{lead}"{name}"'
            else:
                text += ("" if axis == "child" else "..") + f"['{name}']"
            arg: Any = name
        elif test == "any":
            text += draw(st.sampled_from([f"{lead}*", ("" if axis == "child" else "..") + "[*]"]))
            arg = None
        elif test == "index":
            arg = draw(st.integers(-3, 3))
            text += ("" if axis == "child" else "..") + f"[{arg}]"
        elif test == "slice":
            arg = draw(st.sampled_from([(1, None, None), (None, 2, None), (None, None, 2), (-2, None, None), (None, None, -1)]))
            shown = ":".join("" if a is None else str(a) for a in arg)
            text += ("" if axis == "child" else "..") + f"[{shown}]"
        else:
            arg = draw(filters())
            text += ("" if axis == "child" else "..") + f"[?{arg}]"
        steps.append((axis, test, arg))
    return text, steps


# -- the brute-force evaluator ------------------------------------------------------------------


def _preorder(root: Container) -> list[tuple[tuple, Container]]:
    return [(path, node) for path, node, _ in _entries(root)]


def _graphs(node: Container) -> list[tuple[str, Container]]:
    out = []
    for key in sorted(node.attrs):
        value = node.attrs[key]
        if isinstance(value, Container):
            out.append((key, value))
        elif isinstance(value, tuple) and value and all(isinstance(v, Container) for v in value):
            out.extend((f"{key}[{i}]", v) for i, v in enumerate(value))
    return out


def _entries(root: Container) -> list[tuple[tuple, Container, dict]]:
    """Every node with its path and effective attributes, recursively, in document order."""
    out: list[tuple[tuple, Container, dict]] = []

    def visit(path: tuple, node: Container, inherited: dict) -> None:
        mine = {**inherited, **node.attrs}
        out.append((path, node, mine))
        for child in node.children:
            visit(path + (child.name,), child, mine)
        for segment, graph in _graphs(node):
            visit(path + (segment,), graph, mine)

    visit((), root, {})
    return out


def node_at(root: Container, path: tuple) -> Container:
    """The node at ``path``, through children and held graphs alike."""
    return next(node for here, node, _ in _entries(root) if here == path)


def jsonish(value: Any) -> Any:
    """A value as JSON would hold it."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Container):
        return {"type": value.type, "name": value.name}
    if isinstance(value, (tuple, list)):
        return [jsonish(v) for v in value]
    if isinstance(value, Mapping):
        return {k: jsonish(v) for k, v in value.items()}
    return value


def brute_view(path: tuple, node: Container, attrs: dict) -> dict:
    """The documented view of one node, built directly."""
    return {
        "name": node.name, "type": node.type, "path": list(path), "depth": len(path),
        "attrs": jsonish(attrs), "own_attrs": jsonish(dict(node.attrs)),
        "inputs": [p.name for p in node.inputs], "outputs": [p.name for p in node.outputs],
        "controls": [p.name for p in node.controls], "is_op": not node.children,
        "namespace": jsonish(attrs.get("namespace")), "uid": node.uid,
    }


def truthy(value: Any) -> bool:
    return not (value == "" or value == [] or value == {} or value is None or value is False)


def brute_select(root: Container, steps: list[tuple]) -> list[tuple]:
    """The paths ``steps`` select, by definition: every step on every current node."""
    entries = _entries(root)
    order = {path: k for k, (path, _, _) in enumerate(entries)}
    by_path = {path: (path, node, attrs) for path, node, attrs in entries}

    def kids(path: tuple) -> list[tuple]:
        return [p for p in order if len(p) == len(path) + 1 and p[: len(path)] == path]

    current = [()]
    for axis, test, arg in steps:
        if axis == "descendant":
            base = [p for p in order if any(p[: len(c)] == c for c in current)]
        else:
            base = current
        found: list[tuple] = []
        for here in base:
            children = kids(here)
            real = [by_path[here][1].children[k].name for k in range(len(by_path[here][1].children))]
            real_paths = [here + (name,) for name in real]
            if test == "name":
                found += [p for p in children if p[-1] == arg][:1]
            elif test == "any":
                found += children
            elif test == "index":
                if -len(real_paths) <= arg < len(real_paths):
                    found.append(real_paths[arg])
            elif test == "slice":
                found += real_paths[slice(*arg)]
            else:
                found += [p for p in children if truthy(jmespath.search(arg, brute_view(*by_path[p])))]
        current = sorted(set(found), key=order.__getitem__)
    return current
