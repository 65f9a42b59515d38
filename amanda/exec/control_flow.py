"""Control flow of the ONNX default domain: If, Loop and Scan run their bodies.

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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from amanda.errors import ExecutionError
from amanda.exec.dispatch import ONNX, OpContext, session_kernel

__all__ = ["run_if", "run_loop", "run_scan", "run_sequence_map"]


def _ports(node: Any) -> tuple[tuple[str | None, ...], tuple[str, ...], tuple[str, ...]]:
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


def _regular(ctx: OpContext, values: Sequence[Any]) -> list[Any]:
    """The op's positional (not captured) inputs."""
    return [value for name, value in zip(_ports(ctx.op)[0], values) if name is None]


def _formal(body: Any, count: int) -> tuple[str, ...]:
    """The body's first ``count`` formal input names: values past its formal inputs are not
    fed (nor are formal inputs past the values)."""
    return _ports(body)[1][:count]


def _prepared(ctx: OpContext, body: Any, formal: Sequence[str]) -> tuple[Callable[[Sequence[Any]], list], tuple]:
    """``run(values) -> outputs`` of ``body`` fed ``formal`` then its captured inputs, and where
    among the op's inputs each captured value is: made once per op and body (kept in
    ``ctx.bodies``), so an iteration looks up no plan, builds no feed dict and checks no names."""
    key = (id(body), tuple(formal))
    found = ctx.bodies.get(key)
    if found is None or found[0] is not body:
        captured = _ports(body)[2]
        names = (*formal, *captured)
        outputs = body.output_names
        if ctx.body_runner is not None:
            run = ctx.body_runner(body, names, outputs)
        else:  # a context without one: each run by name

            def run(values: Sequence[Any]) -> list:
                return ctx.run_body(body, dict(zip(names, values)), outputs)

        found = ctx.bodies[key] = (body, run, _positions(ctx, captured))
    return found[1], found[2]


def _positions(ctx: OpContext, names: Sequence[str]) -> tuple[int, ...]:
    """Where among the op's inputs the values of a body's captured ``names`` are (an error
    names one the op lacks)."""
    at: dict[str, int] = {}
    for i, name in enumerate(_ports(ctx.op)[0]):
        if name is not None:
            at.setdefault(name, i)
    missing = [n for n in names if n not in at]
    if missing:
        raise ExecutionError.at(ctx.path, f"a captured input `{missing[0]}` on the op for its body", "none")
    return tuple(at[n] for n in names)


def _truth(value: Any) -> bool:
    if type(value) is np.ndarray and value.ndim == 0:  # a condition is mostly a scalar
        return bool(value)
    return bool(np.asarray(value).reshape(-1)[0])


@session_kernel("If", ONNX)
def run_if(ctx: OpContext, attrs: Mapping[str, Any], *values: Any) -> tuple:
    """ONNX If: run ``then_branch`` or ``else_branch``; its outputs are the op's."""
    first = ctx.bodies.get("cond")
    if first is None:  # where the condition is among the inputs (the first port not captured)
        first = ctx.bodies["cond"] = _ports(ctx.op)[0].index(None)
    body = attrs["then_branch"] if _truth(values[first]) else attrs["else_branch"]
    run, at = _prepared(ctx, body, ())
    return tuple(run([values[i] for i in at]))


@session_kernel("Loop", ONNX)
def run_loop(ctx: OpContext, attrs: Mapping[str, Any], *values: Any) -> tuple:
    """ONNX Loop: run ``body`` while ``cond`` holds and fewer than ``M`` iterations ran.

    Outputs: the final loop-carried values, then each scan output stacked along a new
    first axis.
    """
    regular = _regular(ctx, values)
    trips, cond, carried = regular[0], regular[1], list(regular[2:])
    body = attrs["body"]
    formal = _formal(body, 2 + len(carried))
    run, at = _prepared(ctx, body, formal)
    caps = [values[i] for i in at]
    n, k = len(carried), len(body.output_names) - 1 - len(carried)
    width = len(formal)
    limit = None if trips is None else int(np.asarray(trips).reshape(-1)[0])
    going = True if cond is None else _truth(cond)
    counter_dtype = np.int64 if trips is None else np.asarray(trips).dtype
    scans: list[list[Any]] = [[] for _ in range(k)]
    iteration = ctx.iteration
    i = 0
    while going and (limit is None or i < limit):
        iteration(i)
        given = [np.array(i, dtype=counter_dtype), np.array(going), *carried]
        result = run([*given[:width], *caps] if len(given) != width else [*given, *caps])
        if result[0] is None:
            raise ExecutionError.at(ctx.path, "a condition output from the loop body", "None")
        going = _truth(result[0])
        carried = result[1:1 + n]
        for j in range(k):
            scans[j].append(result[1 + n + j])
        i += 1
    stacked = [np.stack(s) if s else np.empty((0,), dtype=np.float32) for s in scans]
    return tuple(carried + stacked)


