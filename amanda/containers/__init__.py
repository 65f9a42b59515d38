"""Containers: the immutable data model, its invariants, the effective view and traversal."""

from amanda.containers.container import Container, new_uid, op
from amanda.containers.edge import CONTROL, SELF, Edge, Endpoint, Port
from amanda.containers.flatten import FlatGraph, flatten
from amanda.containers.traverse import effective_attrs, iter_ops, sorted_ops, walk

__all__ = [
    "CONTROL",
    "SELF",
    "Container",
    "Edge",
    "Endpoint",
    "FlatGraph",
    "Port",
    "effective_attrs",
    "flatten",
    "iter_ops",
    "new_uid",
    "op",
    "sorted_ops",
    "walk",
]
