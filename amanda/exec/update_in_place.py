"""Optimiser updates in place: the plan stage that lets an Adam step write the new weight and
moments into the arrays the session's store already holds.

An optimiser's step is ``Read`` ops of its moments, one ``AdamStep`` and three ``Assign`` ops
that replace the stored weight and moments (:mod:`amanda.optim.optimizers`): each step makes
three new arrays the size of the weight and copies them into the store, so a step's peak
memory holds the old and new state of a weight together. Where the plan allows it, this stage
runs the ``AdamStep`` as one step that reads the variables itself and writes the store:

- the moments' ``Read`` ops are read by the step alone, and each of its results by one
  ``Assign`` to the variable it read (whose own result nobody reads), nothing fetched;
- the weight comes from a ``Read`` of the variable the weight's ``Assign`` writes, or (AdamW)
  from a ``Mul`` of that ``Read`` by a scalar read by the step alone, the decay of its
  ``WeightDecay`` container, which the step then computes; each variable's reference is read
  by those ops alone and no other ``Variable`` op of the plan has its key. The step then waits
  for the weight's ``Read`` (ordering, as before).

At run time a stored array is written in place only when nothing but the store refers to it
(its reference count; a view, a fetched value, ``session.state``'s reader, an op that has yet
to read the weight each hold a reference): otherwise the step makes new arrays and stores
them, as the ``Assign`` ops did. So a value a run returned, or that a caller holds, never
changes. Both paths give the same bits (:func:`~amanda.exec.kernels.grad_kernels.adam_arithmetic`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from amanda.exec.dispatch import OpContext, Resolved, parse_namespace
from amanda.exec.kernels.grad_kernels import TRAIN, adam_arithmetic, adam_step
from amanda.exec.kernels.registry import ONNX
from amanda.exec.kernels.relaid import forget
from amanda.exec.state import CORE

__all__ = ["update_in_place"]

_MOMENTS = ("weight", "m", "v")  # the AdamStep's inputs (and outputs, in this order) kept in variables


def _references(store: Mapping[str, Any], key: str) -> int:
    value = store[key]
    return sys.getrefcount(value)


# the count of an array only the store holds, as _references sees it (the interpreter's own
# references differ between Python versions)
_ALONE = _references({"k": np.empty(1)}, "k")


def _private(store: Mapping[str, Any], key: str, like: np.ndarray) -> bool:
    """Whether the store's array under ``key`` may be written: nothing else refers to it, it
    owns its memory and has ``like``'s dtype and shape."""
    if _references(store, key) != _ALONE:
        return False
    value = store[key]
    return type(value) is np.ndarray and value.flags.owndata and value.dtype == like.dtype and \
        value.shape == like.shape and value.ndim > 0


def adam_update(ctx: OpContext, attrs: Mapping[str, Any], w_ref: Any, g: np.ndarray, m_ref: Any, v_ref: Any,
                step: np.ndarray, rate: np.ndarray | None = None) -> tuple:
    """One weight's Adam step on the store: in place where :func:`_private` allows it for the
    weight and both moments, else new arrays stored in their place."""
    return _update(ctx.state, attrs, None, w_ref, g, m_ref, v_ref, step, rate)


def adamw_update(ctx: OpContext, attrs: Mapping[str, Any], factor: np.ndarray, w_ref: Any, g: np.ndarray, m_ref: Any,
                 v_ref: Any, step: np.ndarray, rate: np.ndarray | None = None) -> tuple:
    """:func:`adam_update` of a weight first multiplied by ``factor`` (AdamW's decoupled decay,
    the ``Mul`` of its ``WeightDecay`` container)."""
    return _update(ctx.state, attrs, factor, w_ref, g, m_ref, v_ref, step, rate)


def _update(store: MutableMapping[str, Any], attrs: Mapping[str, Any], factor: Any, w_ref: Any, g: np.ndarray,
            m_ref: Any, v_ref: Any, step: np.ndarray, rate: np.ndarray | None) -> tuple:
    keys = (w_ref.key, m_ref.key, v_ref.key)
    g = np.asarray(g)
    fits = factor is None or (isinstance(factor, np.ndarray) and factor.ndim == 0 and factor.dtype == g.dtype)
    if fits and all(_private(store, key, g) for key in keys):
        arrays = [store[key] for key in keys]
        for a in arrays:
            a.setflags(write=True)
        try:
            if factor is not None:
                np.multiply(arrays[0], factor, out=arrays[0])
            adam_arithmetic(attrs, arrays[0], g, arrays[1], arrays[2], step, rate, in_place=True)
        finally:
            for a in arrays:
                a.setflags(write=False)
                forget(a)  # the kernels' relaid copies of the old values
        return ()
    w = store[keys[0]]
    if factor is not None:  # as the Mul kernel computes it
        w = np.asarray(np.multiply(w, factor)).astype(w.dtype, copy=False)
    made = adam_step(attrs, w, g, store[keys[1]], store[keys[2]], step, rate)
    for key, value in zip(keys, made):
        value = np.asarray(value)
        if value.flags.writeable:
            value.setflags(write=False)
        store[key] = value
    return ()


def _is(r: Any, family: str, op_type: str) -> bool:
    return r.op.type == op_type and r.namespace is not None and parse_namespace(r.namespace)[0] == family


def _context(r: Any) -> OpContext | None:
    fn = r.fn
    return fn.args[0] if isinstance(fn, partial) and fn.args and isinstance(fn.args[0], OpContext) else None


