"""amanda: neural-network computation graphs as immutable containers.

>>> import amanda
>>> f = amanda.op("F", "f", inputs=["x", "y"], outputs=["m", "n"])
>>> g = amanda.op("G", "g", inputs=["z"], outputs=["k"])
>>> graph = amanda.Container(children=[f, g], edges=[("f:m", "g:z")])
>>> [op.name for op in graph.sorted()]
['f', 'g']
"""

from amanda.containers import (
    CONTROL,
    SELF,
    Container,
    Edge,
    Endpoint,
    FlatGraph,
    Port,
    effective_attrs,
    flatten,
    op,
    walk,
)
from amanda.errors import (
    AmandaError,
    CycleError,
    ExecutionError,
    FormatError,
    InvariantError,
    MappingError,
    PathError,
    QueryError,
    SchemaError,
)
from amanda.io import dump, dumps, load, loads

__version__ = "0.1.0"

__all__ = [
    "CONTROL",
    "SELF",
    "AmandaError",
    "Container",
    "CycleError",
    "Edge",
    "Endpoint",
    "ExecutionError",
    "FlatGraph",
    "FormatError",
    "InvariantError",
    "MappingError",
    "PathError",
    "Port",
    "QueryError",
    "SchemaError",
    "dump",
    "dumps",
    "effective_attrs",
    "flatten",
    "load",
    "loads",
    "op",
    "walk",
]
