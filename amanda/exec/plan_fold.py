"""Plan-time folding: steps whose values are the same on every run are computed once, while
the plan is made, and their outputs live in the plan's environment template.

Two kinds fold: ``Constant`` sources (the registry marks them ``constant``), and any pure op
(the registry's effect ``pure``, not a session kernel) whose inputs are all such values. The
second is what removes a torch export's shape subgraph around a recurrent cell
(``Unsqueeze -> Concat -> Expand`` of a folded ``Shape``) from every run: the session's
optimising passes fold ``Shape`` inside one container, but the chain often crosses module
boundaries, which the flat plan no longer has. An op that fails or warns when folded, or whose
outputs are not arrays of at most :data:`MAX_FOLDED_BYTES`, is left to run (and fail) as before.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from amanda.exec.dispatch import failure, parse_namespace
from amanda.exec.kernels.relaid import mark_constant
from amanda.ops.registry import ONNX, effect_of

__all__ = ["MAX_FOLDED_BYTES", "fold_constant", "fold_pure"]

#: outputs larger than this stay computed per run: folding would trade time for memory
MAX_FOLDED_BYTES = 64 << 20


def _store(outs: tuple, found: Any, template: list) -> None:
    """Each output into its template slot, read-only (the same array serves every run)."""
    for k, s in outs:
        value = found[k]
        if isinstance(value, np.ndarray) and value.flags.writeable:
            value = value.view()
            value.setflags(write=False)
        mark_constant(value)  # the same array on every run: kernels may keep a relaid copy
        template[s] = value


def fold_constant(fn: Callable, attrs: Any, outs: tuple, template: list, where: str, namespace: Any) -> None:
    """Evaluate a Constant now, into ``template``; a failure names the op's path."""
    try:
        result = fn(attrs)
    except Exception as exc:  # noqa: BLE001 - re-raised with the op's path
        raise failure(where, "Constant", namespace, (), exc) from exc
    _store(outs, result, template)


def _pure(op_type: str, namespace: str | None) -> bool:
    if effect_of(op_type).pure:
        return True  # pure in every family that knows it
    family, domain, _ = parse_namespace(namespace) if namespace else (ONNX, "", None)
    return effect_of(op_type, family, domain).pure


def fold_pure(fn: Callable, attrs: Any, op_type: str, namespace: str | None, ins: tuple, outs: tuple,
              template: list, constant: Collection[int]) -> bool:
    """Evaluate a pure op whose input slots all hold constants (slot 0, an absent optional
    input, counts as one; at least one input must be present) into ``template``; whether it
    folded. ``constant`` is the set of slots holding plan-time values."""
    if not outs or not any(ins) or not all(s in constant for s in ins) or not _pure(op_type, namespace):
        return False
    try:
        with np.errstate(all="raise"):
            result = fn(attrs, *(template[s] for s in ins))
    except Exception:  # noqa: BLE001 - an op that cannot run now is left to run (and fail) per run
        return False
    found = [result[k] for k, _ in outs]
    if not all(isinstance(v, np.ndarray) and v.nbytes <= MAX_FOLDED_BYTES for v in found):
        return False
    _store(outs, result, template)
    return True
