"""Progress bars for long operations (loading, converting, optimising large models).

A bar appears only on a terminal and only once the operation has run for ``delay`` seconds
(one second by default), so short operations and scripts writing to files stay silent.
``AMANDA_PROGRESS=0`` in the environment, or ``quiet=True`` where a function offers it,
turns bars off; ``AMANDA_PROGRESS=1`` turns them on even when stderr is not a terminal.

>>> with progress(3, "demo", quiet=True) as bar:
...     for _ in range(3):
...         bar.update()
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["progress", "progress_enabled"]

DELAY_SECONDS = 1.0


def progress_enabled(quiet: bool | None = None) -> bool:
    """Whether a bar may show: not ``quiet``, not disabled by ``AMANDA_PROGRESS=0``, and
    stderr a terminal (or ``AMANDA_PROGRESS=1``)."""
    if quiet:
        return False
    setting = os.environ.get("AMANDA_PROGRESS", "").strip()
    if setting == "0":
        return False
    if setting == "1":
        return True
    stream = sys.stderr
    return bool(getattr(stream, "isatty", None) and stream.isatty())


class _Silent:
    """The bar when none is shown: accepts the calls a tqdm bar takes."""

    def update(self, n: int = 1) -> None:
        """Ignore progress."""

    def set_postfix_str(self, text: str) -> None:
        """Ignore a status line."""


@contextmanager
def progress(total: int | None, description: str, quiet: bool | None = None,
             delay: float = DELAY_SECONDS) -> Iterator[Any]:
    """A tqdm bar over ``total`` steps (or a silent stand-in), closed on exit."""
    if not progress_enabled(quiet):
        yield _Silent()
        return
    from tqdm import tqdm

    bar = tqdm(total=total, desc=description, delay=delay, leave=False, unit="op", file=sys.stderr)
    try:
        yield bar
    finally:
        bar.close()
