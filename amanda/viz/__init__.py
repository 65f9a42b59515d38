"""Seeing a model: DOT text, rendered pictures, notebook display and a text tree."""

from amanda.engines import install
from amanda.viz.dot import to_dot
from amanda.viz.render import render, to_svg
from amanda.viz.summary import Summary, SummaryRow, summary
from amanda.viz.tree import notebook_svg, tree_text

__all__ = ["Summary", "SummaryRow", "notebook_svg", "render", "summary", "to_dot", "to_svg", "tree_text"]

install("tree_text", tree_text)  # IPython display of containers
install("notebook_svg", notebook_svg)  # and of selections
