"""Recurrent layers: RNN, GRU and LSTM, each op's kernel, type rule and gradient side by side.

Kernels. One driver serves all three (:func:`~amanda.exec.kernels.recurrent.run_recurrent`, with
its fast path in ``exec/kernels/recurrent_fast.py``).

Gradients. The recurrence unrolled into builder ops and differentiated through them
(:func:`~amanda.autodiff.composite.composite`). The unrolled cell follows the ONNX definitions
as the kernel does: every direction (forward, reverse, bidirectional), both layouts, initial states,
``sequence_lens`` (a finished sequence keeps its state and writes zeros), the activation
attributes with their alpha and beta, ``clip``, LSTM peepholes and ``input_forget``, GRU's
``linear_before_reset``. Gradients reach X, W, R, B, the initial states and the peepholes.
The number of time steps must be known when ``grad`` runs (one set of ops per step).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node, const
from amanda.build import ops
from amanda.build.values import Value
from amanda.exec.kernels.recurrent import bound_activations, run_recurrent
from amanda.ops import define
from amanda.types.node import Node as TypeNode
from amanda.types.rules import by_name
from amanda.types.tensor_type import TensorType

__all__ = ["gru_vjp", "lstm_vjp", "recurrent_type", "rnn_vjp"]

I64 = np.int64
Attrs = Any

# name -> (number of alpha/beta parameters, their defaults, builder of (x, alpha, beta))
_ACTIVATIONS: dict[str, tuple[int, tuple[float, float], Callable[[Value, float, float], Value]]] = {
    "relu": (0, (0.0, 0.0), lambda x, a, b: ops.Relu(x)),
    "tanh": (0, (0.0, 0.0), lambda x, a, b: ops.Tanh(x)),
    "sigmoid": (0, (0.0, 0.0), lambda x, a, b: ops.Sigmoid(x)),
    "affine": (2, (1.0, 0.0), lambda x, a, b: ops.Add(ops.Mul(x, const(a, x)), const(b, x))),
    "leakyrelu": (1, (0.01, 0.0), lambda x, a, b: ops.LeakyRelu(x, alpha=a)),
    "thresholdedrelu": (1, (1.0, 0.0), lambda x, a, b: ops.ThresholdedRelu(x, alpha=a)),
    "scaledtanh": (2, (1.0, 1.0), lambda x, a, b: ops.Mul(ops.Tanh(ops.Mul(x, const(b, x))), const(a, x))),
    "hardsigmoid": (2, (0.2, 0.5), lambda x, a, b: ops.HardSigmoid(x, alpha=a, beta=b)),
    "elu": (1, (1.0, 0.0), lambda x, a, b: ops.Elu(x, alpha=a)),
    "softsign": (0, (0.0, 0.0), lambda x, a, b: ops.Softsign(x)),
    "softplus": (0, (0.0, 0.0), lambda x, a, b: ops.Softplus(x)),
}
_DEFAULTS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}
Act = Callable[[Value], Value]


@define("RNN").kernel(heavy=True)
def rnn_kernel(attrs: Attrs, x: np.ndarray, w: np.ndarray, r: np.ndarray, b: Any = None,
               lens: Any = None, h0: Any = None) -> tuple:
    """ONNX RNN: ``H = f(X W^T + H R^T + Wb + Rb)``."""
    return run_recurrent("RNN", 1, ("Tanh",), attrs, x, w, r, b, lens, h0)


@define("GRU").kernel(heavy=True)
def gru_kernel(attrs: Attrs, x: np.ndarray, w: np.ndarray, r: np.ndarray, b: Any = None,
               lens: Any = None, h0: Any = None) -> tuple:
    """ONNX GRU (gates z, r, h), with ``linear_before_reset``."""
    return run_recurrent("GRU", 3, ("Sigmoid", "Tanh"), attrs, x, w, r, b, lens, h0)


@define("LSTM").kernel(heavy=True)
def lstm_kernel(attrs: Attrs, x: np.ndarray, w: np.ndarray, r: np.ndarray, b: Any = None,
                lens: Any = None, h0: Any = None, c0: Any = None, p: Any = None) -> tuple:
    """ONNX LSTM (gates i, o, f, c), with peepholes and ``input_forget``."""
    return run_recurrent("LSTM", 4, ("Sigmoid", "Tanh", "Tanh"), attrs, x, w, r, b, lens, h0, c0, p)


def _activations(n: Node, kind: str, dirs: int) -> list[list[Act]]:
    """Per direction, the cell's activations as builder ops, read as the kernel reads them."""
    attrs = {key: n.attr(key) for key in ("activations", "activation_alpha", "activation_beta")}
    return bound_activations(attrs, _DEFAULTS[kind], dirs, _ACTIVATIONS, n.fail)


def _cols(v: Value, k: int, h: int) -> Value:
    """Columns ``k*h:(k+1)*h`` of a [batch, G*h] value (gate ``k``)."""
    return ops.Slice(v, np.array([k * h], I64), np.array([(k + 1) * h], I64), np.array([1], I64))


