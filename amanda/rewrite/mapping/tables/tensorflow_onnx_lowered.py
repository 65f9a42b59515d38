"""Lowered TensorFlow control flow raised back to functional ``While`` and ``If`` ops.

A graph frozen with control flow lowered (TensorFlow's default) holds loops as frames of
``Enter`` -> ``Merge`` -> ``Switch`` -> (body) -> ``NextIteration`` -> ``Merge`` with a
``LoopCond`` and ``Exit`` ops, and conditionals as ``Switch`` ops sharing a predicate whose
``output_true``/``output_false`` sides meet again in ``Merge`` ops. ONNX has neither; before the
rules run, the shipped table raises each back to the functional op (as TensorFlow's own
``functionalize_control_flow`` does), whose rules then give ``Loop`` and ``If``:

- a frame (``Enter`` ops of one ``frame_name``): each non-constant ``Enter`` is a loop variable
  (its ``Merge``, ``Switch`` on the ``LoopCond`` and ``Exit``), each constant one a loop
  invariant carried unchanged. ``cond`` is the function of the ops the ``LoopCond`` reads back to
  the ``Merge`` outputs, ``body`` that of the ops each ``NextIteration`` reads back to the
  ``Switch``'s ``output_true``. The ``Exit`` outputs become the ``While``'s outputs.
- a conditional (``Merge`` ops reached from ``Switch`` ops of one predicate): the ops each
  ``Merge`` input reads back to a ``Switch`` form the branch of that side; the switched values
  are the ``If``'s inputs and the ``Merge`` outputs its outputs.

The frame's or conditional's other ops (the ``NoOp``/``Identity`` ops that only order) go with
it, and control edges to or from it are moved to the new op. A frame nested in another, or a
shape this does not recognise, is left as it is (its ops are then reported unmatched). The
``Placeholder`` ops no op reads that lowering leaves (``unused_control_flow_input``) are dropped.
The input must be flat (one container of leaf ops: :func:`flat_scopes` gives it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from amanda.containers.arguments import expect_container
from amanda.containers.container import Container, op
from amanda.containers.edge import SELF, Edge, Endpoint, Port
from amanda.ops.registry import fact

__all__ = ["lowered", "raise_control_flow"]

CONTROL = -1
_Variable = tuple[str, str, str, "str | None"]  # merge, next_iteration, switch, exit


def _plumbing(op_type: Any) -> bool:
    """Whether an op type is a lowered loop's or conditional's (the op registry says)."""
    from amanda.ops.catalog import LOWERED_CONTROL_FLOW, TENSORFLOW

    return bool(fact(TENSORFLOW, str(op_type), LOWERED_CONTROL_FLOW, False))


class _Graph:
    """A flat container's ops and edges, indexed by op name, to be rewritten."""

    def __init__(self, container: Container) -> None:
        self.container = container
        self.ops: dict[str, Container] = {c.name or "": c for c in container.children}
        self.edges: list[Edge] = list(container.edges)
        self.moved: dict[Endpoint, Endpoint | None] = {}
        self.index()

    def index(self) -> None:
        self.producer: dict[tuple[str, str], tuple[Any, Any]] = {}
        self.consumers: dict[tuple[str, Any], list[tuple[Any, Any]]] = {}
        for edge in self.edges:
            src, dst = _name(edge[0]), _name(edge[1])
            if dst is not None and edge[1][1] != CONTROL:
                self.producer[(dst, edge[1][1])] = (src, edge[0][1])
            self.consumers.setdefault((src, edge[0][1]), []).append((dst, edge[1][1]))

    def readers(self, name: str, port: Any, kind: str) -> list[str]:
        return [d for d, _ in self.consumers.get((name, port), ()) if d is not None and self.ops[d].type == kind]

    def replace(self, removed: set[str], new: Container, moved: dict[tuple[str, str], str]) -> None:
        """Drop ``removed``, add ``new``; edges from a moved output read the new op's port,
        control edges to or from a removed op are the new op's, other edges of removed ops go."""
        kept: list[Edge] = []
        name = new.name or ""
        for edge in self.edges:
            ends = []
            for end in (edge[0], edge[1]):
                owner = _name(end)
                if owner in removed and (owner, end[1]) in moved:
                    end = Endpoint((name,), moved[(owner, end[1])])
                elif owner in removed and end[1] == CONTROL:
                    end = Endpoint((name,), CONTROL)
                elif owner in removed:
                    end = None
                ends.append(end)
            if ends[0] is not None and ends[1] is not None and ends[0] != ends[1]:
                kept.append(Edge(ends[0], ends[1], attrs=edge[2]))
        self.edges = list({e.key: e for e in kept}.values())
        for (owner, port), target in moved.items():
            self.moved[Endpoint((owner,), port)] = Endpoint((name,), target)
        self.ops = {k: v for k, v in self.ops.items() if k not in removed}
        self.ops[name] = new
        self.index()

    def fresh(self, stem: str) -> str:
        name, k = stem, 1
        while name in self.ops:
            name, k = f"{stem}_{k}", k + 1
        return name

    def build(self) -> Container:
        return self.container.evolve(children=list(self.ops.values()), edges=self.edges)


