"""A profile of one run that speaks containers: each op's time, device and bytes received from
other devices, with totals up the container tree.

``Session(model, profile=True)`` records every run; ``session.profile`` is the last run's
:class:`Profile`. Profiling runs a numpy plan's ops one at a time (the sequential interpreter),
so their times add up to the run's wall time; an onnxruntime part is one event, charged to the
innermost container that holds all its ops. ``select(selector)`` gives the totals of the
containers a selector matches, ``summary()`` a table, ``chrome_trace(path)`` a Chrome-trace
(Perfetto) JSON file.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from typing import Any, NamedTuple

import numpy as np

from amanda.containers import Container
from amanda.containers.records import Path
from amanda.errors import ArgumentError

__all__ = ["Event", "Profile", "common_prefix", "run_profiled"]


class Event(NamedTuple):
    """One op (or onnxruntime part) of a run: its path in the model, type, device, start (seconds
    after the run began), duration in seconds, and bytes it received from another device."""

    path: Path
    op_type: str
    device: str
    start: float
    seconds: float
    moved: int = 0


def run_profiled(plan: Any, env: list, device: str, origin: float) -> list[Event]:
    """Run ``plan``'s steps in order, timing each from the end of the one before; the events
    (``origin``: the run's start, a ``time.perf_counter()`` value)."""
    from amanda.exec.runner import _error, _not_a_tuple

    events = []
    clock = time.perf_counter
    get = env.__getitem__
    paths, infos = plan.paths, plan.infos
    with np.errstate(all="ignore"):
        start = clock()
        for i, (fn, attrs, ins, outs, frees) in enumerate(plan.steps):
            try:
                result = fn(attrs, *map(get, ins))
                if type(result) is not tuple:
                    raise _not_a_tuple(result)
            except Exception as exc:
                raise _error(plan, i, env, exc) from exc
            for k, slot in outs:
                env[slot] = result[k]
            for slot in frees:
                env[slot] = None
            end = clock()
            # an op's time runs from the previous op's end: its share of the interpreter's work
            # (gathering inputs, this loop, the last event's record) is counted with it
            events.append(Event(tuple(paths[i]), infos[i].op_type, device, start - origin, end - start))
            start = end
    return events


class Profile:
    """The events of one run and its wall time (seconds)."""

    def __init__(self, model: Container, events: list[Event], wall: float) -> None:
        self.model, self.events, self.wall = model, list(events), float(wall)

    @property
    def total(self) -> float:
        """The sum of the events' times (seconds)."""
        return float(sum(e.seconds for e in self.events))

    def totals(self) -> dict[Path, tuple[float, int, int]]:
        """Path of every container and op -> (seconds, events, bytes moved), summed up the tree
        (the root is ``()``)."""
        out: dict[Path, list] = defaultdict(lambda: [0.0, 0, 0])
        for e in self.events:
            for k in range(len(e.path) + 1):
                row = out[e.path[:k]]
                row[0] += e.seconds
                row[1] += 1
                row[2] += e.moved
        return {p: (s, n, b) for p, (s, n, b) in out.items()}

    def select(self, selector: str) -> dict[str, tuple[float, int, int]]:
        """The totals (seconds, events, bytes moved) of each node ``selector`` matches, by path."""
        totals = self.totals()
        paths = self.model.select(selector).paths
        return {"/".join(p): totals.get(tuple(p), (0.0, 0, 0)) for p in paths}

    def summary(self, depth: int = 2, rows: int = 30) -> str:
        """A table of the containers and ops down to ``depth`` levels, slowest first."""
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
            raise ArgumentError.at("depth", "a non-negative int", repr(depth))
        totals = sorted(((s, n, b, p) for p, (s, n, b) in self.totals().items() if len(p) <= depth),
                        key=lambda r: -r[0])
        wall = self.wall or 1.0
        lines = [f"{'path':<60} {'ms':>10} {'% wall':>7} {'events':>7} {'bytes moved':>12}"]
        for s, n, b, p in totals[:rows]:
            lines.append(f"{'/'.join(p) or '<run>':<60} {s * 1e3:>10.3f} {100 * s / wall:>7.1f} {n:>7} {b:>12}")
        lines.append(f"wall {self.wall * 1e3:.3f} ms; events sum to {self.total * 1e3:.3f} ms")
        return "\n".join(lines)

    def chrome_trace(self, path: str | os.PathLike) -> None:
        """Write the events as Chrome-trace JSON (``chrome://tracing``, Perfetto): one track per
        device, each event with its path, type and bytes moved."""
        tracks = {d: i for i, d in enumerate(dict.fromkeys(e.device for e in self.events))}
        events: list[dict[str, Any]] = [
            {"name": "thread_name", "ph": "M", "pid": 0, "tid": t, "args": {"name": d}} for d, t in tracks.items()]
        for e in self.events:
            events.append({"name": "/".join(e.path) or e.op_type, "cat": e.op_type, "ph": "X", "pid": 0,
                           "tid": tracks[e.device], "ts": e.start * 1e6, "dur": e.seconds * 1e6,
                           "args": {"device": e.device, "bytes_moved": int(e.moved)}})
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)

    def __repr__(self) -> str:
        return f"Profile({len(self.events)} events, wall {self.wall * 1e3:.3f} ms)"


def common_prefix(paths: list[Path]) -> Path:
    """The longest path every one of ``paths`` starts with."""
    if not paths:
        return ()
    first = paths[0]
    k = len(first)
    for p in paths[1:]:
        k = min(k, len(p))
        while k and tuple(p[:k]) != tuple(first[:k]):
            k -= 1
    return tuple(first[:k])

