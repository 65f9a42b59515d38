"""Shared hypothesis strategies: random dataflow graphs, built flat or nested.

A *plan* is plain data: leaf ops with ports and attributes, data edges (each leaf
input fed at most once), control edges, and top-level boundary ports. ``build_flat``
makes every op a direct child; ``build_nested`` groups ops into random subgraphs
and forwards every crossing value through their boundary ports, so both have the
same effective dataflow. ``dataflow`` reads that dataflow back from ``flatten``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import amanda
from amanda import SELF, Container, op

ATTR_VALUES = st.one_of(
    st.integers(-1000, 1000),
    st.booleans(),
    st.text("abcxyz_", max_size=6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.lists(st.integers(0, 9), max_size=4),
    st.builds(
        lambda shape, dtype, seed: np.random.default_rng(seed).integers(-5, 5, size=shape).astype(dtype),
        st.lists(st.integers(0, 3), max_size=3).map(tuple),
        st.sampled_from(["float32", "int64", "int8", "float64", "bool"]),
        st.integers(0, 100),
    ),
)
ATTRS = st.dictionaries(st.sampled_from(["i", "debug", "k", "scale", "tag"]), ATTR_VALUES, max_size=3)
OP_TYPES = ["Add", "Relu", "Dot", "MatMul", "Const", "Split"]


@dataclass
class Plan:
    """A random dataflow graph as plain data."""

    ops: list[dict[str, Any]]  # {name, type, inputs, outputs, attrs}
    edges: list[tuple[str, str, str, str]]  # (src op, src port, dst op, dst port)
    controls: list[tuple[str, str]]  # (src op, dst op)
    top_inputs: list[tuple[str, str, str]] = field(default_factory=list)  # (top port, dst op, dst port)
    top_outputs: list[tuple[str, str, str]] = field(default_factory=list)  # (top port, src op, src port)


@st.composite
def plans(draw: st.DrawFn, max_ops: int = 10) -> Plan:
    """A random acyclic plan: edges only go from earlier to later ops."""
    count = draw(st.integers(1, max_ops))
    ops = []
    for i in range(count):
        ops.append(
            {
                "name": f"n{i}",
                "type": draw(st.sampled_from(OP_TYPES)),
                "inputs": [f"i{k}" for k in range(draw(st.integers(0, 3)))],
                "outputs": [f"o{k}" for k in range(draw(st.integers(1, 2)))],
                "attrs": draw(ATTRS),
            }
        )
    edges, top_inputs = [], []
    for j, dst in enumerate(ops):
        for port in dst["inputs"]:
            choice = draw(st.integers(0, 3))
            if j > 0 and choice < 3:
                src = ops[draw(st.integers(0, j - 1))]
                edges.append((src["name"], draw(st.sampled_from(src["outputs"])), dst["name"], port))
            elif choice == 3:
                top_inputs.append((f"x{len(top_inputs)}", dst["name"], port))
    controls = []
    if count > 1:
        for _ in range(draw(st.integers(0, 3))):
            a = draw(st.integers(0, count - 2))
            b = draw(st.integers(a + 1, count - 1))
            if (ops[a]["name"], ops[b]["name"]) not in controls:
                controls.append((ops[a]["name"], ops[b]["name"]))
    top_outputs = []
    for k in range(draw(st.integers(0, 2))):
        src = ops[draw(st.integers(0, count - 1))]
        top_outputs.append((f"y{k}", src["name"], draw(st.sampled_from(src["outputs"]))))
    return Plan(ops, edges, controls, top_inputs, top_outputs)


def _leaf(spec: dict[str, Any]) -> Container:
    return op(spec["type"], spec["name"], spec["inputs"], spec["outputs"], spec["attrs"])


def build_flat(plan: Plan, name: str = "top") -> Container:
    """Every op a direct child of one container."""
    edges = [(f"{a}:{p}", f"{b}:{q}") for a, p, b, q in plan.edges]
    edges += [(f"{a}:-1", f"{b}:-1") for a, b in plan.controls]
    edges += [((SELF, x), f"{b}:{q}") for x, b, q in plan.top_inputs]
    edges += [(f"{a}:{p}", (SELF, y)) for y, a, p in plan.top_outputs]
    return Container(
        "Graph", name,
        inputs=[x for x, _, _ in plan.top_inputs], outputs=[y for y, _, _ in plan.top_outputs],
        children=[_leaf(s) for s in plan.ops], edges=edges,
    )


@st.composite
def groupings(draw: st.DrawFn, names: list[str], depth: int = 0) -> list:
    """A random tree over ``names`` in order: each item a name or a nested list."""
    items: list = []
    rest = list(names)
    while rest:
        take = draw(st.integers(1, len(rest)))
        chunk, rest = rest[:take], rest[take:]
        if len(chunk) > 1 and depth < 3 and draw(st.booleans()):
            items.append(draw(groupings(chunk, depth + 1)))
        else:
            items.extend(chunk)
    return items


def build_nested(plan: Plan, grouping: list, name: str = "top", group_attrs: dict | None = None) -> Container:
    """The plan with ops grouped as ``grouping`` says; crossing values go through ports."""
    where: dict[str, tuple[str, ...]] = {}  # op name -> path of group names to it
    counter = [0]

    def place(items: list, prefix: tuple[str, ...]) -> None:
        for item in items:
            if isinstance(item, list):
                counter[0] += 1
                place(item, prefix + (f"g{counter[0]}",))
            else:
                where[item] = prefix

    place(grouping, ())
    # the data route of every value: sources' group outputs and destinations' group inputs
    routes = [((a, p), (b, q)) for a, p, b, q in plan.edges]
    routes += [((None, x), (b, q)) for x, b, q in plan.top_inputs]
    routes += [((a, p), (None, y)) for y, a, p in plan.top_outputs]
    specs = {s["name"]: s for s in plan.ops}
    group_edges: dict[tuple[str, ...], list] = {}
    group_ports: dict[tuple[str, ...], tuple[dict, dict]] = {}

    def ports(g: tuple[str, ...]) -> tuple[dict, dict]:
        return group_ports.setdefault(g, ({}, {}))

    for (a, p), (b, q) in routes:
        src_path = where[a] if a is not None else ()
        dst_path = where[b] if b is not None else ()
        common = 0
        while common < min(len(src_path), len(dst_path)) and src_path[common] == dst_path[common]:
            common += 1
        lca = src_path[:common]
        # climb out of the source's groups
        src_ref: Any = (SELF, p) if a is None else ((a,), p)
        value = f"v_{a}_{p}" if a is not None else f"v_top_{p}"
        for level in range(len(src_path), common, -1):
            g = src_path[:level]
            outs = ports(g)[1]
            if value not in outs:
                outs[value] = True
                group_edges.setdefault(g, []).append((src_ref, (SELF, value)))
            src_ref = ((g[-1],), value)
        # descend into the destination's groups
        dst_value = f"w_{b}_{q}" if b is not None else f"w_top_{q}"
        dst_ref: Any = (SELF, q) if b is None else ((b,), q)
        for level in range(len(dst_path), common, -1):
            g = dst_path[:level]
            ports(g)[0][dst_value] = True
            group_edges.setdefault(g, []).append(((SELF, dst_value), dst_ref))
            dst_ref = ((g[-1],), dst_value)
        group_edges.setdefault(lca, []).append((src_ref, dst_ref))
    for a, b in plan.controls:
        pa, pb = where[a], where[b]
        common = 0
        while common < min(len(pa), len(pb)) and pa[common] == pb[common]:
            common += 1
        lca = pa[:common]
        group_edges.setdefault(lca, []).append(((pa[common:] + (a,), -1), (pb[common:] + (b,), -1)))

    def build(items: list, prefix: tuple[str, ...], number: list) -> list[Container]:
        out = []
        for item in items:
            if isinstance(item, list):
                number[0] += 1
                g = prefix + (f"g{number[0]}",)
                inputs, outputs = ports(g)
                out.append(
                    Container(
                        "Group", g[-1], inputs=list(inputs), outputs=list(outputs),
                        children=build(item, g, number), edges=group_edges.get(g, []),
                        attrs=(group_attrs or {}).get(g[-1]),
                    )
                )
            else:
                out.append(_leaf(specs[item]))
        return out

    children = build(grouping, (), [0])
    return Container(
        "Graph", name,
        inputs=[x for x, _, _ in plan.top_inputs], outputs=[y for y, _, _ in plan.top_outputs],
        children=children, edges=group_edges.get((), []),
    )


@st.composite
def nested_containers(draw: st.DrawFn, max_ops: int = 10) -> tuple[Plan, Container]:
    """A random plan and a random nesting of it."""
    plan = draw(plans(max_ops))
    grouping = draw(groupings([s["name"] for s in plan.ops]))
    return plan, build_nested(plan, grouping)


def containers(max_ops: int = 10) -> st.SearchStrategy[Container]:
    """Random nested containers with data edges, control edges and attributes."""
    return nested_containers(max_ops).map(lambda pair: pair[1])


def dataflow(container: Container) -> set[tuple]:
    """The effective edges as (src leaf name or SELF, port, dst leaf name or SELF, port)."""
    out = set()
    for edge in amanda.flatten(container).edges:
        src = "SELF" if edge.src.op is SELF else edge.src.op[-1]
        dst = "SELF" if edge.dst.op is SELF else edge.dst.op[-1]
        out.add((src, edge.src.port, dst, edge.dst.port))
    return out


def plan_dataflow(plan: Plan) -> set[tuple]:
    """The dataflow a plan describes, in the form :func:`dataflow` returns."""
    out = {(a, p, b, q) for a, p, b, q in plan.edges}
    out |= {(a, -1, b, -1) for a, b in plan.controls}
    out |= {("SELF", x, b, q) for x, b, q in plan.top_inputs}
    out |= {(a, p, "SELF", y) for y, a, p in plan.top_outputs}
    return out


def check_invariants(container: Container) -> None:
    """Rebuild every node through the full constructor: raises if any invariant fails,
    which catches transforms that skipped a check they needed."""
    for _, node, _ in amanda.walk(container):
        again = Container(
            node.type, node.name, inputs=node.inputs, outputs=node.outputs, children=node.children, edges=node.edges,
            tombstones=node.tombstones, attrs=node.attrs, uid=node.uid, controls=node.controls,
        )
        assert again == node


def snapshot(container: Container) -> dict:
    """Everything about a container, uids included, as plain data."""
    from amanda.io import to_document

    return to_document(container)


@st.composite
def chains(draw: st.DrawFn, min_layers: int = 1, max_layers: int = 5) -> list[Container]:
    """Random single-input, single-output layers (ops or small subgraphs) for chaining."""
    layers = []
    for i in range(draw(st.integers(min_layers, max_layers))):
        if draw(st.booleans()):
            layers.append(op(draw(st.sampled_from(OP_TYPES)), f"L{i}", ["x"], ["y"], draw(ATTRS)))
        else:
            inner = [op("Relu", f"r{i}_{k}", ["x"], ["y"]) for k in range(draw(st.integers(1, 3)))]
            edges = [(f"L{i}:x", f"{inner[0].name}:x")]
            edges += [(f"{a.name}:y", f"{b.name}:x") for a, b in zip(inner, inner[1:])]
            edges += [(f"{inner[-1].name}:y", f"L{i}:y")]
            layers.append(Container("Block", f"L{i}", inputs=["x"], outputs=["y"], children=inner, edges=edges, attrs=draw(ATTRS)))
    return layers


def leaf_attrs(container: Container) -> dict[str, dict]:
    """Every leaf op's effective attributes (as ``amanda.walk`` gives them), keyed by uid."""
    return {node.uid: dict(attrs) for _, node, attrs in amanda.walk(container) if node.is_op}


