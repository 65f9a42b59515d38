"""Hypothesis strategies for op schemas and namespaces."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from amanda.namespaces import AttrSchema, Namespace, OpSchema, PortSchema

identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
type_strings = st.sampled_from(["tensor(float)", "tensor(int64)", "seq(tensor(float))",
                                "map(int64, float)", "tensor(string)"])
texts = st.text(max_size=20)
floats = st.floats(allow_nan=True, allow_infinity=True, width=64)

_tensors = st.one_of(
    st.lists(st.floats(width=32, allow_nan=False), max_size=4).map(
        lambda v: np.array(v, dtype=np.float32)),
    st.lists(st.integers(-2**40, 2**40), min_size=1, max_size=6).map(
        lambda v: np.array(v, dtype=np.int64).reshape(-1, 1)),
)

DEFAULTS: dict[str, st.SearchStrategy[Any]] = {
    "int": st.integers(-2**63, 2**63 - 1),
    "float": floats,
    "string": texts,
    "bool": st.booleans(),
    "dtype": st.sampled_from(["float32", "int64", "bool", 1, 7, "FLOAT"]),
    "ints": st.lists(st.integers(-10**12, 10**12), max_size=4),
    "floats": st.lists(floats, max_size=4),
    "strings": st.lists(texts, max_size=3),
    "shape": st.lists(st.one_of(st.integers(-1, 64), st.none(), identifiers), max_size=4),
    "tensor": _tensors,
    "graph": st.none(),
}


@st.composite
def attr_schemas(draw: st.DrawFn, name: str | None = None) -> AttrSchema:
    """A random attribute schema: required, optional with a default, or optional without."""
    type_ = draw(st.sampled_from(sorted(DEFAULTS)))
    name = name or draw(identifiers)
    kind = draw(st.sampled_from(["required", "default", "optional"]))
    if kind == "required" or type_ == "graph":
        return AttrSchema(name, type_, required=kind == "required")
    default = draw(DEFAULTS[type_]) if kind == "default" else None
    return AttrSchema(name, type_, required=False, default=default)


@st.composite
def port_schemas(draw: st.DrawFn, names: list[str], constraints: list[str],
                 last_variadic: bool) -> tuple[PortSchema, ...]:
    ports = []
    for i, name in enumerate(names):
        tc = draw(st.none() | st.sampled_from(constraints)) if constraints else None
        allowed = () if tc else tuple(draw(st.lists(type_strings, max_size=2, unique=True)))
        variadic = last_variadic and i == len(names) - 1
        ports.append(PortSchema(
            name, optional=draw(st.booleans()), variadic=variadic, type_constraint=tc,
            allowed_types=allowed, homogeneous=draw(st.booleans()) if variadic else True,
            min_arity=draw(st.integers(0, 2)) if variadic else 1))
    return tuple(ports)


@st.composite
def op_schemas(draw: st.DrawFn, type_: str | None = None) -> OpSchema:
    """A random op schema exercising every field of the format."""
    constraints = draw(st.dictionaries(st.sampled_from(["T", "T1", "I"]),
                                       st.lists(type_strings, min_size=1, max_size=3,
                                                unique=True).map(tuple), max_size=2))
    in_names = draw(st.lists(identifiers, max_size=4, unique=True))
    out_names = draw(st.lists(identifiers, max_size=3, unique=True))
    attr_names = draw(st.lists(identifiers, max_size=5, unique=True))
    subgraph = draw(st.none() | st.fixed_dictionaries(
        {"ops": st.lists(st.fixed_dictionaries({"name": identifiers, "type": identifiers}),
                         max_size=2),
         "edges": st.lists(texts, max_size=2)}))
    return OpSchema(
        type_ or draw(identifiers),
        domain=draw(st.sampled_from(["", "ai.onnx.ml", "com.example"])),
        since_version=draw(st.integers(1, 30)),
        inputs=draw(port_schemas(in_names, list(constraints), draw(st.booleans()))),
        outputs=draw(port_schemas(out_names, list(constraints), draw(st.booleans()))),
        attrs=[draw(attr_schemas(n)) for n in attr_names],
        type_constraints=constraints,
        doc=draw(st.text(max_size=40)),
        deprecated=draw(st.booleans()),
        subgraph=subgraph,
    )


@st.composite
def namespaces(draw: st.DrawFn) -> Namespace:
    """A random namespace with a few op schemas."""
    segments = draw(st.lists(st.from_regex(r"[a-z][a-z0-9_.-]{0,6}", fullmatch=True),
                             min_size=1, max_size=3))
    name = "/".join(segments)
    types = draw(st.lists(identifiers, max_size=4, unique=True))
    fallback = draw(st.booleans()) and "/" in name
    return Namespace(
        name,
        schemas=[draw(op_schemas(t)) for t in types],
        parent=draw(st.none() | st.just("amanda/base")),
        fallback=fallback,
        source=draw(st.text(max_size=20)),
        version=draw(st.none() | st.integers(0, 99) | st.just("1.13.1")),
        retired=draw(st.dictionaries(identifiers, st.text(max_size=20), max_size=2)),
    )
