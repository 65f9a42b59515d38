"""A plan's schedule: when each step may run, where, and when its inputs can be dropped.

The planner's last stages: :func:`with_frees` gives each step the slots it reads last (the
sequential interpreter clears them after it); :func:`schedule` gives each step a
:class:`Scheduled` record, the one list the threaded scheduler walks: how many steps it waits
for, the steps that wait for it, the distinct slots it reads and where it runs (inline, on the
pool, or by the size of its inputs).

>>> from amanda.exec.plan import Step
>>> steps = [Step(None, None, (1,), ((0, 2),), ()), Step(None, None, (2,), ((0, 3),), ())]
>>> [s.frees for s in with_frees(steps, frozenset({3}))]
[(1,), (2,)]
>>> schedule(steps, [("a",), ("b",)], {}, [BY_SIZE, BY_SIZE], [False, False], frozenset({3})).records[1]
Scheduled(preds=1, succs=(), reads=(2,), place=2)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from amanda.containers.records import Path

if TYPE_CHECKING:
    from amanda.exec.plan import Slot, Step

__all__ = ["BY_SIZE", "INLINE", "POOL", "Schedule", "Scheduled", "schedule", "with_frees"]

# how the threaded scheduler places a step
INLINE, POOL, BY_SIZE = 0, 1, 2


class Scheduled(NamedTuple):
    """One step as the threaded scheduler sees it."""

    preds: int  # how many steps it waits for (data and control)
    succs: tuple[int, ...]  # the steps that wait for it
    reads: tuple[int, ...]  # the distinct non-empty slots it reads
    place: int  # INLINE, POOL or BY_SIZE


class Schedule(NamedTuple):
    """Every step's record, readers per slot, the slots a run keeps (its fetches), whether the
    plan gains from running steps side by side and whether it calls BLAS."""

    records: tuple[Scheduled, ...]
    uses: tuple[int, ...]
    keep: frozenset[int]
    parallel: bool
    uses_blas: bool


def with_frees(steps: list[Step], keep: frozenset[Slot]) -> list[Step]:
    """Each step with the slots whose last reader it is (freed right after it runs)."""
    last: dict[int, int] = {}
    for i, (_, _, ins, outs, _) in enumerate(steps):
        for s in ins:
            last[s] = i
        for _, s in outs:
            last.setdefault(s, i)  # written but never read: free at once (unless fetched)
    frees: list[list[int]] = [[] for _ in steps]
    for s, i in last.items():
        if s and s not in keep:
            frees[i].append(s)
    return [step._replace(frees=tuple(sorted(frees[i]))) for i, step in enumerate(steps)]


def writers(steps: Sequence[Step]) -> dict[int, int]:
    """The step that writes each slot."""
    return {s: i for i, step in enumerate(steps) for _, s in step.outs}


def schedule(steps: list[Step], paths: Sequence[Path], controls: Mapping[Path, list[Path]],
             places: Sequence[int], heavy: Sequence[bool], keep: frozenset[int]) -> Schedule:
    """The schedule of ``steps`` (ops at ``paths``): a step waits for the writers of the slots
    it reads and for its control predecessors that have a step (a folded Constant has none)."""
    writer = writers(steps)
    step_of = {path: i for i, path in enumerate(paths)}
    preds: list[int] = []
    succ_sets: list[set[int]] = [set() for _ in steps]
    reads: list[tuple[int, ...]] = []
    uses: dict[int, int] = {}
    for j, (step, path) in enumerate(zip(steps, paths)):
        before = {writer[s] for s in step.ins if s in writer}
        before.update(step_of[p] for p in controls.get(path, ()) if p in step_of)
        before.discard(j)
        for i in before:
            succ_sets[i].add(j)
        preds.append(len(before))
        distinct = tuple(sorted({s for s in step.ins if s}))
        reads.append(distinct)
        for s in distinct:
            uses[s] = uses.get(s, 0) + 1
    size = 1 + max([0, *uses, *writer])
    succs = [tuple(sorted(s)) for s in succ_sets]
    records = tuple(Scheduled(*r) for r in zip(preds, succs, reads, places))
    return Schedule(records, tuple(uses.get(s, 0) for s in range(size)), keep,
                    _parallel(preds, succs, heavy), any(heavy))


def _parallel(preds: list[int], succs: list[tuple[int, ...]], heavy: Sequence[bool]) -> bool:
    """Whether at least half the heavy steps can run beside another heavy step.

    A heavy step's level counts the heavy steps on its longest path from the inputs;
    heavy steps sharing a level are independent of each other.
    """
    total = sum(heavy)
    if total < 2:
        return False
    level = [0] * len(preds)
    for i in range(len(preds)):  # steps are in topological order
        if heavy[i]:
            level[i] += 1
        for j in succs[i]:
            if level[j] < level[i]:
                level[j] = level[i]
    count: dict[int, int] = {}
    for i, h in enumerate(heavy):
        if h:
            count[level[i]] = count.get(level[i], 0) + 1
    beside = sum(c for c in count.values() if c >= 2)
    return 2 * beside >= total
