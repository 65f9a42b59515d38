"""Containers: the immutable data model, its invariants, the effective view, traversal,
composition and non-destructive edits."""

from amanda.containers.compose import CompositionError, chain, named_merge
from amanda.containers.consolidate import consolidate
from amanda.containers.container import Container, new_uid, op
from amanda.containers.diff import Change, Diff, diff
from amanda.containers.edge import CONTROL, SELF, Edge, Endpoint, Port
from amanda.containers.edit import Edit, edit
from amanda.containers.extract import extract
from amanda.containers.flatten import FlatGraph, flatten
from amanda.containers.fusion import fuse, unfuse
from amanda.containers.phases import bind, phases
from amanda.containers.traverse import effective_attrs, iter_ops, sorted_ops, walk
from amanda.containers.update import replace, with_attrs
from amanda.containers.weights import LoadedWeights, load_weights, save_weights

__all__ = [
    "CONTROL",
    "SELF",
    "Change",
    "CompositionError",
    "Container",
    "Diff",
    "Edge",
    "Edit",
    "Endpoint",
    "FlatGraph",
    "LoadedWeights",
    "Port",
    "bind",
    "chain",
    "consolidate",
    "diff",
    "edit",
    "extract",
    "effective_attrs",
    "flatten",
    "fuse",
    "iter_ops",
    "load_weights",
    "named_merge",
    "new_uid",
    "op",
    "phases",
    "replace",
    "save_weights",
    "sorted_ops",
    "unfuse",
    "walk",
    "with_attrs",
]
