"""Vector-Jacobian rules of products and determinants: Einsum, Det, ReduceProd, CumProd.

- **Einsum**: each operand's gradient is another Einsum, of the output gradient with the
  other operands, to the operand's subscripts; a letter only that operand has (summed out
  by the forward op) comes back by broadcasting. An operand with a repeated letter (a
  diagonal, ``ii->i``) is a ``SchemaError`` naming the op.
- **Det**: ``d det(A) / d A`` is the cofactor matrix, each entry the determinant of a minor
  (Det ops again, so a singular matrix has a gradient too). The matrix size must be known.
- **ReduceProd**: the product of the other elements, exact where inputs are zero (one zero:
  only it gets a gradient; two or more: none does).
- **CumProd**: ``cumsum(g * y)`` in the other direction, divided by ``x`` (exact for inputs
  without zeros, as torch's fast path; a zero input gives inf/nan there).
"""

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


