"""SVG, PNG and PDF through Graphviz's ``dot`` program (the ``viz`` extra).

``to_dot`` needs nothing beyond amanda; rendering needs the ``graphviz`` Python package and
the ``dot`` program on PATH, and says which one is missing when it cannot run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from amanda.errors import ArgumentError, RenderError
from amanda.viz.dot import to_dot

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["render", "to_svg"]

FORMATS = ("svg", "png", "pdf")


def _pipe(dot: str, fmt: str) -> bytes:
    try:
        import graphviz
    except ImportError:
        raise RenderError(
            "rendering needs the graphviz Python package: pip install 'amanda[viz]' "
            "(to_dot works without it)",
            expected="the graphviz package",
            found="not installed",
        ) from None
    try:
        return graphviz.Source(dot).pipe(format=fmt, engine="dot")
    except graphviz.ExecutableNotFound:
        raise RenderError(
            "rendering needs Graphviz's `dot` program on PATH: install graphviz with the system "
            "package manager (for example `apt-get install graphviz`)",
            expected="the dot program",
            found="not on PATH",
        ) from None
    except graphviz.CalledProcessError as exc:
        detail = (exc.stderr or b"").decode("utf-8", "replace").strip()
        raise RenderError(f"dot failed: {detail}", expected="valid DOT", found=detail) from None


def to_svg(model: Container, **options: Any) -> str:
    """SVG text drawing ``model`` (options as for ``to_dot``)."""
    return _pipe(to_dot(model, **options), "svg").decode("utf-8")


def render(model: Container, path: str | Path, **options: Any) -> Path:
    """Write a drawing of ``model`` to ``path``; the suffix picks SVG, PNG or PDF.

    Options are those of ``to_dot`` (``depth``, ``highlight``, ``max_nodes``). Returns the path.
    """
    if not isinstance(path, (str, Path)):
        raise ArgumentError.at("path", "a file path (str or Path)", type(path).__name__)
    target = Path(path)
    fmt = target.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ArgumentError.at("path", f"a file name ending in one of {FORMATS}", repr(str(target)))
    data = _pipe(to_dot(model, **options), fmt)
    try:
        target.write_bytes(data)
    except OSError as exc:
        raise RenderError(f"cannot write {target}: {exc.strerror}", expected="a writable path",
                          found=str(target)) from None
    return target
