"""Reverse-mode differentiation as a graph transform (docs/training.md): ``grad(model, loss,
wrt)``, the table of vector-Jacobian rules it reads, and ``hvp``/``jvp`` built from it."""

from amanda.autodiff.higher import hvp, jvp
from amanda.autodiff.node import Node
from amanda.autodiff.rules import RULES, family
from amanda.autodiff.transform import grad

__all__ = ["RULES", "Node", "family", "grad", "hvp", "jvp"]
