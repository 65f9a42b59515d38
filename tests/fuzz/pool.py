"""A pool of worker processes that survives its cases: a case that segfaults or aborts the
interpreter, or runs past its time limit, costs one worker, which is replaced, and the case
is recorded as ``crash`` or ``hang`` (its input written to ``tests/fuzz/crashes/``)."""

from __future__ import annotations

import collections
import json
import os
import queue
import selectors
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CRASHES = Path(__file__).resolve().parent / "crashes"
STARTUP = 180.0  # seconds a worker may take to import and build its seeds


class Worker:
    """One ``python -m tests.fuzz.worker`` process."""

    def __init__(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   MKL_NUM_THREADS="1")
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the worker
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz.worker"], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.select = selectors.DefaultSelector()
        self.select.register(self.proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        ready = self._read(STARTUP)
        if ready in ("hang", "crash"):
            raise RuntimeError(f"a fuzz worker did not start ({ready}): {self.stderr()}")

    def _read(self, timeout: float) -> dict[str, Any] | str:
        if not self.select.select(timeout):
            return "hang"
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        return json.loads(line) if line else "crash"

    def ask(self, request: dict[str, Any], timeout: float) -> dict[str, Any] | str:
        """The worker's answer, or ``"hang"``/``"crash"`` (the worker is then dead)."""
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except BrokenPipeError:
            return "crash"
        answer = self._read(timeout)
        if isinstance(answer, str):
            self._stop()  # its stderr stays readable until close()
        return answer

    def stderr(self) -> str:
        """The last lines the worker wrote to stderr (a crash's traceback)."""
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-3000:]

    def _stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.select.close()

    def close(self) -> None:
        """Stop the worker (kill it if it does not stop at once) and drop its stderr."""
        self._stop()
        self.log.close()


@dataclass
class Report:
    """What one target's cases did: outcome counts, the first example of each outcome,
    and every case that crashed or hung."""

    target: str
    cases: int = 0
    counts: collections.Counter = field(default_factory=collections.Counter)
    examples: dict[str, tuple[int, str]] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, index: int, kind: str, detail: str, seconds: float) -> None:
        """Count one case."""
        self.cases += 1
        self.counts[kind] += 1
        self.examples.setdefault(kind, (index, detail))
        self.seconds += seconds

    def bad(self) -> dict[str, tuple[int, str]]:
        """Examples of every outcome that breaks the contract."""
        from tests.fuzz.harness import BAD

        return {k: v for k, v in self.examples.items() if k.split(":")[0] in BAD}


def record(target: str, seed: int, index: int, kind: str, stderr: str) -> Path:
    """Write the input of a crash or hang, and how to replay it, to ``tests/fuzz/crashes``."""
    from tests.fuzz.harness import case_of
    from tests.fuzz.targets import TARGETS

    CRASHES.mkdir(exist_ok=True)
    stem = CRASHES / f"{target}-{seed}-{index}-{kind}"
    stem.with_suffix(".bin").write_bytes(TARGETS[target].describe(case_of(TARGETS[target], seed, index)))
    stem.with_suffix(".txt").write_text(
        f"{kind} of target {target}, seed {seed}, case {index}\n"
        f"replay: python -m tests.fuzz --target {target} --seed {seed} --replay {index}\n\n{stderr}")
    return stem


def _record(target: str, seed: int, index: int, kind: str, stderr: str) -> str:
    try:
        return f"see tests/fuzz/crashes/{record(target, seed, index, kind, stderr).name}.txt"
    except Exception as exc:  # noqa: BLE001 - the case is counted even if its input cannot be
        return f"the input could not be recorded: {type(exc).__name__}: {exc}"


def run_cases(targets: list[str], cases: int, seed: int = 0, workers: int = 2, limit: float = 5.0,
              start: int = 0, progress: Any = None) -> dict[str, Report]:
    """Run cases ``start .. start + cases - 1`` of every target on ``workers`` processes."""
    reports = {t: Report(t) for t in targets}
    jobs: queue.Queue = queue.Queue()
    for index in range(start, start + cases):
        for t in targets:
            jobs.put((t, index))
    lock = threading.Lock()

    def serve() -> None:
        worker = Worker()
        while True:
            try:
                t, index = jobs.get_nowait()
            except queue.Empty:
                break
            request = {"op": "case", "target": t, "seed": seed, "index": index, "limit": limit}
            answer = worker.ask(request, limit * 3 + 5)
            if isinstance(answer, str):  # the worker died or stuck: record the case, replace it
                answer = {"kind": answer, "detail": _record(t, seed, index, answer, worker.stderr()),
                          "seconds": limit}
                worker.close()
                worker = Worker()
            elif answer["kind"] == "hang":  # threads the case started may still be running
                answer["detail"] += "; " + _record(t, seed, index, "hang", "")
                worker.close()
                worker = Worker()
            with lock:
                reports[t].add(index, answer["kind"], answer["detail"], answer["seconds"])
                if progress:
                    progress()
        worker.close()

    _in_threads(serve, workers)
    missing = cases * len(targets) - sum(r.cases for r in reports.values())
    if missing:
        raise RuntimeError(f"{missing} cases were not run (a worker thread failed)")
    return reports


def run_hypothesis(targets: list[str], examples: int, limit: float = 5.0, shrink: bool = False,
                   workers: int = 2) -> dict[str, dict[str, Any]]:
    """A derandomized hypothesis test of each target, on ``workers`` processes; its counts and
    first bad case (``{"bad": ["crash", ...]}`` when the worker died)."""
    results: dict[str, dict[str, Any]] = {}
    jobs: queue.Queue = queue.Queue()
    for t in targets:
        jobs.put(t)

    def serve() -> None:
        worker = Worker()
        while True:
            try:
                t = jobs.get_nowait()
            except queue.Empty:
                break
            request = {"op": "hypothesis", "target": t, "examples": examples, "limit": limit,
                       "shrink": shrink}
            answer = worker.ask(request, examples * limit + 60)
            if isinstance(answer, str):
                answer = {"counts": {}, "bad": [answer, worker.stderr()[-1500:], "during hypothesis"]}
                worker.close()
                worker = Worker()
            results[t] = answer
        worker.close()

    _in_threads(serve, workers)
    return {t: results[t] for t in targets}


def _in_threads(serve: Any, workers: int) -> None:
    threads = [threading.Thread(target=serve) for _ in range(max(1, workers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
