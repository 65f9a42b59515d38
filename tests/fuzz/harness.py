"""Run one fuzz case and classify how it ended.

A *target* turns a source of random choices into a case (``generate``) and runs amanda on it
(``run``). The contract every case must meet: it ends in a valid result or an ``AmandaError``
subclass within the time limit, and leaves its inputs unchanged. ``classify`` names the
ending:

- ``ok``: a valid result;
- ``amanda_error:<Class>``: bad input rejected as the library promises;
- ``raw_exception:<Type>@<file:line>``: any other exception (a bug), located at the innermost
  frame inside ``amanda/`` so that distinct bugs of one type stay apart;
- ``modified_input``: the run changed one of its inputs (a bug);
- ``invalid_result``: the run returned something that breaks a property the target checks;
- ``hang``: the time limit passed; ``crash``: the process died (only the worker pool sees it);
- ``generator_error:<Type>``: the fuzzer could not make the case (a bug of the fuzzer).

Choices come from a :class:`Source`, so the same generator serves hypothesis (which then
shrinks failures) and the long runner, which seeds ``random.Random`` with
``target:seed:index`` so that every case can be replayed from its index alone.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import amanda
from amanda import Container
from amanda.errors import AmandaError

BAD = ("raw_exception", "modified_input", "invalid_result", "hang", "crash", "generator_error")


class Source:
    """Random choices; subclasses draw them from ``random.Random`` or from hypothesis."""

    def integer(self, low: int, high: int) -> int:
        """An int in ``[low, high]``."""
        raise NotImplementedError

    def choice(self, items: Sequence[Any]) -> Any:
        """One of ``items``."""
        return items[self.integer(0, len(items) - 1)]

    def boolean(self, chance: float = 0.5) -> bool:
        """True with about the given chance."""
        return self.integer(0, 999) < chance * 1000

    def data(self, size: int) -> bytes:
        """Up to ``size`` random bytes."""
        return bytes(self.integer(0, 255) for _ in range(self.integer(0, size)))


class RandomSource(Source):
    """Choices from ``random.Random(key)``: the same key gives the same choices.

    >>> RandomSource("t:0:5").integer(0, 10**6) == RandomSource("t:0:5").integer(0, 10**6)
    True
    """

    def __init__(self, key: str) -> None:
        self.rng = random.Random(key)

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def data(self, size: int) -> bytes:
        return self.rng.randbytes(self.rng.randint(0, size))


class HypothesisSource(Source):
    """Choices drawn from hypothesis's ``st.data()``, so failures shrink."""

    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st

        self.draw, self.st = data.draw, st

    def integer(self, low: int, high: int) -> int:
        return self.draw(self.st.integers(low, high))

    def choice(self, items: Sequence[Any]) -> Any:
        return self.draw(self.st.sampled_from(list(items)))

    def data(self, size: int) -> bytes:
        return self.draw(self.st.binary(max_size=size))


@dataclass(frozen=True)
class Target:
    """A fuzz target: ``generate(source) -> case`` and ``run(case)`` (raises on a bad ending)."""

    name: str
    generate: Callable[[Source], Any]
    run: Callable[[Any], None]
    describe: Callable[[Any], bytes] = lambda case: repr(case).encode()


class ModifiedInput(Exception):
    """A run changed an input it was given."""


class InvalidResult(Exception):
    """A run returned a result that breaks a property of its target."""


class CaseTimeout(BaseException):
    """The time limit passed; a BaseException so that ``except Exception`` cannot swallow it."""


@dataclass(frozen=True)
class Outcome:
    """How one case ended: its class, a one-line detail and the seconds it took."""

    kind: str
    detail: str
    seconds: float

    @property
    def bad(self) -> bool:
        """True when the case broke the contract."""
        return self.kind.split(":")[0] in BAD


def _where(exc: BaseException) -> str:
    """``file:line`` of the innermost frame in amanda (else the innermost frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    inside = [f for f in frames if f"{os.sep}amanda{os.sep}" in f.filename] or frames[-1:]
    if not inside:
        return "?"
    frame = inside[-1]
    parts = frame.filename.split(os.sep)
    short = os.sep.join(parts[parts.index("amanda"):]) if "amanda" in parts else parts[-1]
    return f"{short}:{frame.lineno}"


def _guard(limit: float | None) -> Callable[[], None]:
    """Arm a timer that raises CaseTimeout in the main thread; return its disarm function."""
    if not limit or threading.current_thread() is not threading.main_thread():
        return lambda: None

    def expire(signum: int, frame: Any) -> None:
        raise CaseTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, limit)

    def disarm() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

    return disarm


def classify(target: Target, case: Any, limit: float | None = 5.0) -> Outcome:
    """Run ``target`` on ``case`` in this process and say how it ended.

    >>> t = Target("div", lambda s: s.integer(0, 1), lambda case: 1 // case)
    >>> classify(t, 1).kind, classify(t, 0).kind.split("@")[0]
    ('ok', 'raw_exception:ZeroDivisionError')
    """
    start = time.perf_counter()
    disarm = _guard(limit)
    kind, detail = "ok", ""
    try:
        try:
            target.run(case)
        finally:
            disarm()
    except CaseTimeout:
        kind, detail = "hang", f"no result within {limit} s"
    except AmandaError as exc:
        kind, detail = f"amanda_error:{type(exc).__name__}", str(exc)
    except ModifiedInput as exc:
        kind, detail = "modified_input", str(exc)
    except InvalidResult as exc:
        kind, detail = "invalid_result", str(exc)
    except Exception as exc:  # noqa: BLE001 - anything else is the finding
        kind, detail = f"raw_exception:{type(exc).__name__}@{_where(exc)}", f"{type(exc).__name__}: {exc}"
    return Outcome(kind, " ".join(detail.split())[:300], time.perf_counter() - start)


def case_of(target: Target, seed: int, index: int) -> Any:
    """The long runner's case number ``index`` of ``target`` under ``seed``."""
    return target.generate(RandomSource(f"{target.name}:{seed}:{index}"))


Snapshot = tuple[Container, bool, str]


def snapshot(container: Container) -> Snapshot:
    """An independent copy of ``container`` (rebuilt from its YAML, since containers refuse
    ``deepcopy``), whether it equals the container (NaN attributes may not), and the YAML."""
    text = amanda.dumps(container)
    twin = amanda.loads(text)
    return twin, twin == container, text


def check_unchanged(container: Container, before: Snapshot, what: str) -> None:
    """Raise ModifiedInput if ``container`` no longer matches ``before``."""
    twin, equal, text = before
    if (equal and container != twin) or amanda.dumps(container) != text:
        raise ModifiedInput(f"{what} changed during the run")
