"""How a container shows itself in IPython and notebooks (drawing lives in amanda.viz, which
installs the ``tree_text`` and ``notebook_svg`` engines)."""

from __future__ import annotations

from typing import Any

from amanda.engines import engine

__all__ = ["Displayed"]


class Displayed:
    """Mixin: IPython's text tree and a notebook's SVG, drawn by the engines amanda.viz installs."""

    __slots__ = ()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's display: the folded text tree of ``amanda.viz.tree_text``."""
        printer.text(engine("tree_text")(self))

    def _repr_svg_(self) -> str | None:
        """A notebook's drawing (None when too large to draw or when ``dot`` is missing)."""
        return engine("notebook_svg")(self)  # type: ignore[no-any-return]