def _pick(v: Value | None, d: int) -> Value | None:
    """Direction ``d`` of a per-direction input (axis 0)."""
    return None if v is None else ops.Gather(v, np.array(d, I64), axis=0)


class _Cell:
    """One direction's weights and activations, and the step as builder ops."""

    def __init__(self, n: Node, kind: str, d: int, fns: list[Act], hidden: int) -> None:
        self.n, self.kind, self.fns, self.h = n, kind, fns, hidden
        gates = int(n.inputs[2].type.shape[1]) // hidden  # R is [directions, gates * hidden, hidden]
        self.r = _pick(n.inputs[2], d)
        b = _pick(n.inputs[3] if len(n.inputs) > 3 else None, d)
        self.rb = None if b is None else ops.Slice(b, np.array([gates * hidden], I64), np.array([2 * gates * hidden], I64),
                                                   np.array([0], I64))
        self.wb = None if b is None else ops.Slice(b, np.array([0], I64), np.array([gates * hidden], I64),
                                                   np.array([0], I64))
        self.p = _pick(n.inputs[7] if kind == "LSTM" and len(n.inputs) > 7 else None, d)
        clip = n.attr("clip")
        self.clip = None if clip is None else float(clip)

    def act(self, i: int, x: Value, gate: bool = True) -> Value:
        if self.clip is not None and gate:
            x = ops.Clip(x, const(-self.clip, x), const(self.clip, x))
        return self.fns[i](x)

    def step(self, xw: Value, h: Value, c: Value | None) -> tuple[Value, Value | None]:
        n, kind = self.h, self.kind
        assert self.r is not None
        if kind == "GRU":
            return self._gru(xw, h), None
        gates = ops.Add(xw, ops.MatMul(h, ops.Transpose(self.r, perm=[1, 0])))
        if self.rb is not None:
            gates = ops.Add(gates, self.rb)
        if kind == "RNN":
            return self.act(0, gates), None
        assert c is not None
        peep = [None] * 3 if self.p is None else [_cols(ops.Unsqueeze(self.p, np.array([0], I64)), k, n) for k in range(3)]

        def plus(v: Value, k: int, state: Value) -> Value:
            return v if peep[k] is None else ops.Add(v, ops.Mul(peep[k], state))

        i = self.act(0, plus(_cols(gates, 0, n), 0, c))
        if int(self.n.attr("input_forget", 0)):
            f = ops.Sub(const(1, i), i)
        else:
            f = self.act(0, plus(_cols(gates, 2, n), 2, c))
        cell = ops.Add(ops.Mul(f, c), ops.Mul(i, self.act(1, _cols(gates, 3, n))))
        o = self.act(0, plus(_cols(gates, 1, n), 1, cell))
        return ops.Mul(o, self.act(2, cell, gate=False)), cell

    def _gru(self, xw: Value, h: Value) -> Value:
        n, r = self.h, self.r
        assert r is not None
        hr = ops.MatMul(h, ops.Transpose(r, perm=[1, 0]))
        rb = [None] * 3 if self.rb is None else [_cols(ops.Unsqueeze(self.rb, np.array([0], I64)), k, n) for k in range(3)]

        def plus(v: Value, k: int) -> Value:
            return v if rb[k] is None else ops.Add(v, rb[k])

        z = self.act(0, ops.Add(_cols(xw, 0, n), plus(_cols(hr, 0, n), 0)))
        reset = self.act(0, ops.Add(_cols(xw, 1, n), plus(_cols(hr, 1, n), 1)))
        if int(self.n.attr("linear_before_reset", 0)):
            inner = ops.Mul(reset, plus(_cols(hr, 2, n), 2))
        else:
            rh = ops.Slice(r, np.array([2 * n], I64), np.array([3 * n], I64), np.array([0], I64))
            inner = plus(ops.MatMul(ops.Mul(reset, h), ops.Transpose(rh, perm=[1, 0])), 2)
        cand = self.act(1, ops.Add(_cols(xw, 2, n), inner))
        return ops.Add(ops.Mul(ops.Sub(const(1, z), z), cand), ops.Mul(z, h))


def _zeros(x: Value, hidden: int) -> Value:
    """Zeros of [batch, hidden], batch read from ``x`` ([steps, batch, input]) at run time."""
    return ops.ConstantOfShape(ops.Concat(ops.Shape(x, start=1, end=2), np.array([hidden], I64), axis=0),
                               value=const([0], x))


def _direction(cell: _Cell, x: Value, steps: int, h: Value, c: Value | None, lens: Value | None,
               reverse: bool, w: Value) -> tuple[list[Value], Value, Value | None]:
    xw = ops.MatMul(x, ops.Transpose(w, perm=[1, 0]))
    if cell.wb is not None:
        xw = ops.Add(xw, cell.wb)
    ys: list[Value] = [h] * steps
    for t in range(steps - 1, -1, -1) if reverse else range(steps):
        new_h, new_c = cell.step(ops.Gather(xw, np.array(t, I64), axis=0), h, c)
        if lens is None:
            h, c = new_h, new_c
            ys[t] = h
            continue
        live = ops.Unsqueeze(ops.Less(np.array(t, I64), lens), np.array([1], I64))
        h = ops.Where(live, new_h, h)
        if c is not None and new_c is not None:
            c = ops.Where(live, new_c, c)
        ys[t] = ops.Where(live, h, const(0, h))
    return ys, h, c


