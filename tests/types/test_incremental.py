"""Incremental type inference: after any sequence of edits, the types inferred with every cache
of the earlier versions warm equal a full inference of a fresh copy of the edited model."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import amanda
from amanda.types import TensorType, infer_types
from amanda.types import infer as infer_module

NS = {"namespace": "amanda/onnx/17"}
INPUTS = [("float32", ("batch", 4, 3)), ("float64", (2, 4, 3)), ("int64", (5, 4, 3))]

# leaf op types that can replace one another, grouped by their port names
_XY = [("Relu", {}), ("Neg", {}), ("Abs", {}), ("Sqrt", {})]
_IO = [("Identity", {}), ("Cast", {"to": 1}), ("Cast", {"to": 7}), ("Cast", {"to": 11})]
_DT = [("Transpose", {}), ("Transpose", {"perm": [0, 2, 1]})]
GROUPS = {"XY": (_XY, "X", "Y"), "IO": (_IO, "input", "output"), "DT": (_DT, "data", "transposed")}


def _leaf(group: str, k: int, name: str) -> amanda.Container:
    kinds, i, o = GROUPS[group]
    op_type, attrs = kinds[k % len(kinds)]
    return amanda.op(op_type, name, inputs=[i], outputs=[o], attrs=attrs)


def _ports(node: amanda.Container) -> tuple[str, str]:
    return node.inputs[0].name, node.outputs[0].name


def _chain(kind: str | None, name: str, children: list[amanda.Container], attrs: Any = None) -> amanda.Container:
    edges: list[Any] = [(f"{name}:x", f"{children[0].name}:{_ports(children[0])[0]}")]
    for a, b in zip(children, children[1:]):
        edges.append((f"{a.name}:{_ports(a)[1]}", f"{b.name}:{_ports(b)[0]}"))
    edges.append((f"{children[-1].name}:{_ports(children[-1])[1]}", f"{name}:y"))
    return amanda.Container(kind, name, inputs=["x"], outputs=["y"], children=children, edges=edges, attrs=attrs or {})


@st.composite
def trees(draw: st.DrawFn, name: str = "model", depth: int = 0) -> amanda.Container:
    """A chain of ops and nested chains, at most three levels deep."""
    count = draw(st.integers(1, 4))
    children = []
    for i in range(count):
        child = f"{name[0]}{depth}c{i}"
        if depth < 3 and draw(st.booleans()):
            children.append(draw(trees(child, depth + 1)))
        else:
            children.append(_leaf(draw(st.sampled_from(sorted(GROUPS))), draw(st.integers(0, 3)), child))
    return _chain(None if depth == 0 else "Block", name, children, NS if depth == 0 else None)


def _leaves(model: amanda.Container) -> list[tuple[str, ...]]:
    return sorted(amanda.flatten(model).ops)


def _sibling_edges(model: amanda.Container) -> list[tuple[tuple, str, tuple, str]]:
    """(src path, port, dst path, port) of every edge between two siblings, paths from the root."""
    found = []
    stack: list[tuple[tuple, amanda.Container]] = [((), model)]
    while stack:
        path, node = stack.pop()
        for edge in node.edges:
            src, dst = edge.src, edge.dst
            if src.op is not amanda.SELF and dst.op is not amanda.SELF and len(src.op) == 1 and len(dst.op) == 1:
                found.append((path + tuple(src.op), src.port, path + tuple(dst.op), dst.port))
        stack.extend((path + (c.name,), c) for c in node.children)
    return found


def _apply(model: amanda.Container, edit: tuple, number: int, removed: set) -> amanda.Container:
    kind, pick, k = edit
    if kind == "replace":
        path = _leaves(model)[pick % len(_leaves(model))]
        old = amanda.flatten(model).ops[path]
        group = next(g for g, (_, i, o) in GROUPS.items() if (i, o) == _ports(old))
        return amanda.replace(model, "/".join(path), _leaf(group, k, path[-1]))
    if kind == "wrap":
        return amanda.chain(model, name=f"wrap{number}")
    edges = [e for e in _sibling_edges(model) if e not in removed]
    if not edges:
        return model
    src, src_port, dst, dst_port = edges[pick % len(edges)]
    removed.add((src, src_port, dst, dst_port))
    top = model.name
    e = amanda.edit(model)
    e.remove_edge(f"{top}/{'/'.join(src)}:{src_port}", f"{top}/{'/'.join(dst)}:{dst_port}")
    e.add(amanda.op("Neg", "inserted", inputs=["X"], outputs=["Y"], attrs=NS))
    e.connect(f"{top}/{'/'.join(src)}:{src_port}", "inserted:X")
    e.connect("inserted:Y", f"{top}/{'/'.join(dst)}:{dst_port}")
    wrapped = e.build(name=f"edit{number}")
    # the wrapper's own edges name the model by its name: later picks see them with this prefix
    return wrapped


def _fresh(model: amanda.Container) -> amanda.Container:
    """The same model as new objects, no cache on any of them."""
    return amanda.loads(amanda.dumps(model, "json"), "json")


def _everything(types: Any) -> tuple[dict, list, list]:
    return dict(types), sorted(map(str, types.problems)), sorted(types.unknown_ops, key=str)


EDITS = st.tuples(st.sampled_from(["replace", "replace", "insert", "wrap"]), st.integers(0, 1000), st.integers(0, 3))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), st.lists(st.tuples(EDITS, st.sampled_from(range(len(INPUTS)))), min_size=1, max_size=5))
def test_inference_after_edits_equals_a_full_inference_from_scratch(model: amanda.Container, steps: list) -> None:
    """Each version, inferred while the caches of the versions before it are warm (and with the
    input type changing between versions), has exactly the types, problems and unknown ops of a
    full inference of a fresh copy."""
    removed: set = set()
    infer_types(model, {"x": INPUTS[0]})
    for number, (edit, which) in enumerate(steps):
        edited = _apply(model, edit, number, removed)
        if edit[0] in ("wrap", "insert") and edited is not model:  # an insert with no edge left wraps nothing
            removed = {((edited.child(0).name, *s), sp, (edited.child(0).name, *d), dp) for s, sp, d, dp in removed}
        model = edited
        inputs = {"x": INPUTS[which]}
        assert _everything(infer_types(model, inputs)) == _everything(infer_types(_fresh(model), inputs))


def _spine(levels: int) -> amanda.Container:
    inner = _chain("Block", "core", [_leaf("XY", 0, "relu"), _leaf("XY", 1, "neg")])
    for d in range(levels):
        inner = _chain("Level", f"l{d}", [_chain("Block", "b", [_leaf("XY", 0, "relu"), _leaf("XY", 2, "abs")]), inner])
    top = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs={"dtype": "float32", "shape": ["n", 4]})],
                           outputs=["y"], children=[inner], edges=[("g:x", f"{inner.name}:x"), (f"{inner.name}:y", "g:y")],
                           attrs=NS)
    return top


def test_an_edit_at_the_bottom_of_deep_nesting_infers_only_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a model nested 300 levels deep, replacing the innermost op infers that op and the one
    after it again, and nothing else (every level above answers from its cache or re-runs only
    its own children, which are containers)."""
    model = _spine(300)
    infer_types(model)
    calls: list = []
    real = infer_module.infer_op
    monkeypatch.setattr(infer_module, "infer_op", lambda op, *a: calls.append(op) or real(op, *a))
    path = tuple(f"l{d}" for d in range(299, -1, -1)) + ("core", "relu")
    edited = amanda.replace(model, "/".join(path), _leaf("XY", 2, "relu"))
    types = infer_types(edited)
    assert sorted(op.type for op in calls) == ["Abs", "Neg"]
    assert types[path, "Y"] == TensorType("float32", ("n", 4)) == types[(), "y"]