def _name(end: Any) -> Any:
    return None if end[0] is SELF else end[0][0]


def _region(g: _Graph, starts: Iterable[str], stop: set[str]) -> set[str]:
    """Ops reached forward from ``starts`` over data and control edges, not past ``stop``."""
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in stop:
            continue
        for (src, _port), readers in g.consumers.items():
            if src == name:
                todo += [d for d, _ in readers if d is not None]
    return seen


def _function(g: _Graph, fname: str, results: list[tuple[Any, Any]],
              args: dict[tuple[str, Any], int], count: int) -> Container | None:
    """The function computing ``results`` (producer endpoints) from the values ``args`` numbers
    (endpoint -> argument); None where it reads a value of another frame or conditional."""
    members: set[str] = set()
    todo = [r for r in results if r not in args]
    while todo:
        src, port = todo.pop()
        if (src, port) in args or src in members:
            continue
        if src is None or _plumbing(g.ops[src].type):
            return None
        members.add(src)
        todo += [g.producer[(src, p)] for p in g.ops[src].input_names if (src, p) in g.producer]
    inputs = [Port(f"arg_{i}") for i in range(count)]
    outputs = [Port(f"out_{j}") for j in range(len(results))]

    def source(src: str, port: Any) -> Endpoint:
        return Endpoint(SELF, f"arg_{args[(src, port)]}") if (src, port) in args else Endpoint((src,), port)

    edges = [Edge(source(_name(e[0]), e[0][1]), e[1], attrs=e[2]) for e in g.edges
             if _name(e[1]) in members and ((_name(e[0]), e[0][1]) in args or _name(e[0]) in members)]
    edges += [Edge(source(*r), Endpoint(SELF, f"out_{j}")) for j, r in enumerate(results)]
    return Container(None, fname, inputs=inputs, outputs=outputs, children=[g.ops[m] for m in sorted(members)],
                     edges=edges)


def _loop_variable(g: _Graph, enter: str) -> _Variable | None:
    """``(merge, next_iteration, switch, exit)`` of a non-constant Enter, or None."""
    merges = g.readers(enter, "output", "Merge")
    if len(merges) != 1:
        return None
    merge = merges[0]
    fed = [g.producer.get((merge, p), (None,))[0] for p in ("inputs_0", "inputs_1")]
    nexts = [str(n) for n in fed if n is not None and g.ops[n].type == "NextIteration"]
    switches = g.readers(merge, "output", "Switch")
    if len(nexts) != 1 or len(switches) != 1:
        return None
    exits = g.readers(switches[0], "output_false", "Exit")
    return merge, nexts[0], switches[0], exits[0] if exits else None


def _frame_loop(g: _Graph, enters: list[str]) -> tuple[list[str], list[str], list[_Variable], str] | None:
    """A frame's loop variables' Enters, its invariants' Enters, each variable's ops and the
    LoopCond, or None when the frame is not a loop this recognises."""
    variables = [e for e in enters if not g.ops[e].attrs.get("is_constant")]
    invariants = [e for e in enters if g.ops[e].attrs.get("is_constant")]
    parts = [_loop_variable(g, e) for e in variables]
    if not variables or any(p is None for p in parts):
        return None
    found = [p for p in parts if p is not None]
    conds = {g.producer.get((s, "pred"), (None,))[0] for _, _, s, _ in found}
    cond_op = conds.pop() if len(conds) == 1 else None
    if cond_op is None or g.ops[cond_op].type != "LoopCond" or (cond_op, "input") not in g.producer:
        return None
    if any((n, "data") not in g.producer for _, n, _, _ in found):
        return None
    return variables, invariants, found, cond_op


