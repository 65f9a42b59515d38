"""Optimisers as containers of update ops (docs/training.md): ``minimize(model, loss,
optimizer)`` gives a training container whose ``train`` control port runs one step;
``freeze(trainer, session)`` gives the trained model for inference."""

from amanda.optim.minimize import minimize
from amanda.optim.optimizers import SGD, Adam, AdamW, Optimizer, Slot
from amanda.optim.variables import default_weights, freeze, trainable

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "Slot", "default_weights", "freeze", "minimize", "trainable"]
