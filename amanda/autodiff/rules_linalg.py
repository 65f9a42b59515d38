"""Einsum's equation parser, which the Einsum rule uses."""

from __future__ import annotations

import numpy as np

__all__ = ["parse_einsum"]

I64 = np.int64


def parse_einsum(equation: str, count: int) -> tuple[list[str], str]:
    """The operands' subscripts and the output's (made explicit as numpy does): each a string
    of letters, ``.`` standing for the ellipsis.

    >>> parse_einsum("ij,jk", 2)
    (['ij', 'jk'], 'ik')
    >>> parse_einsum("...ij,...jk->...ik", 2)
    (['.ij', '.jk'], '.ik')
    """
    text = equation.replace(" ", "").replace("...", ".")
    left, arrow, right = text.partition("->")
    terms = left.split(",")
    if not arrow:
        letters = [c for c in left if c.isalpha()]
        right = ("." if "." in left else "") + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    if len(terms) != count:
        raise ValueError(f"{len(terms)} operands in {equation!r}, {count} inputs")
    return terms, right