def _install(g: _Graph, new: Container, removed: set[str], moved: dict[tuple[str, str], str],
             feeds: list[tuple[tuple[Any, Any], str]]) -> None:
    """``new`` in place of ``removed``, fed by ``feeds`` (producer, input port)."""
    g.replace(removed, new, moved)
    g.edges += [Edge(_end(src), Endpoint((new.name,), port)) for src, port in feeds]
    g.index()


def _raise_frame(g: _Graph, frame: str, enters: list[str]) -> bool:
    """Replace one loop frame by a While; False (nothing changed) when it is not recognised."""
    loop = _frame_loop(g, enters)
    if loop is None:
        return False
    variables, invariants, found, cond_op = loop
    count = len(variables) + len(invariants)
    kept = {(e, "output"): len(variables) + k for k, e in enumerate(invariants)}
    cond_args = {**{(m, "output"): i for i, (m, _, _, _) in enumerate(found)}, **kept}
    body_args = {**{(s, "output_true"): i for i, (_, _, s, _) in enumerate(found)}, **kept}
    stem = frame.replace("/", "_")
    cond = _function(g, f"{stem}_cond", [g.producer[(cond_op, "input")]], cond_args, count)
    results = [g.producer[(n, "data")] for _, n, _, _ in found] + [(e, "output") for e in invariants]
    body = _function(g, f"{stem}_body", results, body_args, count)
    if cond is None or body is None:
        return False
    order = (*variables, *invariants)
    name = g.fresh(frame)
    node = op("While", name, [f"input_{i}" for i in range(count)], [f"output_{i}" for i in range(count)],
              {"T": tuple(str(g.ops[e].attrs.get("T", "float32")) for e in order), "body": body, "cond": cond,
               "parallel_iterations": int(g.ops[enters[0]].attrs.get("parallel_iterations", 10))})
    exits = {x: i for i, (_, _, _, x) in enumerate(found) if x is not None}
    _install(g, node, _region(g, enters, set(exits)), {(x, "output"): f"output_{i}" for x, i in exits.items()},
             [(g.producer[(e, "data")], f"input_{i}") for i, e in enumerate(order)])
    return True


def _end(src: tuple[Any, Any]) -> Endpoint:
    return Endpoint(SELF, src[1]) if src[0] is None else Endpoint((src[0],), src[1])


def _side(g: _Graph, start: tuple[Any, Any], pred: Any) -> tuple[set[tuple[str, str]], set[str]] | None:
    """The switch outputs of predicate ``pred`` a value reads back to, or None when it reads
    another switch or frame op."""
    ports: set[tuple[str, str]] = set()
    seen: set[str] = set()
    todo = [start]
    while todo:
        src, port = todo.pop()
        if src is None or src in seen:
            continue
        kind = g.ops[src].type
        if kind == "Switch":
            if g.producer.get((src, "pred")) != pred:
                return None
            ports.add((src, port))
            continue
        if _plumbing(kind):
            return None
        seen.add(src)
        todo += [g.producer[(src, p)] for p in g.ops[src].input_names if (src, p) in g.producer]
    return ports, seen


def _branch_results(g: _Graph, merges: list[str], pred: Any) -> dict[bool, list] | None:
    """Per side (True: ``output_true``), what each Merge reads from that side's branch; None
    when a Merge input reads both sides, no switch, or another conditional's."""
    outs: dict[bool, list] = {True: [], False: []}
    for m in merges:
        for port in ("inputs_0", "inputs_1"):
            fed = g.producer.get((m, port))
            side = _side(g, fed, pred) if fed is not None else None
            if side is None or len({p for _, p in side[0]}) != 1:
                return None
            outs[next(iter(side[0]))[1] == "output_true"].append(fed)
    if len(outs[True]) != len(merges) or len(outs[False]) != len(merges):
        return None
    return outs


def _if_op(g: _Graph, name: str, data: list[str], merges: list[str], branches: tuple[Container, Container]) -> Container:
    """The If of a raised conditional: ``data`` switches' values in, ``merges``' values out."""
    return op("If", name, ["cond", *(f"input_{i}" for i in range(len(data)))],
              [f"output_{j}" for j in range(len(merges))],
              {"Tcond": "bool", "Tin": tuple(str(g.ops[s].attrs.get("T", "float32")) for s in data),
               "Tout": tuple(str(g.ops[m].attrs.get("T", "float32")) for m in merges),
               "then_branch": branches[0], "else_branch": branches[1]})


