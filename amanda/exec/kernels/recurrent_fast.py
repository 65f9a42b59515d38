"""The recurrent cells' fast path: RNN, GRU and LSTM with their default activations, unclipped,
every sequence full length (an LSTM also without peepholes or ``input_forget``).

A small recurrent layer's time goes to numpy's per-call cost, not arithmetic, so each step is
the fewest calls on contiguous arrays, all into buffers made once per run:

- the state is kept transposed, ``[directions * hidden, batch]``, and both directions of a
  bidirectional layer step together: one block-diagonal GEMM (``np.dot`` into a buffer) gives
  every gate of both directions, gate-major, so each gate is one contiguous block;
- the input projection of every step and direction is one GEMM before the loop, laid out the
  same way (a reverse direction's steps already reversed in time), biases added once;
- sigmoid is ``0.5 + 0.5 tanh(x / 2)``: the sigmoid gates' rows of W, R and the biases are
  halved once (exact in binary floating point), so one ``tanh`` serves every gate;
- a GRU's state carries a row of ones and R a bias column, so the recurrent bias is in the GEMM.

The weights in these layouts are kept per read-only weight array (:func:`relaid`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from amanda.exec.kernels.relaid import relaid

__all__ = ["fast_recurrent", "fits_fast_path"]

_SIGMOID_GATES = {"RNN": 0, "GRU": 2, "LSTM": 3}  # the leading gates (ONNX order) that are sigmoids
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def fits_fast_path(kind: str, attrs: Any, x: np.ndarray, arrays: tuple, lens: Any, p: Any) -> bool:
    """Whether a layer takes the fast path: default activations, no clip, full-length sequences
    (``lens`` None or none shorter than X), one float dtype for every array, at least one step
    (an LSTM without peepholes or ``input_forget``; a GRU of either ``linear_before_reset``)."""
    if attrs.get("activations") is not None or attrs.get("clip") is not None or not x.shape[0]:
        return False
    if kind == "LSTM" and (p is not None or int(attrs.get("input_forget", 0))):
        return False
    dtype = x.dtype
    if dtype != np.float32 and dtype != np.float64:
        return False
    for a in arrays:
        if a is not None and a.dtype != dtype:
            return False
    return lens is None or bool((np.asarray(lens) >= x.shape[0]).all())


def _scaled(kind: str, a: np.ndarray, hidden: int) -> np.ndarray:
    """``a`` ([dirs, gates * hidden, ...]) with its sigmoid gates' rows halved."""
    out = np.array(a, copy=True)
    out[:, :_SIGMOID_GATES[kind] * hidden] *= 0.5
    return out


def _input_weights(kind: str, w: np.ndarray, hidden: int) -> np.ndarray:
    """W as ``[input, gates * dirs * hidden]``: columns gate-major, then direction, then unit."""
    dirs, rows, size = w.shape
    gates = rows // hidden
    scaled = _scaled(kind, w, hidden).reshape(dirs, gates, hidden, size)
    return np.ascontiguousarray(scaled.transpose(3, 1, 0, 2).reshape(size, gates * dirs * hidden))


def _recurrent_weights(kind: str, r: np.ndarray, hidden: int) -> np.ndarray:
    """R as one block-diagonal matrix ``[gates * dirs * hidden, dirs * hidden]`` (rows as in
    :func:`_input_weights`, a direction's columns its own state's)."""
    dirs, rows, _ = r.shape
    gates = rows // hidden
    scaled = _scaled(kind, r, hidden).reshape(dirs, gates, hidden, hidden)
    block = np.zeros((gates, dirs, hidden, dirs, hidden), r.dtype)
    for d in range(dirs):
        block[:, d, :, d, :] = scaled[d]
    return block.reshape(gates * dirs * hidden, dirs * hidden)


