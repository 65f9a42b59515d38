"""Value caching: a value whose inputs did not change since it was computed is not computed again.

``Session(model, cache=True)`` (or a budget in bytes) keeps step outputs across runs. Every
value of a run gets a *key* saying what it was computed from:

- a fed array: its dtype, shape and a BLAKE2 digest of its bytes (so writing into an array
  between runs is seen), or the array itself, by identity, when it is read-only all the way
  down (nobody can write it, so hashing is skipped: freeze big feeds to save the hash);
- a folded constant: its slot in the plan;
- a step's output: the step and its inputs' keys;
- the output of a session kernel (``Read``, ``Assign``, control flow) or of an op that draws
  random numbers without a ``seed``: the output object itself, by identity. Variables are
  replaced, so a variable's value object *is* its version: ops that read a variable are reused
  until someone assigns it (an optimiser writes a stored array in place only when nothing else
  refers to it, and a cache entry's key does).

A step whose key was seen before returns the stored outputs instead of calling its kernel.
Stored arrays are made read-only (so fetched values may be read-only, and in-place kernels
fall back to fresh buffers for them); outputs that share memory with a fed array are not
stored (the caller could write into them) but keep their key, so what follows them is reused.
When the budget is full the least recently used entries that the current run has not used
go first; if every entry was used by this run, new values are not stored.

Off by default: measured on a 6-layer transformer (docs/execution.md, "Value caching"),
a cache that hits saves the whole run, but on runs that never repeat it costs the key work and
the digest of every feed, and it holds every intermediate value up to its budget.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from amanda.exec.plan import INLINE, Plan, Step
from amanda.exec.state import VariableRef
from amanda.ops.effects import Effect
from amanda.ops.registry import effect_of

__all__ = ["DEFAULT_BUDGET", "ValueCache", "feed_key"]

DEFAULT_BUDGET = 256 << 20  # bytes of stored outputs
_MAX_KEYS = 1 << 20  # interned step keys kept before the cache starts afresh


class _Same:
    """A key that matches only the very same object (held, so its id is never reused)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def _frozen(array: np.ndarray) -> bool:
    """Whether nobody can write into ``array`` (it and the array owning its memory are read-only)."""
    base = array.base
    return not array.flags.writeable and (base is None or (isinstance(base, np.ndarray) and not base.flags.writeable))


def feed_key(value: Any) -> Any:
    """The key of a fed value (see the module docstring).

    >>> a = np.arange(3.0)
    >>> feed_key(a) == feed_key(a.copy())
    True
    """
    if isinstance(value, np.ndarray) and value.dtype.kind not in "OV":
        if _frozen(value):
            return _Same(value)
        data = np.ascontiguousarray(value)
        digest = hashlib.blake2b(data.data.cast("B") if data.size else b"", digest_size=16).digest()
        return ("feed", value.dtype.str, value.shape, digest)
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return ("feed", type(value).__name__, value)
    return _Same(value)


def _nbytes(values: tuple) -> int:
    return 64 + sum(v.nbytes for v in values if isinstance(v, np.ndarray))


