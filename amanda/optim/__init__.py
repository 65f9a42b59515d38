"""Optimisers as containers of update ops (docs/training.md): ``minimize(model, loss,
optimizer)`` gives a training container whose ``train`` control port runs one step;
``freeze(trainer, session)`` gives the trained model for inference; ``fit``, ``evaluate`` and
``predict`` run the Keras-like loop, with callbacks and checkpoints that resume exactly;
``Scheduled(optimizer, schedule)`` computes the learning rate by ops; ``training_step(trainer)``
is one step as a pure function, which exports to ONNX."""

from amanda.optim.callbacks import (
    Callback,
    Checkpoint,
    EarlyStopping,
    History,
    LambdaCallback,
    LearningRateScheduler,
    TerminateOnNaN,
)
from amanda.optim.checkpoint import load_checkpoint, restore, save_checkpoint, snapshot
from amanda.optim.clip import clip_gradients
from amanda.optim.fit import evaluate, fit, predict
from amanda.optim.metrics import TopKAccuracy
from amanda.optim.minimize import minimize
from amanda.optim.optimizers import SGD, Adam, AdamW, Optimizer, Slot
from amanda.optim.schedules import CosineDecay, Schedule, Scheduled, StepDecay, Warmup
from amanda.optim.step import training_step
from amanda.optim.variables import default_weights, freeze, trainable

__all__ = ["SGD", "Adam", "AdamW", "Callback", "Checkpoint", "CosineDecay", "EarlyStopping", "History",
           "LambdaCallback", "LearningRateScheduler", "Optimizer", "Schedule", "Scheduled", "Slot", "StepDecay",
           "TerminateOnNaN", "TopKAccuracy", "Warmup", "clip_gradients",
           "default_weights", "evaluate", "fit", "freeze", "load_checkpoint", "minimize", "predict", "restore",
           "save_checkpoint", "snapshot", "trainable", "training_step"]