def _biases(kind: str, b: np.ndarray, hidden: int, lbr: bool) -> np.ndarray:
    """The bias added to the input projection (``[gates * dirs * hidden]``) and, for a GRU, then
    the recurrent bias column of R (``[gates * dirs * hidden]``); sigmoid gates' halved."""
    gates, dirs = _GATES[kind], b.shape[0]
    wb = _scaled(kind, b[:, :gates * hidden], hidden).reshape(dirs, gates, hidden)
    rb = _scaled(kind, b[:, gates * hidden:], hidden).reshape(dirs, gates, hidden)
    if kind != "GRU":
        return (wb + rb).transpose(1, 0, 2).reshape(-1)
    if not lbr:  # the candidate's recurrent bias sits outside the reset product: add it once
        wb = wb.copy()
        wb[:, 2] += rb[:, 2]
        rb = rb.copy()
        rb[:, 2] = 0
    return np.concatenate((wb.transpose(1, 0, 2).reshape(-1), rb.transpose(1, 0, 2).reshape(-1)))


def _projection(kind: str, x: np.ndarray, w: np.ndarray, bias: np.ndarray, hidden: int,
                reversed_dirs: list[bool]) -> np.ndarray:
    """Every step's input projection, ``[steps, gates, dirs * hidden, batch]``, each direction's
    steps in the order it runs them."""
    steps, batch, size = x.shape
    dirs = len(reversed_dirs)
    gates = _GATES[kind]
    cols = relaid(w, ("recurrent_fast.W", kind), lambda w: _input_weights(kind, w, hidden))
    proj = x.reshape(steps * batch, size) @ cols
    proj += bias
    parts = proj.reshape(steps, batch, gates, dirs, hidden)
    out = np.empty((steps, gates, dirs, hidden, batch), x.dtype)
    for d, rev in enumerate(reversed_dirs):
        src = parts[::-1, :, :, d] if rev else parts[:, :, :, d]
        out[:, :, d] = src.transpose(0, 2, 3, 1)
    return out.reshape(steps, gates, dirs * hidden, batch)


def _state(given: np.ndarray | None, dirs: int, batch: int, hidden: int, dtype: Any, ones: bool = False) -> np.ndarray:
    """An initial state ``[dirs, batch, hidden]`` transposed to ``[dirs * hidden (+1), batch]``."""
    rows = dirs * hidden
    out = np.zeros((rows + ones, batch), dtype)
    if given is not None:
        out[:rows] = given.transpose(0, 2, 1).reshape(rows, batch)
    if ones:
        out[rows] = 1
    return out


def _lstm_steps(xw: np.ndarray, rec: np.ndarray, h: np.ndarray, c: np.ndarray, y: np.ndarray) -> None:
    """The LSTM loop (gates i, o, f, c): ``y[t]`` is step t's state; ``c`` ends as the cell."""
    g = np.empty(xw.shape[1:], xw.dtype)
    flat = g.reshape(-1, g.shape[-1])
    sig, i, o, f, cand = g[:3], g[0], g[1], g[2], g[3]
    tmp = np.empty_like(c)
    half = np.array(0.5, xw.dtype)
    dot, add, mul, tanh = np.dot, np.add, np.multiply, np.tanh
    for t in range(xw.shape[0]):
        dot(rec, h, flat)
        add(g, xw[t], g)
        tanh(g, g)
        mul(sig, half, sig)
        add(sig, half, sig)
        mul(f, c, c)
        mul(i, cand, tmp)
        add(c, tmp, c)
        tanh(c, tmp)
        h = y[t]
        mul(o, tmp, h)


def _gru_steps(xw: np.ndarray, rec: np.ndarray, y: np.ndarray, lbr: bool) -> None:
    """The GRU loop (gates z, r, h): ``y[t]`` is the state after step t with a row of ones
    below it, ``y[-1]`` (one past the steps) the initial one."""
    rows = xw.shape[2]
    g = np.empty(xw.shape[1:], xw.dtype)
    flat = g.reshape(-1, g.shape[-1])
    zr, z, reset, cand = g[:2], g[0], g[1], g[2]
    tmp = np.empty_like(cand)
    half = np.array(0.5, xw.dtype)
    xzr, xh = xw[:, :2], xw[:, 2]
    gates_zr, rec_h = (rec, rec) if lbr else (rec[:2 * rows], np.ascontiguousarray(rec[2 * rows:, :rows]))
    flat_zr = flat if lbr else flat[:2 * rows]
    dot, add, mul, sub, tanh = np.dot, np.add, np.multiply, np.subtract, np.tanh
    before = y[-1]
    state = before[:rows]
    for t in range(xw.shape[0]):
        dot(gates_zr, before, flat_zr)
        add(zr, xzr[t], zr)
        tanh(zr, zr)
        mul(zr, half, zr)
        add(zr, half, zr)
        if lbr:
            mul(reset, cand, cand)
        else:
            mul(reset, state, tmp)
            dot(rec_h, tmp, cand)
        add(cand, xh[t], cand)
        tanh(cand, cand)
        sub(state, cand, tmp)
        mul(z, tmp, tmp)
        before = y[t]
        state = before[:rows]
        add(cand, tmp, state)


