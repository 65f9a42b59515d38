"""What a pass changed: a report record per pass, and the result pairs the passes return."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from amanda.containers import Container

__all__ = ["OptimizeResult", "PassReport", "PassResult"]


@dataclass(frozen=True)
class PassReport:
    """The paths a pass removed, added and replaced (as ``a/b`` strings), by pass name.

    >>> PassReport("dead_code", removed=("a",)).changed
    True
    """

    name: str
    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        """Whether the pass changed anything."""
        return bool(self.removed or self.added or self.replaced)

    def __str__(self) -> str:
        return (f"{self.name}: {len(self.removed)} removed, {len(self.added)} added, "
                f"{len(self.replaced)} replaced")

    @classmethod
    def of(cls, name: str, changes: dict[str, list[str]]) -> PassReport:
        """A report from a ``{kind: [paths]}`` mapping (kinds: removed, added, replaced)."""
        return cls(name, *(tuple(changes.get(k, ())) for k in ("removed", "added", "replaced")))


class PassResult(NamedTuple):
    """A pass's output model and its report; the model is the input itself when nothing changed."""

    model: Container
    report: PassReport


class OptimizeResult(NamedTuple):
    """The optimised model and the report of every pass run, in order."""

    model: Container
    reports: tuple[PassReport, ...]
