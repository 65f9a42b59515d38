"""Timing helpers shared by the benchmarks: medians of repeated runs, markdown tables."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any


def median_time(fn: Callable[[], Any], repeat: int = 5, setup: Callable[[], Any] | None = None,
                clock: Callable[[], float] = time.perf_counter) -> float:
    """Median wall time (or ``clock``'s, such as ``time.process_time``) of ``fn`` over ``repeat``
    runs; ``setup``'s result is passed to ``fn`` when given (and not timed)."""
    times = []
    for _ in range(repeat):
        arg = setup() if setup is not None else None
        gc.collect()
        start = clock()
        fn(arg) if setup is not None else fn()  # type: ignore[call-arg]
        times.append(clock() - start)
    return statistics.median(times)


def table(rows: list[tuple[str, float, str, float, str]]) -> str:
    """Markdown: what, seconds, baseline, ratio, target."""
    lines = ["| measure | time | baseline | ratio | target |", "|---|---|---|---|---|"]
    for what, seconds, baseline, ratio, target in rows:
        lines.append(f"| {what} | {fmt_time(seconds)} | {baseline} | {ratio:.3g}x | {target} |")
    return "\n".join(lines)


def fmt_time(seconds: float) -> str:
    """Seconds in the unit that reads best."""
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.1f} µs"