def _outputs(y: np.ndarray, steps: int, dirs: int, hidden: int, reversed_dirs: list[bool]) -> tuple:
    """``Y`` ([steps, dirs, batch, hidden], each direction in time order) and ``Y_h`` from the
    transposed states ``y`` ([steps, >= dirs * hidden, batch])."""
    batch = y.shape[-1]
    per = y[:steps, :dirs * hidden].reshape(steps, dirs, hidden, batch)
    y_all = np.empty((steps, dirs, batch, hidden), y.dtype)
    for d, rev in enumerate(reversed_dirs):
        y_all[:, d] = (per[::-1, d] if rev else per[:, d]).transpose(0, 2, 1)
    return y_all, np.ascontiguousarray(per[steps - 1].transpose(0, 2, 1))


def fast_recurrent(kind: str, attrs: Any, x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray | None,
                   h0: np.ndarray | None, c0: np.ndarray | None, reversed_dirs: list[bool]) -> tuple:
    """``(Y, Y_h, Y_c)`` of a layer that :func:`fits_fast_path` (``Y_c`` None but for an LSTM);
    ``x`` is ``[steps, batch, input]`` (layout 0), ``reversed_dirs`` says per direction whether it
    runs backwards in time."""
    steps, batch, _ = x.shape
    dirs, hidden = w.shape[0], r.shape[-1]
    lbr = bool(int(attrs.get("linear_before_reset", 0)))
    if b is None:
        b = np.zeros((dirs, 2 * _GATES[kind] * hidden), x.dtype)
    biases = relaid(b, ("recurrent_fast.B", kind, lbr), lambda b: _biases(kind, b, hidden, lbr))
    bias = biases[:_GATES[kind] * dirs * hidden]
    xw = _projection(kind, x, w, bias, hidden, reversed_dirs)
    rec = relaid(r, ("recurrent_fast.R", kind), lambda r: _recurrent_weights(kind, r, hidden))
    rows = dirs * hidden
    cell = None
    if kind == "GRU":
        rec = np.concatenate((rec, biases[len(bias):, None]), axis=1)
        y = np.empty((steps + 1, rows + 1, batch), x.dtype)
        y[-1] = _state(h0, dirs, batch, hidden, x.dtype, ones=True)
        y[:-1, rows] = 1
        _gru_steps(xw, rec, y, lbr)
    else:
        y = np.empty((steps, rows, batch), x.dtype)
        h = _state(h0, dirs, batch, hidden, x.dtype)
        if kind == "LSTM":
            cell = _state(c0, dirs, batch, hidden, x.dtype)
            _lstm_steps(xw, rec, h, cell, y)
        else:
            _rnn_steps(xw[:, 0], rec, h, y)
    y_all, y_h = _outputs(y, steps, dirs, hidden, reversed_dirs)
    y_c = None if cell is None else np.ascontiguousarray(cell.reshape(dirs, hidden, batch).transpose(0, 2, 1))
    return y_all, y_h, y_c


def _rnn_steps(xw: np.ndarray, rec: np.ndarray, h: np.ndarray, y: np.ndarray) -> None:
    """The RNN loop with tanh: ``y[t] = tanh(xw[t] + R h)``."""
    dot, add, tanh = np.dot, np.add, np.tanh
    for t in range(xw.shape[0]):
        g = y[t]
        dot(rec, h, g)
        add(g, xw[t], g)
        tanh(g, g)
        h = g
