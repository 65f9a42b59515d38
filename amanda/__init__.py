"""amanda: neural-network computation graphs as immutable containers.

>>> import amanda
>>> f = amanda.op("F", "f", inputs=["x", "y"], outputs=["m", "n"])
>>> g = amanda.op("G", "g", inputs=["z"], outputs=["k"])
>>> graph = amanda.Container(children=[f, g], edges=[("f:m", "g:z")])
>>> [op.name for op in graph.sorted()]
['f', 'g']
"""

import amanda.opset  # noqa: F401  (registers the shipped op families: kernel, type rule and gradient of each op)
from amanda import layers, ops, optim
from amanda.autodiff import grad, hvp, jvp
from amanda.build import Input, model
from amanda.containers import (
    CONTROL,
    SELF,
    CompositionError,
    Container,
    Edge,
    Edit,
    Endpoint,
    FlatGraph,
    LoadedWeights,
    Port,
    bind,
    chain,
    consolidate,
    diff,
    edit,
    effective_attrs,
    extract,
    flatten,
    fuse,
    load_weights,
    named_merge,
    op,
    replace,
    save_weights,
    unfuse,
    walk,
    with_attrs,
)
from amanda.errors import (
    AmandaError,
    ArgumentError,
    CycleError,
    ExecutionError,
    FormatError,
    InvariantError,
    MappingError,
    PathError,
    QueryError,
    RenderError,
    SchemaError,
)
from amanda.exec import Session
from amanda.io import dump, dumps, load, loads
from amanda.io.torch_capture import from_torch
from amanda.namespaces import namespace
from amanda.namespaces.model_fit import validate
from amanda.optim import freeze
from amanda.passes import optimize
from amanda.query import Selection, compile_selector, select
from amanda.rewrite import rewrite
from amanda.rewrite.mapping import MappingTable, NameMap, convert, load_mapping, register_table
from amanda.types import OptionalType, SequenceType, TensorType, TypeMap, infer_types
from amanda.version import __version__ as __version__
from amanda.viz import render, summary, to_dot

__all__ = [
    "AmandaError",
    "ArgumentError",
    "CONTROL",
    "CompositionError",
    "Container",
    "CycleError",
    "Edge",
    "Edit",
    "Endpoint",
    "ExecutionError",
    "FlatGraph",
    "FormatError",
    "Input",
    "InvariantError",
    "LoadedWeights",
    "MappingError",
    "MappingTable",
    "NameMap",
    "OptionalType",
    "PathError",
    "Port",
    "QueryError",
    "RenderError",
    "SELF",
    "SchemaError",
    "Selection",
    "SequenceType",
    "Session",
    "TensorType",
    "TypeMap",
    "bind",
    "chain",
    "compile_selector",
    "consolidate",
    "convert",
    "diff",
    "dump",
    "dumps",
    "edit",
    "effective_attrs",
    "extract",
    "flatten",
    "from_torch",
    "fuse",
    "infer_types",
    "load",
    "load_mapping",
    "load_weights",
    "loads",
    "model",
    "named_merge",
    "namespace",
    "op",
    "ops",
    "register_table",
    "render",
    "replace",
    "save_weights",
    "select",
    "summary",
    "to_dot",
    "unfuse",
    "validate",
    "walk",
    "with_attrs",
    "layers",
    "grad",
    "hvp",
    "jvp",
    "freeze",
    "optim",
    "optimize",
    "rewrite",
]