def same_leaf_attrs(a: Container, b: Container) -> bool:
    """Whether the leaves of ``a`` and ``b`` (paired by uid) have equal effective attributes."""
    from amanda.containers.values import attrs_equal

    left, right = leaf_attrs(a), leaf_attrs(b)
    return left.keys() == right.keys() and all(attrs_equal(left[k], right[k]) for k in left)


# -- attribute values of every kind, for round-trip and immutability properties ---------------

class _Level(IntEnum):
    LOW = 1


# strings YAML would read as something else if written plain, and strings that are not UTF-8
SPECIAL_STRINGS = st.sampled_from(
    ["yes", "No", "null", "~", "1e3", ".nan", "-.inf", "0x1f", "0o7", "on", "<<", "=", "", " x ",
     "true", "2001-12-14", "12:30", "- a", "#c", "\ud800", "a\udfffb", "\x85", "\u2028", "\x00"]
)
# built by map: hypothesis cannot repr a strategy holding a 5,000-digit literal
HUGE_INTS = st.integers(60, 20_000).flatmap(
    lambda bits: st.sampled_from([2**bits + 1, -(2**bits), -(3 ** (bits // 2))])
)
NUMPY_SCALARS = st.sampled_from(
    [np.float64(1.5), np.float64("nan"), np.float32(-0.0), np.int64(-7), np.bool_(True),
     np.str_("yes"), np.bytes_(b"ab"), np.uint8(255), np.float16(2), np.complex64(1 - 2j)]
)
_ARRAY_DTYPES = st.one_of(
    hnp.boolean_dtypes(),
    hnp.integer_dtypes(endianness="?"),
    hnp.unsigned_integer_dtypes(endianness="?"),
    hnp.floating_dtypes(endianness="?"),
    hnp.complex_number_dtypes(endianness="?"),
    hnp.datetime64_dtypes(endianness="?"),
    hnp.timedelta64_dtypes(endianness="?"),
    hnp.byte_string_dtypes(min_len=1, max_len=3),
    hnp.unicode_string_dtypes(min_len=1, max_len=3),
)
ARRAYS = hnp.arrays(_ARRAY_DTYPES, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))


def _ml_array(pair: tuple[str, int]) -> np.ndarray:
    import ml_dtypes

    return np.arange(pair[1], dtype=np.float32).astype(getattr(ml_dtypes, pair[0]))


ML_ARRAYS = st.tuples(st.sampled_from(["bfloat16", "float8_e4m3fn"]), st.integers(0, 4)).map(_ml_array)
DTYPES = st.one_of(_ARRAY_DTYPES, st.sampled_from(["bfloat16", "float8_e5m2"]).map(
    lambda name: np.dtype(getattr(__import__("ml_dtypes"), name))))
# keys that look like markers, or like the fields a document lifts out of attributes
VALUE_KEYS = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["__ndarray__", "__bytes__", "__container__", "__dtype__", "__float__",
                     "__int__", "__str__", "__mapping__", "__x", "name", "type", "namespace"]),
)
SCALAR_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), HUGE_INTS, st.floats(), st.binary(max_size=6),
    st.text(max_size=6), SPECIAL_STRINGS, NUMPY_SCALARS, st.just(_Level.LOW),
)
LEAF_VALUES = st.one_of(SCALAR_VALUES, ARRAYS, ML_ARRAYS, DTYPES)


