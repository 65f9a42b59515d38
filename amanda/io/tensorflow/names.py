"""TensorFlow names of the ops of an imported graph, and TensorFlow tensor names as endpoints.

An op's TensorFlow name is ``tf_node.name`` where import kept one (a node that is also a scope),
else its container's ``scope`` attribute (or the path of container names) joined to its own name
by ``/`` (``docs/tensorflow.md``, "Names"). :func:`endpoint` turns a tensor name as TensorFlow
writes it (``dense/MatMul:0``, a manifest's or a signature's) into the amanda endpoint that
carries the value, to fetch or feed it in a Session.

>>> import amanda
>>> from amanda.io.tensorflow.protos import message
>>> from amanda.io.tensorflow.read_graph import from_graph_def
>>> gd = message("tensorflow.GraphDef")()
>>> gd.node.add(name="x", op="Placeholder").attr["dtype"].type = 1
>>> gd.node.add(name="dense/MatMul", op="Identity", input=["x"]).attr["T"].type = 1
>>> gd.node.add(name="dense/MatMul/inner", op="Identity", input=["dense/MatMul"]).attr["T"].type = 1
>>> g = from_graph_def(gd, "g")
>>> endpoint(g, "dense/MatMul:0"), endpoint(g, "dense/MatMul/inner")
(Endpoint('dense/MatMul_', 'output'), Endpoint('dense/MatMul/inner', 'output'))
"""

from __future__ import annotations

from amanda.containers.container import Container
from amanda.containers.edge import Endpoint
from amanda.errors import ArgumentError, suggest
from amanda.io.tensorflow.functions import is_call
from amanda.io.tensorflow.read_nodes import NODE_ATTR

__all__ = ["endpoint", "op_path", "tf_names"]


def tf_names(root: Container) -> dict[tuple, tuple[str, Container]]:
    """Leaf path -> (TensorFlow name, the op as it is in ``root``: call containers whole)."""
    found: dict[tuple, tuple[str, Container]] = {}
    stack: list[tuple[tuple, Container, str]] = [((c.name,), c, "") for c in reversed(root.children)]
    while stack:
        path, node, scope = stack.pop()
        if not node.children or is_call(node):
            kept = (node._attrs.get(NODE_ATTR) or {}).get("name")
            found[path] = (kept or (f"{scope}/{node.name}" if scope else str(node.name)), node)
            continue
        inner = node._attrs.get("scope") or (f"{scope}/{node.name}" if scope else str(node.name))
        stack += [((*path, c.name), c, inner) for c in reversed(node.children)]
    return found


def op_path(graph: Container, name: str, where: str = "name") -> tuple[str, ...]:
    """The path of the op TensorFlow calls ``name`` in ``graph`` (to run it, or to find it),
    or ArgumentError with a did-you-mean.

    >>> import amanda
    >>> from amanda.io.tensorflow.protos import message
    >>> from amanda.io.tensorflow.read_graph import from_graph_def
    >>> gd = message("tensorflow.GraphDef")(); _ = gd.node.add(name="train/init", op="NoOp")
    >>> op_path(from_graph_def(gd, "g"), "train/init")
    ('train', 'init')
    """
    if not isinstance(graph, Container):
        raise ArgumentError.at("graph", "a Container", type(graph).__name__)
    if type(name) is not str or not name:
        raise ArgumentError.at(where, "a TensorFlow node name", repr(name)[:60])
    by_name = {tf_name: path for path, (tf_name, _) in tf_names(graph).items()}
    found = by_name.get(name)
    if found is None:
        raise ArgumentError.at(where, "the name of a node of the graph", repr(name), suggest(name, by_name))
    return found


def endpoint(graph: Container, tensor: str) -> Endpoint:
    """The endpoint (op path, output port) of TensorFlow tensor ``tensor`` (``name`` or
    ``name:index``) in ``graph``, or ArgumentError with a did-you-mean."""
    if not isinstance(graph, Container):
        raise ArgumentError.at("graph", "a Container", type(graph).__name__)
    if type(tensor) is not str or not tensor:
        raise ArgumentError.at("tensor", "a TensorFlow tensor name (node or node:index)", repr(tensor)[:60])
    name, _, index = tensor.partition(":")
    path = op_path(graph, name, "tensor")
    op = graph
    for step in path:
        op = op.child(step)
    number = int(index) if index.isdigit() else -1 if index else 0
    if not 0 <= number < len(op.outputs):
        raise ArgumentError.at("tensor", f"an output index of {name} (0..{len(op.outputs) - 1})", repr(index))
    return Endpoint(path, op.output_names[number])
