"""What running an op does beyond computing its outputs from its inputs.

>>> Effect.RANDOM.pure, Effect.PURE.pure
(False, True)
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Effect"]


class Effect(Enum):
    """An op's effect: ``PURE`` ops compute outputs from inputs alone, so equal ops on equal
    inputs may be merged, unused ones dropped and constant ones folded; ``RANDOM`` ops draw
    new values on each run; ``STATEFUL`` ops read or write session state (variables, I/O);
    ``CONTROL`` ops run graphs held in their attributes (whatever those do)."""

    PURE = "pure"
    RANDOM = "random"
    STATEFUL = "stateful"
    CONTROL = "control"

    @property
    def pure(self) -> bool:
        """Whether the op is free of effects."""
        return self is Effect.PURE
