"""The machinery with which the control-flow ops (If, Loop, Scan, SequenceMap: registered in
:mod:`amanda.opset.onnx.control_flow` and :mod:`amanda.opset.onnx.scan`) run their bodies.

A body is a container stored in the op's attributes (``then_branch``, ``else_branch``,
``body``). It runs with a nested plan of the same session (same runner, same variable
state), compiled once per body and cached. A body inherits its op's namespace unless
it declares its own.

Ports: the op's inputs without ``captured: true`` are ONNX's positional inputs; values
a body reads from the enclosing graph are extra ports marked ``captured: true`` on the
op and on the body, matched by name. A body's own (non-captured) inputs are ONNX's
formal body inputs, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from amanda.errors import ExecutionError
from amanda.exec.dispatch import OpContext


def body_ports(node: Any) -> tuple[tuple[str | None, ...], tuple[str, ...], tuple[str, ...]]:
    """A control-flow op's or body's input ports, read once per container (reading a port's
    attributes on every run or iteration cost If a third of its run): for each port the name
    of the outer value it captures (None for a formal input), the formal names, the captured
    names."""
    def build(node: Any) -> tuple:
        # the importer renames a captured port that clashes with a formal one and keeps the
        # outer value's name (which is the body's port name) in onnx_name
        captures = tuple(p.attrs.get("onnx_name", p.name) if p.attrs.get("captured") else None for p in node.inputs)
        formal = tuple(p.name for p, c in zip(node.inputs, captures) if c is None)
        return captures, formal, tuple(p.name for p, c in zip(node.inputs, captures) if c is not None)

    return node._cached("exec.control_flow.ports", build)  # type: ignore[no-any-return]


def regular_inputs(ctx: OpContext, values: Sequence[Any]) -> list[Any]:
    """The op's positional (not captured) inputs."""
    return [value for name, value in zip(body_ports(ctx.op)[0], values) if name is None]


def formal_names(body: Any, count: int) -> tuple[str, ...]:
    """The body's first ``count`` formal input names: values past its formal inputs are not
    fed (nor are formal inputs past the values)."""
    return body_ports(body)[1][:count]


def prepared_body(ctx: OpContext, body: Any, formal: Sequence[str]) -> tuple[Callable[[Sequence[Any]], list], tuple]:
    """``run(values) -> outputs`` of ``body`` fed ``formal`` then its captured inputs, and where
    among the op's inputs each captured value is: made once per op and body (kept in
    ``ctx.bodies``), so an iteration looks up no plan, builds no feed dict and checks no names."""
    key = id(body)  # one op feeds one body the same formal inputs every time: checked, not hashed
    found = ctx.bodies.get(key)
    if found is None or found[0] is not body or found[3] != formal:
        captured = body_ports(body)[2]
        names = (*formal, *captured)
        outputs = body.output_names
        if ctx.body_runner is not None:
            run = ctx.body_runner(body, names, outputs)
        else:  # a context without one: each run by name

            def run(values: Sequence[Any]) -> list:
                return ctx.run_body(body, dict(zip(names, values)), outputs)

        found = ctx.bodies[key] = (body, run, _positions(ctx, captured), formal)
    return found[1], found[2]


def _positions(ctx: OpContext, names: Sequence[str]) -> tuple[int, ...]:
    """Where among the op's inputs the values of a body's captured ``names`` are (an error
    names one the op lacks)."""
    at: dict[str, int] = {}
    for i, name in enumerate(body_ports(ctx.op)[0]):
        if name is not None:
            at.setdefault(name, i)
    missing = [n for n in names if n not in at]
    if missing:
        raise ExecutionError.at(ctx.path, f"a captured input `{missing[0]}` on the op for its body", "none")
    return tuple(at[n] for n in names)


def truth(value: Any) -> bool:
    """The truth of a condition: a scalar, or the first element of a tensor."""
    if type(value) is np.ndarray and value.ndim == 0:  # a condition is mostly a scalar
        return bool(value)
    return bool(np.asarray(value).reshape(-1)[0])
