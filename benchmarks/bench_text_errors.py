"""How long a bad document takes to reject against how long a valid one takes to load.

The document is the 10,000-op model of bench_containers.py (100 subgraphs of 100 ops, about
2 MB of YAML, 4 MB of JSON); the bad one differs in one field near its end (an op's name
becomes a list), so nearly the whole document is read and built before the error is found.
Times are the minimum CPU time (``time.process_time``) over ``--repeat`` alternating runs, so
that other processes on a shared machine count less. Target: rejecting takes at most 1.5x
the valid load (the error's line comes from the tree the first reading composed).

    python benchmarks/bench_text_errors.py [--blocks 100] [--ops 100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_containers import model_document
from common import table

import amanda
from amanda.io.text import _write

_FIELDS = {"yaml": ("name: op98", "name: [1, 2]"), "json": ('"name": "op98"', '"name": [1, 2]')}


def texts(format: str, blocks: int, ops: int) -> tuple[str, str]:
    """The valid document and the one with a bad field near its end."""
    good = _write(model_document(blocks, ops), format)
    old, new = _FIELDS[format]
    at = good.rfind(old)
    return good, good[:at] + new + good[at + len(old):]


def cpu_times(good: str, bad: str, format: str, repeat: int) -> tuple[float, float, str]:
    """Minimum CPU seconds to load ``good`` and to reject ``bad``, and the rejection's message."""
    times: dict[str, list[float]] = {"good": [], "bad": []}
    message = ""
    for _ in range(repeat):
        for name, text in (("good", good), ("bad", bad)):
            gc.collect()
            start = time.process_time()
            try:
                amanda.loads(text, format)
            except amanda.FormatError as exc:
                message = str(exc)
            times[name].append(time.process_time() - start)
    return min(times["good"]), min(times["bad"]), message


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--blocks", type=int, default=100)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for format in ("yaml", "json"):
        good, bad = texts(format, args.blocks, args.ops)
        valid, rejected, message = cpu_times(good, bad, format, args.repeat)
        print(f"{format}: {len(good) / 1e6:.1f} MB; {message}")
        rows.append((f"{format.upper()} reject, one bad field", rejected, f"valid load {valid:.2f} s",
                     rejected / valid, "<= 1.5x"))
    print(table(rows))


if __name__ == "__main__":
    main()
