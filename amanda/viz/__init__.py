"""Seeing a model: DOT text, rendered pictures, notebook display and a text tree."""

from amanda.viz.dot import to_dot
from amanda.viz.render import render, to_svg
from amanda.viz.tree import notebook_svg, tree_text

__all__ = ["notebook_svg", "render", "to_dot", "to_svg", "tree_text"]