def _scan_once(
    ctx: OpContext, attrs: Mapping[str, Any], body: Any, states: list[Any], scanned: list[np.ndarray],
    inputs: Sequence[Any], axes: Sequence[int], directions: Sequence[int], length: int | None = None,
) -> tuple[list[Any], list[np.ndarray]]:
    n = len(states)
    formal = _formal(body, n + len(scanned))
    run, at = _prepared(ctx, body, formal)
    caps = [inputs[i] for i in at]
    k = len(body.output_names) - n
    moved = [np.moveaxis(x, a % x.ndim, 0) for x, a in zip(scanned, axes)]
    steps = moved[0].shape[0] if moved else 0
    if length is not None:
        steps = length
    slices: list[list[Any]] = [[] for _ in range(k)]
    for t in range(steps):
        given = [*states, *(x[steps - 1 - t if d else t] for x, d in zip(moved, directions))]
        result = run([*given[:len(formal)], *caps])
        states = result[:n]
        for j in range(k):
            slices[j].append(result[n + j])
    out_axes = list(attrs.get("scan_output_axes") or [0] * k)
    out_dirs = list(attrs.get("scan_output_directions") or [0] * k)
    stacked = []
    for j in range(k):
        parts = slices[j][::-1] if (out_dirs[j] if j < len(out_dirs) else 0) else slices[j]
        y = np.stack(parts) if parts else np.empty((0,), dtype=np.float32)
        axis = out_axes[j] if j < len(out_axes) else 0
        stacked.append(np.moveaxis(y, 0, axis % y.ndim) if y.ndim else y)
    return states, stacked


@session_kernel("Scan", ONNX, since=9)
def run_scan(ctx: OpContext, attrs: Mapping[str, Any], *values: Any) -> tuple:
    """ONNX Scan (opset 9 on): iterate ``body`` over slices of the scan inputs."""
    regular = _regular(ctx, values)
    m = int(attrs["num_scan_inputs"])
    states, scanned = list(regular[: len(regular) - m]), list(regular[len(regular) - m:])
    axes = list(attrs.get("scan_input_axes") or [0] * m)
    directions = list(attrs.get("scan_input_directions") or [0] * m)
    states, stacked = _scan_once(ctx, attrs, attrs["body"], states, scanned, values, axes, directions)
    return tuple(states + stacked)


@session_kernel("Scan", ONNX, since=8)
def run_scan_v8(ctx: OpContext, attrs: Mapping[str, Any], *values: Any) -> tuple:
    """ONNX Scan opset 8: a leading batch axis, optional ``sequence_lens``, scan along axis 1."""
    regular = _regular(ctx, values)
    lens, rest = regular[0], regular[1:]
    m = int(attrs["num_scan_inputs"])
    states, scanned = rest[: len(rest) - m], rest[len(rest) - m:]
    directions = list(attrs.get("directions") or [0] * m)
    batch = (scanned[0] if scanned else states[0]).shape[0]
    finals: list[list[Any]] = [[] for _ in states]
    outs: list[list[Any]] = []
    for b in range(batch):
        length = None if lens is None else int(np.asarray(lens).reshape(-1)[b])
        s, y = _scan_once(ctx, {}, attrs["body"], [x[b] for x in states], [x[b] for x in scanned],
                          values, [0] * m, directions, length)
        for j, v in enumerate(s):
            finals[j].append(v)
        if not outs:
            outs = [[] for _ in y]
        for j, v in enumerate(y):
            outs[j].append(v)
    return tuple([np.stack(f) for f in finals] + [np.stack(o) for o in outs])


@session_kernel("SequenceMap", ONNX, since=17)
def run_sequence_map(ctx: OpContext, attrs: Mapping[str, Any], *values: Any) -> tuple:
    """ONNX SequenceMap: run ``body`` once per element of the input sequence; sequence inputs
    give their i-th element, tensor inputs themselves; each output is a sequence."""
    regular = _regular(ctx, values)
    body = attrs["body"]
    formal = _formal(body, len(regular))
    run, at = _prepared(ctx, body, formal)
    caps = [values[i] for i in at]
    count = len(regular[0])
    results: list[list[Any]] = [[] for _ in body.output_names]
    for i in range(count):
        given = [v[i] if isinstance(v, list) else v for v in regular[:len(formal)]]
        for j, value in enumerate(run([*given, *caps])):
            results[j].append(value)
    return tuple(results)
