"""A ``GraphDef`` -> a container in ``amanda/tensorflow/<version>`` (``docs/tensorflow.md``).

Every node becomes an op (or a call container, :mod:`.functions`) placed in the container of
its name scope (``dense/MatMul`` is the op ``MatMul`` in the container ``dense``), with the
nesting the ONNX importer uses for scope-path names (:func:`amanda.io.onnx.hierarchy.nest_graph`);
``hierarchy=False`` keeps them flat under their full names. Control inputs become control edges
(port ``-1``) held by the top container with full paths. The vocabulary is chosen from the
graph's ``versions.producer``: the oldest shipped one whose TensorFlow writes that producer or a
later one (ops are added, seldom removed), else the newest; the top container's ``namespace``
names it and its ``tensorflow`` attribute keeps the ``versions`` fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from amanda.containers.container import Container
from amanda.containers.edge import CONTROL, SELF, Edge, Endpoint, Port
from amanda.errors import FormatError
from amanda.io.onnx.hierarchy import check_hierarchy, nest_graph
from amanda.io.tensorflow.functions import Library
from amanda.io.tensorflow.read_nodes import Flat, read_nodes

__all__ = ["GRAPH_ATTR", "MAX_SCOPE_DEPTH", "PRODUCERS", "from_graph_def", "vocabulary_for"]

GRAPH_ATTR = "tensorflow"
MAX_SCOPE_DEPTH = 100  # nested containers deeper than this are refused (Python's stack is finite)
#: ``versions.producer`` (TF_GRAPH_DEF_VERSION) of the TensorFlow release of each vocabulary
PRODUCERS: Mapping[str, int] = {"amanda/tensorflow/1.13.1": 27, "amanda/tensorflow/2.21.0": 2474}


def vocabulary_for(producer: int) -> str:
    """The shipped vocabulary for a graph of ``producer``: the oldest whose release writes
    ``producer`` or later, else the newest.

    >>> vocabulary_for(27), vocabulary_for(10), vocabulary_for(1205), vocabulary_for(3000)
    ('amanda/tensorflow/1.13.1', 'amanda/tensorflow/1.13.1', 'amanda/tensorflow/2.21.0', 'amanda/tensorflow/2.21.0')
    """
    from amanda.namespaces.tensorflow_vocab import tensorflow_files

    known = sorted((PRODUCERS[name], name) for name in tensorflow_files() if name in PRODUCERS)
    for number, name in known:
        if producer <= number:
            return name
    return known[-1][1]


def _paths(children: list[Container], wanted: set[str]) -> dict[str, tuple[str, ...]]:
    """uid -> path of each op in ``wanted`` inside the nested ``children``."""
    found: dict[str, tuple[str, ...]] = {}
    stack: list[tuple[tuple[str, ...], Container]] = [((c.name or "",), c) for c in children]
    while stack:
        path, node = stack.pop()
        if node.uid in wanted:
            found[node.uid] = path
        else:
            stack += [((*path, c.name or ""), c) for c in node.children]
    return found


def build(flat: Flat, name: str, inputs: list[Port], outputs: list[Port], attrs: dict[str, Any],
          where: str, hierarchy: Any = True) -> Container:
    """The container of one graph or function body: ``flat``'s ops nested by name scope (unless
    ``hierarchy`` is False), control edges at the top with full paths."""
    if hierarchy is not False and flat.ops:
        deepest = max((op.name or "" for op in flat.ops), key=lambda text: text.count("/"))
        if deepest.count("/") > MAX_SCOPE_DEPTH:
            raise FormatError.at(f"{where}/{deepest[:80]}...", f"name scopes nested at most {MAX_SCOPE_DEPTH} "
                                 "deep (load with hierarchy=False to keep full names)", f"{deepest.count('/')} levels")
    # taken before nesting: nest_graph renames the reader's own ops in place to their names in the tree
    uid_of = {op.name: op.uid for op in flat.ops}
    fields: dict[str, Any] = {"name": name, "children": flat.ops, "edges": flat.edges, "info": {}, "extra": {}}
    if hierarchy is not False and flat.ops:
        fields = nest_graph(fields, "auto")
    children: list[Container] = list(fields["children"])
    edges: list[Edge] = list(fields["edges"])
    if flat.controls:
        paths = _paths(children, set(uid_of.values()))
        pairs = {(() if dst is None else paths[uid_of[dst]], () if src is None else paths[uid_of[src]])
                 for src, dst in flat.controls if src != dst}
        # sorted (by target, then source): the order nodes are listed in does not change the graph
        edges += [Edge(Endpoint(src or SELF, CONTROL), Endpoint(dst or SELF, CONTROL)) for dst, src in sorted(pairs)]
    try:
        return Container(None, name, inputs=inputs, outputs=outputs, children=children, edges=edges,
                         attrs=attrs)
    except FormatError:
        raise
    except Exception as exc:  # an InvariantError from names TensorFlow allows and amanda does not
        raise FormatError(f"{where}: the graph does not make a valid container: {exc}", path=where,
                          expected="a graph amanda can hold", found=type(exc).__name__) from exc


def from_graph_def(graph_def: Any, name: str = "graph", *, hierarchy: Any = True,
                   where: str | None = None, attrs: Mapping[str, Any] | None = None) -> Container:
    """The container of a parsed ``GraphDef`` message (see the module's docstring).

    >>> from amanda.io.tensorflow.protos import message
    >>> gd = message("tensorflow.GraphDef")()
    >>> _ = gd.node.add(name="x", op="Placeholder")
    >>> _ = gd.node.add(name="dense/Relu", op="Relu", input=["x"])
    >>> gd.versions.producer = 2474
    >>> g = from_graph_def(gd, "g")
    >>> g.namespace, g.child("dense").child("Relu").input_names
    ('amanda/tensorflow/2.21.0', ('features',))
    """
    check_hierarchy(hierarchy)
    from amanda.namespaces.namespace import namespace

    where = where or name
    vocabulary = vocabulary_for(graph_def.versions.producer)
    ns = namespace(vocabulary)
    versions = graph_def.versions
    info: dict[str, Any] = {"producer": versions.producer, "min_consumer": versions.min_consumer}
    if versions.bad_consumers:
        info["bad_consumers"] = tuple(versions.bad_consumers)

    def make(flat: Flat, fname: str, inputs: list[Port], outputs: list[Port], fattrs: dict, fwhere: str) -> Container:
        return build(flat, fname, inputs, outputs, fattrs, fwhere, hierarchy)

    library = Library(graph_def.library, ns, where, make)
    flat = read_nodes(graph_def.node, ns, where, library)
    top = {"namespace": vocabulary, GRAPH_ATTR: info, **(attrs or {})}
    return build(flat, name, [], [], top, where, hierarchy)
