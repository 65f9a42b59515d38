"""Running a partitioning in this process, one Session per part, state shared per device.

This is the reference for the distributed backends: a partitioned run must give what an
unpartitioned Session gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from amanda.exec.dist.partition import DONE, Part, Partitioning
from amanda.exec.session import Session

__all__ = ["part_session", "run_part", "run_partitioned"]


def part_session(part: Part, state: dict[str, Any]) -> Session:
    """A sequential Session over one part whose variables live in ``state`` (one per device)."""
    session = Session(part.container, threads=1)
    session._state = state  # the device's variables, shared by all its parts
    return session


def run_part(session: Session, part: Part, feeds: Mapping[Any, Any], received: Mapping[str, Any]) -> dict:
    """Run every op of ``part``; its output ports' values by port name."""
    inputs = {port: feeds[name] for port, name in part.feeds.items()}
    inputs.update(received)
    outputs = list(part.container.output_names)
    values = session.run([*outputs, DONE], inputs)
    return dict(zip(outputs, values))


def run_partitioned(partitioning: Partitioning, feeds: Mapping[Any, Any],
                    states: dict[str, dict[str, Any]] | None = None) -> list:
    """The fetches of a partitioned run, in fetch order (None for effects)."""
    states = {} if states is None else states
    produced: list[dict] = []
    for part in partitioning.parts:
        received = {port: produced[i][out] for port, (i, out) in part.receives.items()}
        session = part_session(part, states.setdefault(part.device, {}))
        produced.append(run_part(session, part, feeds, received))
    results = []
    for source in partitioning.sources:
        if source[0] == "part":
            results.append(produced[source[1]][source[2]])
        elif source[0] == "feed":
            results.append(feeds[source[1]])
        else:
            results.append(None)
    return results