@st.composite
def bodies(draw: st.DrawFn) -> Container:
    """A small container to store as an attribute (an ONNX body): an op, or a subgraph whose
    child carries an attribute, maybe with a body of its own."""
    attrs = _interpretable(draw(st.dictionaries(VALUE_KEYS, LEAF_VALUES, max_size=2)))
    leaf = op("Leaf", "leaf", ["x"], ["y"], attrs)
    if draw(st.booleans()):
        return leaf
    if draw(st.booleans()):
        leaf = leaf.with_attrs(body=op("Inner", "inner", ["a"], ["b"], {"v": draw(LEAF_VALUES)}))
    return Container("Body", "body", inputs=["x"], outputs=["y"], children=[leaf], edges=[("body:x", "leaf:x"), ("leaf:y", "body:y")])


ATTRIBUTE_VALUES = st.recursive(
    st.one_of(LEAF_VALUES, bodies()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.tuples(inner), st.dictionaries(VALUE_KEYS, inner, max_size=3)
    ),
    max_leaves=8,
)
"""Every kind of attribute value the constructor accepts, nested in lists and mappings."""


def _interpretable(attrs: dict) -> dict:
    """Attributes amanda interprets (a namespace …) only with values it accepts; others as drawn."""
    from amanda.containers.arguments import INTERPRETED_ATTRS

    return {k: v for k, v in attrs.items() if k not in INTERPRETED_ATTRS or v is None or INTERPRETED_ATTRS[k][0](v)}


@st.composite
def valued_containers(draw: st.DrawFn, values: st.SearchStrategy = ATTRIBUTE_VALUES) -> Container:
    """A container with random attribute values on itself, a child, a port and an edge:
    an op, a named subgraph or an unnamed graph."""
    attrs = st.dictionaries(st.text(max_size=6) | st.sampled_from(["name", "type", "namespace"]), values,
                            max_size=3).map(_interpretable)
    port_attrs = draw(st.dictionaries(st.text(max_size=4), values, max_size=2))
    child = op("Child", "child", [amanda.Port("x", attrs=port_attrs)], ["y"], draw(attrs))
    kind = draw(st.sampled_from(["op", "subgraph", "graph"]))
    if kind == "op":
        return op("Top", "top", ["x"], ["y"], draw(attrs))
    edge = amanda.Edge("top:x", "child:x", attrs=draw(st.dictionaries(st.text(max_size=4), values, max_size=2)))
    name, type_ = ("top", "Top") if kind == "subgraph" else (None, None)
    edges = [edge] if kind == "subgraph" else []
    return Container(type_, name, inputs=["x"] if name else [], outputs=[], children=[child], edges=edges, attrs=draw(attrs))