class ValueCache:
    """Step outputs kept across runs within ``budget`` bytes; ``hits`` and ``misses`` count
    the steps reused and computed since the cache was made."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        self.budget = budget
        self.used = 0
        self.hits = self.misses = 0
        self._entries: OrderedDict[int, tuple[tuple, int, int]] = OrderedDict()  # id -> (outputs, size, run)
        self._ids: dict[tuple, int] = {}  # step key -> id
        self._count = itertools.count()
        self._run = 0
        self._lock = threading.Lock()
        self._keys: list = []  # slot -> key, for the run under way (a session runs one at a time)
        self._fed: set[int] = set()  # ids of the memory owners of this run's fed arrays
        self._memo: weakref.WeakKeyDictionary[Plan, Plan] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"ValueCache({len(self._entries)} values, {self.used} of {self.budget} bytes, {self.hits} hits)"

    def clear(self) -> None:
        """Forget every stored value."""
        with self._lock:
            self._entries.clear()
            self._ids.clear()
            self.used = 0

    def prepare(self, plan: Plan, values: Mapping[Any, Any]) -> Plan:
        """Start a run of ``plan`` fed ``values``: the plan to run instead, whose steps look
        their outputs up first."""
        memo = self._memo.get(plan)
        if memo is None:
            memo = self._memo[plan] = self._wrap(plan)
        self._run += 1
        token = id(memo)
        keys: list = [None] * len(plan.template)
        for slot, value in enumerate(plan.template):
            if value is not None:
                keys[slot] = (token, "constant", slot)
        fed = set()
        for name, value in values.items():
            s = plan.feed_slots.get(name)
            if s is not None:
                keys[s] = feed_key(value)
            if isinstance(value, np.ndarray):
                fed.add(id(value if value.base is None else value.base))
        self._keys, self._fed = keys, fed
        if len(self._ids) > _MAX_KEYS:
            self.clear()
        return memo

    def _wrap(self, plan: Plan) -> Plan:
        steps: list[Step] = []
        for i, (fn, attrs, ins, outs, frees) in enumerate(plan.steps):
            info = plan.infos[i]
            fresh = info.placement == INLINE or (effect_of(str(info.op_type)) is Effect.RANDOM and "seed" not in attrs) or (
                info.op_type == "Dropout" and len(ins) > 2 and "seed" not in attrs)
            step = self._by_identity(fn, outs) if fresh else self._memoised(fn, (id(plan), i), ins, outs)
            steps.append(Step(step, attrs, ins, outs, frees))
        return dataclasses.replace(plan, steps=steps, tuner=None)

    def _by_identity(self, fn: Callable, outs: tuple) -> Callable:
        """A step always run; its outputs are keyed by what they are (a variable reference by
        its variable, anything else by identity)."""

        def run(attrs: Any, *args: Any) -> Any:
            result = fn(attrs, *args)
            if type(result) is not tuple:
                return result  # the runner reports the kernel's mistake
            keys = self._keys
            for k, s in outs:
                value = result[k]
                keys[s] = value if isinstance(value, VariableRef) else _Same(value)
            return result

        return run

    def _memoised(self, fn: Callable, where: tuple, ins: tuple, outs: tuple) -> Callable:
        def run(attrs: Any, *args: Any) -> Any:
            keys = self._keys
            key = (*where, *[keys[s] for s in ins])
            with self._lock:
                kid = self._ids.get(key)
                if kid is None:
                    kid = self._ids[key] = next(self._count)
                entry = self._entries.get(kid)
                if entry is not None:
                    self._entries[kid] = (entry[0], entry[1], self._run)
                    self._entries.move_to_end(kid)
                    self.hits += 1
            if entry is not None:
                result = entry[0]
            else:
                result = fn(attrs, *args)
                self._store(kid, result)
            for k, s in outs:
                keys[s] = (kid, k)
            return result

        return run

    def _store(self, kid: int, result: Any) -> None:
        if type(result) is not tuple:
            return  # the runner reports the kernel's mistake
        for value in result:
            if isinstance(value, np.ndarray):
                if id(value if value.base is None else value.base) in self._fed:
                    return  # shares the caller's memory: keyed, not kept
        size = _nbytes(result)
        with self._lock:
            self.misses += 1
            if size > self.budget:
                return
            while self.used + size > self.budget:
                oldest = next(iter(self._entries.values()), None)
                if oldest is None or oldest[2] == self._run:
                    return  # everything kept is this run's: keep it rather than thrash
                _, (_, freed, _) = self._entries.popitem(last=False)
                self.used -= freed
            for value in result:
                if isinstance(value, np.ndarray) and value.flags.writeable:
                    value.setflags(write=False)
            self._entries[kid] = (result, size, self._run)
            self.used += size
