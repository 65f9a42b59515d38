"""SVG, PNG and PDF through Graphviz's ``dot`` program.

``to_dot`` needs nothing beyond amanda; rendering runs the ``dot`` program (install Graphviz
with the system's package manager), says so when it is missing, and stops it past a time limit:
a drawing never waits without bound. ``to_dot`` keeps a drawing within its box budget, which
Graphviz lays out in about a second; the limit is for a budget raised far past that.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amanda.errors import ArgumentError, RenderError
from amanda.viz.dot import to_dot

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["render", "to_svg"]

FORMATS = ("svg", "png", "pdf")
TIMEOUT = 30.0  # seconds ``dot`` may take by default


def _check_timeout(timeout: Any) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise ArgumentError.at("timeout", "a positive, finite number of seconds", repr(timeout))
    return float(timeout)


def _pipe(dot: str, fmt: str, timeout: float) -> bytes:
    program = shutil.which("dot")
    if program is None:
        raise RenderError(
            "rendering needs Graphviz's `dot` program on PATH: install graphviz with the system "
            "package manager (for example `apt-get install graphviz`); to_dot works without it",
            expected="the dot program",
            found="not on PATH",
        )
    try:
        done = subprocess.run([program, f"-T{fmt}"], input=dot.encode("utf-8"), capture_output=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        boxes = sum(1 for line in dot.splitlines() if " [label=" in line and " -> " not in line)
        raise RenderError(
            f"Graphviz's dot did not finish within {timeout:g} s laying out about {boxes} boxes and "
            f"{dot.count(' -> ')} edges: draw fewer (a smaller max_nodes or depth, or a part of the "
            "model), or allow more time (timeout=...)",
            expected=f"a layout within {timeout:g} s",
            found="dot still running (stopped)",
        ) from None
    except OSError as exc:
        raise RenderError(f"cannot run {program}: {exc.strerror}", expected="a runnable dot program",
                          found=program) from None
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()
        raise RenderError(f"dot failed: {detail}", expected="valid DOT", found=detail)
    return done.stdout


def to_svg(model: Container, timeout: float = TIMEOUT, **options: Any) -> str:
    """SVG text drawing ``model`` (options as for ``to_dot``); ``dot`` may take ``timeout`` seconds."""
    return _pipe(to_dot(model, **options), "svg", _check_timeout(timeout)).decode("utf-8")


def render(model: Container, path: str | Path, timeout: float = TIMEOUT, **options: Any) -> Path:
    """Write a drawing of ``model`` to ``path``; the suffix picks SVG, PNG or PDF.

    Options are those of ``to_dot`` (``depth``, ``highlight``, ``max_nodes``, ``group``).
    Graphviz's ``dot`` may take ``timeout`` seconds, then it is stopped and a RenderError says
    how to draw less. Returns the path.
    """
    if not isinstance(path, (str, Path)):
        raise ArgumentError.at("path", "a file path (str or Path)", type(path).__name__)
    target = Path(path)
    fmt = target.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ArgumentError.at("path", f"a file name ending in one of {FORMATS}", repr(str(target)))
    data = _pipe(to_dot(model, **options), fmt, _check_timeout(timeout))
    try:
        target.write_bytes(data)
    except OSError as exc:
        raise RenderError(f"cannot write {target}: {exc.strerror}", expected="a writable path",
                          found=str(target)) from None
    return target