class _Graph:
    """Who writes and who reads each slot of the planned ops."""

    def __init__(self, ops: Sequence[Any], keep: frozenset[int]) -> None:
        self.ops, self.keep = ops, keep
        self.writer = {s: i for i, r in enumerate(ops) for _, s in r.outs}
        self.readers: dict[int, list[int]] = {}
        for i, r in enumerate(ops):
            for s in r.ins:
                self.readers.setdefault(s, []).append(i)
        self.keys: dict[str, int] = {}
        for r in ops:
            ctx = _context(r) if _is(r, CORE, "Variable") else None
            if ctx is not None:
                self.keys[ctx.key] = self.keys.get(ctx.key, 0) + 1

    def only_reader(self, slot: int) -> int | None:
        found = self.readers.get(slot, [])
        return found[0] if len(found) == 1 and slot not in self.keep else None

    def unread(self, i: int) -> bool:
        return all(not self.readers.get(s) and s not in self.keep for _, s in self.ops[i].outs)

    def decay(self, j: int, step: int) -> int | None:
        """The slot of the factor when op ``j`` is a ``Mul`` (AdamW's decay) of a value by a
        scalar read by the AdamStep at ``step`` alone, else None."""
        r = self.ops[j]
        if not _is(r, ONNX, "Mul") or len(r.ins) != 2 or len(r.outs) != 1 or self.only_reader(r.outs[0][1]) != step:
            return None
        return r.ins[1]

    def fusion(self, i: int) -> tuple[list[int], list[int], list[int]] | None:
        """For the AdamStep at ``i``: its ``Read`` ops, ``Assign`` ops and variable reference
        slots (weight, m, v), or None where the step cannot update in place."""
        r = self.ops[i]
        names = r.op.input_names
        if len(r.outs) != 3 or any(n not in names for n in _MOMENTS):
            return None
        found = [self.stored(i, k, name) for k, name in enumerate(_MOMENTS)]
        if any(f is None for f in found):
            return None
        reads, assigns, refs = (list(column) for column in zip(*found))  # type: ignore[misc]
        return reads, assigns, refs

    def stored(self, i: int, k: int, name: str) -> tuple[int, int, int] | None:
        """For input ``name`` (result ``k``) of the AdamStep at ``i``: the ``Read`` it comes
        from, the ``Assign`` storing the result and the variable's reference slot, or None."""
        r = self.ops[i]
        out = dict(r.outs).get(k)
        a = None if out is None else self.only_reader(out)
        read = self.writer.get(r.ins[r.op.input_names.index(name)])
        if name == "weight" and read is not None and self.decay(read, i) is not None:
            read = self.writer.get(self.ops[read].ins[0])  # AdamW: the Read the decay multiplies
        if a is None or read is None or not _is(self.ops[a], CORE, "Assign") or not self.unread(a) \
                or not _is(self.ops[read], CORE, "Read"):
            return None
        ref = self.ops[a].ins[0]
        variable = self.writer.get(ref)
        ctx = None if variable is None else _context(self.ops[variable])
        if self.ops[read].ins[0] != ref or ctx is None or self.keys.get(ctx.key) != 1 or \
                sorted(self.readers.get(ref, [])) != sorted([read, a]) or ref in self.keep:
            return None
        if name != "weight" and self.only_reader(self.ops[read].outs[0][1]) != i:
            return None
        return read, a, ref


def update_in_place(ops: list[Any], keep: frozenset[int],
                    controls: Mapping[Any, list[Any]]) -> tuple[list[Any], dict[Any, list[Any]]]:
    """The planned ops (the planner's records: ``op``, ``namespace``, ``fn``, ``ins``, ``outs``,
    ``path``, ``kernel``) with each Adam step that may update in place made one step (the module
    doc says when); the control predecessors with the removed ops' paths replaced by the step's."""
    graph = _Graph(ops, keep)
    replaced: dict[int, Any] = {}
    dropped: dict[Any, Any] = {}  # path of a removed op -> the path of the step that took its place
    after: dict[Any, list[Any]] = {}
    for i, r in enumerate(ops):
        if not _is(r, TRAIN, "AdamStep"):
            continue
        found = graph.fusion(i)
        ctx = None if found is None else _context(ops[found[1][0]])
        if found is None or ctx is None:
            continue
        reads, assigns, refs = found
        names = r.op.input_names
        ins = tuple(refs[_MOMENTS.index(n)] if n in _MOMENTS else r.ins[k] for k, n in enumerate(names))
        fn: Callable[..., tuple] = partial(adam_update, ctx)
        mul = graph.writer[r.ins[names.index("weight")]]
        if mul != reads[0]:  # AdamW: the decay's Mul runs in the step
            ins = (graph.decay(mul, i), *ins)  # type: ignore[assignment]
            fn = partial(adamw_update, ctx)
            dropped[ops[mul].path] = r.path
        replaced[i] = r._replace(fn=fn, ins=ins, outs=(), kernel=Resolved(fn, r.kernel.attrs, session=True, heavy=False))
        after[r.path] = [ops[reads[0]].path]
        for j in (*reads[1:], *assigns):
            dropped[ops[j].path] = r.path
    if not replaced:
        return ops, dict(controls)
    out = [replaced.get(i, r) for i, r in enumerate(ops) if r.path not in dropped]
    merged = {path: [dropped.get(p, p) for p in before] for path, before in controls.items()}
    for path, before in after.items():
        merged[path] = [*merged.get(path, []), *before]
    return out, merged
