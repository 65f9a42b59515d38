"""Reverse-mode differentiation as a graph transform (docs/training.md): ``grad(model, loss,
wrt)`` and the table of vector-Jacobian rules it reads."""

from amanda.autodiff.node import Node
from amanda.autodiff.rules import RULES, family
from amanda.autodiff.transform import grad

__all__ = ["RULES", "Node", "family", "grad"]
