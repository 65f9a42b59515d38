"""A GraphDef's function library on import: each function's body, read once.

A function (``FunctionDef``) becomes a container named by the function, whose input and output
ports are its signature's arguments and results and whose children are its body's ops, nested by
name scope like the graph's. How the graph uses it decides the form:

- ``While``/``StatelessWhile`` (``cond``, ``body``) and ``If``/``StatelessIf`` (``then_branch``,
  ``else_branch``) hold the function containers in those attributes, as ONNX ``If``/``Loop``
  hold their bodies;
- ``PartitionedCall``/``StatefulPartitionedCall`` become *call containers*, as ONNX local
  function calls do: the node's name, type, ports (``args_<i>``, ``output_<i>``) and attributes,
  holding one child, the function's container (shared by every call and attribute that uses the
  function), wired to those ports. (The function is a child rather than the call's children
  themselves because a body often holds an op named like the call: ``StatefulPartitionedCall``.)

The function container keeps, in the attribute ``tf_function``, what export needs to write the
``FunctionDef`` again: its signature (an ``OpDef``) and its own ``attr``/``arg_attr``/
``resource_arg_unique_id``, serialized. A function calling itself is a FormatError.
"""

from __future__ import annotations

from typing import Any

from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Endpoint, Port
from amanda.errors import FormatError, suggest

__all__ = ["FUNCTION_ATTR", "MAX_DEPTH", "Library", "is_call"]

FUNCTION_ATTR = "tf_function"
MAX_DEPTH = 64  # functions calling functions: deeper chains are refused (Python's stack is finite)


def _function_info(fn: Any) -> dict[str, bytes]:
    rest = type(fn)()
    rest.CopyFrom(fn)
    for field in ("signature", "node_def", "ret", "control_ret"):
        rest.ClearField(field)
    return {"signature": fn.signature.SerializeToString(deterministic=True),
            "extra": rest.SerializeToString(deterministic=True)}


class Library:
    """The functions of one GraphDef, read on first use."""

    def __init__(self, library: Any, namespace: Any, where: str, build: Any) -> None:
        self.functions = {fn.signature.name: fn for fn in library.function}
        self.namespace, self.where = namespace, where
        self.build = build  # (Flat, name, inputs, outputs, attrs, where) -> Container
        self.bodies: dict[str, Container] = {}
        self.active: list[str] = []

    def _function(self, name: str, where: str) -> Any:
        fn = self.functions.get(name)
        if fn is None:
            raise FormatError.at(where, "a function of the graph's library", repr(name),
                                 suggest(name, self.functions))
        return fn

    def body(self, name: str, where: str) -> Container:
        """The container of function ``name``: its signature's ports, its body's ops."""
        found = self.bodies.get(name)
        if found is not None:
            return found
        if name in self.active:
            raise FormatError.at(where, "a function that does not call itself",
                                 " -> ".join([*self.active, name]))
        if len(self.active) >= MAX_DEPTH:
            raise FormatError.at(where, f"functions nested at most {MAX_DEPTH} deep",
                                 f"a deeper chain ({' -> '.join(self.active[:3])} ...)")
        fn = self._function(name, where)
        sig = fn.signature
        args = [a.name for a in sig.input_arg]
        outs = [a.name for a in sig.output_arg]
        for arg in outs:
            if arg not in fn.ret:
                raise FormatError.at(f"{self.where}/{name}.ret", f"a result for output {arg!r}", "none")
        from amanda.io.tensorflow.read_nodes import read_nodes

        self.active.append(name)
        try:
            flat = read_nodes(fn.node_def, self.namespace, f"{self.where}/{name}", self, args, args,
                              [(arg, fn.ret[arg]) for arg in outs], sorted(set(fn.control_ret.values())))
        finally:
            self.active.pop()
        body = self.build(flat, name, [Port(p) for p in args], [Port(p) for p in outs],
                          {FUNCTION_ATTR: _function_info(fn)}, f"{self.where}/{name}")
        self.bodies[name] = body
        return body

    def call(self, op_type: str, name: str, function: str, inputs: list[Port], outputs: list[Port],
             attrs: dict[str, Any], where: str) -> Container:
        """The call container of one ``PartitionedCall`` node: its own ports and attributes, and
        one child, the container of ``function``, wired to them."""
        body = self.body(function, where)
        if len(inputs) != len(body.inputs) or len(outputs) > len(body.outputs):
            raise FormatError.at(where, f"{len(body.inputs)} inputs and at most {len(body.outputs)} "
                                 f"outputs (function {function!r})", f"{len(inputs)} inputs, {len(outputs)} outputs")
        if body.name == name:
            raise FormatError.at(where, "a call named unlike the function it calls", repr(name))
        outputs = [Port(f"output_{i}") for i in range(len(body.outputs))]
        edges = [Edge(Endpoint(SELF, port.name), Endpoint((body.name,), arg))
                 for port, arg in zip(inputs, body.input_names, strict=True)]
        edges += [Edge(Endpoint((body.name,), result), Endpoint(SELF, port.name))
                  for port, result in zip(outputs, body.output_names, strict=True)]
        return Container(op_type, name, inputs=inputs, outputs=outputs, children=[body], edges=edges, attrs=attrs)


def is_call(node: Container) -> bool:
    """Whether ``node`` is a call container as :meth:`Library.call` makes them."""
    return len(node.children) == 1 and FUNCTION_ATTR in node.children[0]._attrs and "f" in node._attrs
