"""The error hierarchy: one root, subclasses with structured fields.

Every error says where (``path``), what was expected and what was found, so a
message can point at the offending node, port or field.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AmandaError",
    "ArgumentError",
    "CycleError",
    "ExecutionError",
    "FormatError",
    "InvariantError",
    "MappingError",
    "PathError",
    "Problem",
    "QueryError",
    "RenderError",
    "SchemaError",
    "suggest",
]


def suggest(name: str, choices: Iterable[str]) -> str:
    """A 'did you mean …?' hint for ``name`` among ``choices``, or ''.

    >>> suggest("Matmul", ["MatMul", "Add"])
    "did you mean 'MatMul'?"
    """
    if not isinstance(name, str):
        return ""  # a mistyped key (an int, None) resembles no name
    choices = [c for c in choices if isinstance(c, str)]
    by_case = [c for c in choices if c.lower() == name.lower()]
    close = by_case + [c for c in difflib.get_close_matches(name, choices, n=3, cutoff=0.6)
                       if c not in by_case]
    if not close:
        return ""
    return "did you mean " + " or ".join(repr(c) for c in close[:3]) + "?"


def format_path(path: Any) -> str:
    """Render a path (tuple of names, string, or None) for a message."""
    if path is None:
        return "<root>"
    if isinstance(path, tuple):
        return "/".join(str(p) for p in path) if path else "<root>"
    return str(path)


@dataclass(frozen=True, slots=True, repr=False)
class Problem:
    """One violation: where it is (``path``), what was ``expected``, what was ``found``, and
    optionally a ``hint`` on how to fix it.

    >>> str(Problem(("g", "relu"), "a port named x", "none"))
    'at g/relu: expected a port named x, found none'
    """

    path: Any
    expected: str
    found: str
    hint: str = ""

    def __str__(self) -> str:
        text = f"at {format_path(self.path)}: expected {self.expected}, found {self.found}"
        return f"{text} ({self.hint})" if self.hint else text

    def __repr__(self) -> str:
        return f"Problem({self!s})"


class AmandaError(Exception):
    """Root of every error amanda raises on bad input.

    Carries ``path`` (where), ``expected`` and ``found``.
    """

    def __init__(
        self,
        message: str,
        *,
        path: Any = None,
        expected: str | None = None,
        found: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.expected = expected
        self.found = found

    @classmethod
    def at(cls, path: Any, expected: str, found: str, hint: str = "") -> AmandaError:
        """Build an error from one located problem."""
        problem = Problem(path, expected, found, hint)
        return cls(str(problem), path=path, expected=expected, found=found)

    def __reduce__(self) -> Any:
        # subclasses take other constructor arguments (problems, cycles): rebuild from the
        # message and fields, so an error raised on a Dask worker arrives whole
        return _rebuild, (type(self), self.args, dict(self.__dict__))


def _rebuild(cls: type[AmandaError], args: tuple, fields: dict) -> AmandaError:
    error = Exception.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(fields)
    return error


_SHOWN = 20  # violations listed in a message


class InvariantError(AmandaError):
    """A container violates an invariant; ``problems`` lists every violation."""

    def __init__(self, problems: Sequence[Problem], context: str = "") -> None:
        self.problems = tuple(problems)
        head = f"{context}: " if context else ""
        if len(self.problems) == 1:
            message = f"{head}{self.problems[0]}"
        else:
            lines = "\n".join(f"  - {p}" for p in self.problems[:_SHOWN])
            if len(self.problems) > _SHOWN:  # the rest stay in .problems, out of the message
                lines += f"\n  ... and {len(self.problems) - _SHOWN} more (see .problems)"
            message = f"{head}{len(self.problems)} invariant violations:\n{lines}"
        first = self.problems[0] if self.problems else None
        super().__init__(
            message,
            path=first.path if first else None,
            expected=first.expected if first else None,
            found=first.found if first else None,
        )


class CycleError(InvariantError):
    """The effective dataflow has a cycle; ``cycle`` lists its op paths in order."""

    def __init__(self, cycle: Sequence[tuple[str, ...]]) -> None:
        self.cycle = tuple(cycle)
        shown = " -> ".join(format_path(p) for p in (*self.cycle, self.cycle[0]))
        super().__init__([Problem(self.cycle[0], "an acyclic dataflow", f"the cycle {shown}")])


class ArgumentError(AmandaError, TypeError, ValueError):
    """A public function got an argument of the wrong type or form.

    It is also a ``TypeError`` and a ``ValueError``, so callers that caught the bare
    built-ins before keep working.
    """


class PathError(AmandaError, LookupError):
    """A path, child name or port does not exist where it was looked up."""


class FormatError(AmandaError):
    """A YAML, JSON or ONNX document is malformed; carries ``line`` and ``column`` when known."""

    def __init__(
        self,
        message: str,
        *,
        path: Any = None,
        expected: str | None = None,
        found: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        where = ""
        if line is not None:
            where = f" (line {line}, column {column})"
        super().__init__(message + where, path=path, expected=expected, found=found)
        self.line = line
        self.column = column


class SchemaError(AmandaError):
    """An op does not fit its namespace schema, or a schema is malformed."""


class QueryError(AmandaError):
    """A selector is malformed or its filter fails."""


class MappingError(AmandaError):
    """A mapping table is malformed, unsafe, or cannot be applied."""


class ExecutionError(AmandaError):
    """Running a graph failed; names the op path, its type, namespace and inputs."""


class RenderError(AmandaError):
    """A drawing could not be made: Graphviz's ``dot`` program is missing, failed or ran past its
    time limit, or a level of the model holds more boxes than the drawing's budget."""