def _stack(values: Sequence[Value], axis: int) -> Value:
    parts = [ops.Unsqueeze(v, np.array([axis], I64)) for v in values]
    return parts[0] if len(parts) == 1 else ops.Concat(*parts, axis=axis)


def _inputs(n: Node, kind: str) -> tuple:
    """X, W, R, sequence_lens, initial_h, initial_c in the sequence-first layout, and the
    number of steps, directions and hidden size (which must be known)."""
    x, w, r = n.given(0, 1, 2)
    extra = list(n.inputs[4:7]) + [None] * 3
    lens, h0, c0 = extra[0], extra[1], extra[2] if kind == "LSTM" else None
    if int(n.attr("layout", 0)):
        x, h0, c0 = (None if v is None else ops.Transpose(v, perm=[1, 0, 2]) for v in (x, h0, c0))
    shape, rshape = x.type.shape, r.type.shape
    if shape is None or type(shape[0]) is not int or rshape is None or not all(type(d) is int for d in rshape):
        raise n.fail("a known number of time steps and known R dims", f"X {x.type!r}, R {r.type!r}")
    steps, dirs, hidden = int(shape[0]), int(rshape[0]), int(rshape[2])
    # an initial state computed at run time may have no static rank: its layout is known
    h0, c0 = (None if v is None else ops.Reshape(v, np.array([dirs, -1, hidden], I64)) for v in (h0, c0))
    lens = None if lens is None else ops.Cast(lens, to=np.dtype("int64"))
    return x, w, lens, h0, c0, (steps, dirs, hidden)


def _unrolled(kind: str) -> Callable[[Node], list]:
    def forward(n: Node) -> list:
        x, w, lens, h0, c0, (steps, dirs, hidden) = _inputs(n, kind)
        direction = n.attr("direction", "forward")
        direction = direction.decode() if isinstance(direction, bytes) else str(direction)
        fns = _activations(n, kind, dirs)
        ys, hs, cs = [], [], []
        for d in range(dirs):
            cell = _Cell(n, kind, d, fns[d], hidden)
            h = _zeros(x, hidden) if h0 is None else _pick(h0, d)
            c = (_zeros(x, hidden) if c0 is None else _pick(c0, d)) if kind == "LSTM" else None
            wd = _pick(w, d)
            assert h is not None and wd is not None
            y, h, c = _direction(cell, x, steps, h, c, lens, direction == "reverse" or d == 1, wd)
            ys.append(_stack(y, 0))
            hs.append(h)
            cs.append(c)
        outs = [_stack(ys, 1), _stack(hs, 0)] + ([_stack([c for c in cs if c is not None], 0)] if kind == "LSTM" else [])
        if int(n.attr("layout", 0)):
            outs = [ops.Transpose(outs[0], perm=[2, 0, 1, 3])] + [ops.Transpose(v, perm=[1, 0, 2]) for v in outs[1:]]
        return outs

    forward.__name__ = kind.lower()
    forward.__doc__ = f"{kind}: the recurrence unrolled over its time steps (module doc)."
    return forward


rnn_vjp = composite(_unrolled("RNN"))
gru_vjp = composite(_unrolled("GRU"))
lstm_vjp = composite(_unrolled("LSTM"))


def recurrent_type(node: TypeNode) -> list:
    """``Y [seq, dirs, batch, hidden]`` and ``Y_h``/``Y_c [dirs, batch, hidden]`` (batch first
    with ``layout=1``); hidden from ``hidden_size`` or R's last dim."""
    x, w, r = node.shape(0), node.shape(1), node.shape(2)
    hidden = node.attr("hidden_size")
    hidden = int(hidden) if hidden is not None else (r[-1] if r is not None else None)
    dirs = w[0] if w is not None else (2 if node.attr("direction", "forward") in ("bidirectional", b"bidirectional") else 1)
    seq, batch = (x[0], x[1]) if x is not None else (None, None)
    layout = int(node.attr("layout", 0))
    if layout and x is not None:
        seq, batch = x[1], x[0]
    dtype = node.dtype(0)
    y = (batch, seq, dirs, hidden) if layout else (seq, dirs, batch, hidden)
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    return by_name(node, Y=TensorType(dtype, y), Y_h=TensorType(dtype, state), Y_c=TensorType(dtype, state))


define("RNN", type_rule=recurrent_type, vjp=rnn_vjp)
define("GRU", type_rule=recurrent_type, vjp=gru_vjp)
define("LSTM", type_rule=recurrent_type, vjp=lstm_vjp)
