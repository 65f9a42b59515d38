"""The ``amanda/train`` vocabulary: fused optimiser steps (kernels in
``amanda/exec/kernels/grad_kernels.py``), so ``validate`` and the builder know them.

>>> from amanda.namespaces import namespace
>>> namespace("amanda/train").schema("AdamStep").output_names
('weight', 'm', 'v')
"""

from __future__ import annotations

from amanda.exec.kernels import grad_kernels
from amanda.namespaces.namespace import Namespace, register_provider
from amanda.namespaces.schema import AttrSchema, OpSchema, PortSchema

__all__ = ["TRAIN", "train_namespace"]

TRAIN = grad_kernels.TRAIN


def train_namespace(name: str = TRAIN) -> Namespace:
    """The schema of ``AdamStep``."""
    attrs = [AttrSchema("lr", "float", default=1e-3), AttrSchema("beta1", "float", default=0.9),
             AttrSchema("beta2", "float", default=0.999), AttrSchema("eps", "float", default=1e-8),
             AttrSchema("weight_decay", "float", default=0.0), AttrSchema("decoupled", "int", default=0)]
    ports = (*(PortSchema(n) for n in ("weight", "grad", "m", "v", "step")), PortSchema("lr", optional=True))
    adam = OpSchema("AdamStep", inputs=ports,
                    outputs=tuple(PortSchema(n) for n in ("weight", "m", "v")), attrs={a.name: a for a in attrs},
                    doc="One Adam step (torch.optim.Adam's arithmetic; AdamW's with decoupled=1): the new "
                        "weight and moments at step count `step`, at the rate of input `lr` when "
                        "given (a schedule's), else of attribute `lr`.")
    return Namespace(name, schemas={adam.type: adam}, source="amanda.exec.kernels.grad_kernels")


register_provider(TRAIN, lambda: (TRAIN,), train_namespace)
