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

from typing import Any

import numpy as np

from amanda.autodiff.node import Node, rank, shape_of, unbroadcast
from amanda.build import ops

__all__ = ["einsum_vjp", "parse_einsum"]

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


def _spelled(term: str) -> str:
    return term.replace(".", "...")


def einsum_vjp(n: Node) -> list:
    """Einsum: per operand, an Einsum of the gradient and the other operands (module doc)."""
    values = [n.given(i) for i in range(len(n.inputs))]
    equation = n.attr("equation")
    equation = equation.decode() if isinstance(equation, bytes) else str(equation)
    try:
        terms, out = parse_einsum(equation, len(values))
    except ValueError as exc:
        raise n.fail("an equation with one term per input", str(exc)) from None
    g = n.grad()
    return [_einsum_operand_grad(n, g, values, terms, out, k, equation) if n.need(k) else None
            for k in range(len(values))]


def _einsum_operand_grad(n: Node, g: Any, values: list, terms: list, out: str, k: int, equation: str) -> Any:
    """The gradient of Einsum operand ``k``: the output gradient contracted with the other
    operands, expanded over the letters only operand ``k`` had (summed away in the output)."""
    x, term = values[k], terms[k]
    letters = [c for c in term if c != "."]
    if len(set(letters)) != len(letters):
        raise n.fail("operands without repeated subscripts", f"{term!r} in {equation!r}")
    others = [(v, t) for i, (v, t) in enumerate(zip(values, terms)) if i != k]
    present = set(out) | {c for _, t in others for c in t}
    target = "".join(c for c in term if c in present)
    eq = ",".join(_spelled(t) for t in [out] + [t for _, t in others]) + "->" + _spelled(target)
    gk = ops.Einsum(g, *[v for v, _ in others], equation=eq)
    missing = [c for c in term if c not in present]
    if missing:
        r = rank(x, n)
        ell = r - len(letters)
        where = [i if "." not in term or i < term.index(".") else i - 1 + ell
                 for i, c in enumerate(term) if c in missing]
        gk = ops.Expand(ops.Unsqueeze(gk, np.array(where, I64)), shape_of(x))
    return unbroadcast(gk, x)


