"""How a container shows itself in IPython and notebooks (drawing lives in amanda.viz)."""

from __future__ import annotations

from typing import Any

__all__ = ["Displayed"]


class Displayed:
    """Mixin: IPython's text tree and a notebook's SVG, imported only when asked for."""

    __slots__ = ()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's display: the folded text tree of ``amanda.viz.tree_text``."""
        from amanda.viz.tree import tree_text

        printer.text(tree_text(self))  # type: ignore[arg-type]

    def _repr_svg_(self) -> str | None:
        """A notebook's drawing (None when too large to draw or when ``dot`` is missing)."""
        from amanda.viz.tree import notebook_svg

        return notebook_svg(self)  # type: ignore[arg-type]