def _raise_cond(g: _Graph, merge: str) -> bool:
    """Replace the conditional ``merge`` ends by an If; False (nothing changed) when it is not
    recognised."""
    pred = _merge_pred(g, merge)
    if pred is None:
        return False
    merges = [m for m, o in g.ops.items() if o.type == "Merge" and _merge_pred(g, m) == pred]
    outs = _branch_results(g, merges, pred)
    if outs is None or any(g.consumers.get((m, "value_index")) for m in merges):
        return False
    switches = sorted(s for s, o in g.ops.items() if o.type == "Switch" and g.producer.get((s, "pred")) == pred)
    data = [s for s in switches if g.producer.get((s, "data")) != pred]
    stem = merge.replace("/", "_")
    then = _function(g, f"{stem}_then", outs[True], {(s, "output_true"): i for i, s in enumerate(data)}, len(data))
    other = _function(g, f"{stem}_else", outs[False], {(s, "output_false"): i for i, s in enumerate(data)}, len(data))
    if then is None or other is None:
        return False
    name = g.fresh(merge.rsplit("/", 1)[0] + "/cond" if "/" in merge else merge + "_cond")
    node = _if_op(g, name, data, merges, (then, other))
    _install(g, node, _region(g, switches, set(merges)), {(m, "output"): f"output_{j}" for j, m in enumerate(merges)},
             [(pred, "cond"), *((g.producer[(s, "data")], f"input_{i}") for i, s in enumerate(data))])
    return True


def _switches_behind(g: _Graph, start: tuple[Any, Any]) -> set[str]:
    found: set[str] = set()
    seen: set[str] = set()
    todo = [start]
    while todo:
        src, _ = todo.pop()
        if src is None or src in seen:
            continue
        seen.add(src)
        if g.ops[src].type == "Switch":
            found.add(src)
            continue
        todo += [g.producer[(src, p)] for p in g.ops[src].input_names if (src, p) in g.producer]
    return found


def _merge_pred(g: _Graph, merge: str) -> Any:
    fed = g.producer.get((merge, "inputs_0"))
    behind = _switches_behind(g, fed) if fed else set()
    preds = {g.producer.get((s, "pred")) for s in behind}
    return preds.pop() if len(preds) == 1 else None


def _lowering(types: Iterable[Any]) -> bool:
    """Whether these op types hold a lowered loop's ``Enter`` or a conditional's ``Switch``."""
    return any(t == "Enter" or t == "Switch" for t in types)


def lowered(container: Container) -> bool:
    """Whether ``container`` holds, at any depth, a leaf ``Enter`` or ``Switch`` (lowered control flow).

    >>> lowered(Container(None, "g", children=[op("Switch", "s", ["data", "pred"], ["output_true"])]))
    True
    """
    stack, types = [container], []
    while stack:
        node = stack.pop()
        stack += [c for c in node.children if c.children]
        types += [c.type for c in node.children if not c.children]
    return _lowering(types)


def raise_control_flow(container: Container) -> tuple[Container, dict[Endpoint, Endpoint | None]]:
    """``container`` (flat) with its lowered loops and conditionals raised to ``While`` and
    ``If`` ops, and where each value moved (an ``Exit`` or ``Merge`` output -> the new op's);
    unchanged (with an empty map) when it holds no ``Enter`` or ``Switch``."""
    expect_container(container, "container")
    if not _lowering(c.type for c in container.children):
        return container, {}
    g = _Graph(container)
    frames: dict[str, list[str]] = {}
    for name, node in g.ops.items():
        if node.type == "Enter":
            frames.setdefault(str(node.attrs.get("frame_name", "")), []).append(name)
    for frame, enters in sorted(frames.items()):
        _raise_frame(g, frame, enters)
    for merge in sorted(m for m, o in list(g.ops.items()) if o.type == "Merge"):
        if merge in g.ops:
            _raise_cond(g, merge)
    unused = [n for n, o in g.ops.items() if o.type == "Placeholder" and not g.consumers.get((n, "output"))
              and n.startswith("unused_control_flow_input")]
    for name in unused:
        del g.ops[name]
    g.edges = [e for e in g.edges if _name(e[0]) not in unused and _name(e[1]) not in unused]
    return g.build(), g.moved
