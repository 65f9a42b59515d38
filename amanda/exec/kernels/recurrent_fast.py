"""The recurrent cells' fast path: RNN, GRU and LSTM with their default activations, unclipped,
every sequence full length (an LSTM also without peepholes or ``input_forget``).

A small recurrent layer's time goes to numpy's per-call cost, not arithmetic, so each step is
the fewest calls on contiguous arrays, all into buffers made once per run:

- the state is kept transposed, ``[directions * hidden, batch]``, and both directions of a
  bidirectional layer step together;
- below each step's state sit that step's inputs (each direction's, a reverse direction's in
  reversed time) and a row of ones, so one GEMM (``np.dot`` into a buffer) of a block matrix
  ``[R | W | biases]`` gives every gate of both directions, input projection and biases
  included, gate-major, so each gate is one contiguous block; the step writes its state into
  the next step's rows, and the states of all steps are ``Y``;
- sigmoid is ``0.5 + 0.5 tanh(x / 2)``: the sigmoid gates' rows of W, R and the biases are
  halved once (exact in binary floating point), so one ``tanh`` serves every gate;
- a GRU (``linear_before_reset``) gets its candidate's input and recurrent parts as two blocks
  of the same GEMM.

The block matrix is kept per read-only W, R and B (made again when any of them is writeable).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["MAX_BLOCK_ELEMENTS", "fast_recurrent", "fits_fast_path"]

#: the largest block matrix (gates * dirs * hidden by dirs * (hidden + input) + 1, with the
#: zeros between directions) the fast path takes: a step reads all of it, where the per-direction
#: path reads only R and projects every step's input in one GEMM; past L2's size that costs more
#: than the calls it saves
MAX_BLOCK_ELEMENTS = 1 << 16
# (kind, linear_before_reset, id(W), id(R), id(B)) -> (weak references to them, the matrices)
_KEPT: dict[tuple, tuple[tuple, tuple]] = {}
_HALVES: dict[np.dtype, np.ndarray] = {}


def fits_fast_path(kind: str, plain: bool, x: np.ndarray, arrays: tuple, lens: Any, p: Any) -> bool:
    """Whether a layer takes the fast path: ``plain`` attributes (default activations, no clip,
    an LSTM without ``input_forget``), full-length sequences (``lens`` None or none shorter than
    X), one float dtype for every array, at least one step, a block matrix of at most
    :data:`MAX_BLOCK_ELEMENTS` (an LSTM without peepholes; a GRU of either
    ``linear_before_reset``). ``arrays`` is (W, R, B, initial_h, initial_c)."""
    if not plain or not x.shape[0] or (kind == "LSTM" and p is not None):
        return False
    dtype = x.dtype
    if dtype != np.float32 and dtype != np.float64:
        return False
    (dirs, rows, size), hidden = arrays[0].shape, arrays[1].shape[-1]
    if (rows // max(hidden, 1) + 1) * dirs * hidden * (dirs * (hidden + size) + 1) > MAX_BLOCK_ELEMENTS:
        return False
    for a in arrays:
        if a is not None and a.dtype != dtype:
            return False
    return lens is None or bool((np.asarray(lens) >= x.shape[0]).all())


def _halved(a: np.ndarray, gates: int, hidden: int) -> np.ndarray:
    """``a`` ([gates * hidden, ...] or [gates * hidden]) with its sigmoid gates' rows halved:
    every gate but the last in ONNX's order (an LSTM's i, o, f; a GRU's z, r; none of an RNN's)."""
    out = np.array(a, copy=True)
    out[:(gates - 1) * hidden] *= 0.5
    return out


def _blocks(kind: str, gates: int, lbr: bool) -> list[tuple[int, bool, bool, str]]:
    """Per row block of the GEMM: (ONNX gate, takes R, takes W, bias: "both", "W", "R")."""
    if kind != "GRU":
        return [(g, True, True, "both") for g in range(gates)]
    if lbr:  # the candidate's input part, then its recurrent part (the reset gate scales only that)
        return [(0, True, True, "both"), (1, True, True, "both"), (2, False, True, "W"), (2, True, False, "R")]
    return [(0, True, True, "both"), (1, True, True, "both"), (2, False, True, "both")]


def _matrices(kind: str, lbr: bool, w: np.ndarray, r: np.ndarray, b: np.ndarray | None) -> tuple:
    """The GEMM's block matrix ``[blocks * dirs * hidden, dirs * hidden + dirs * input + 1]``
    and, for a GRU without ``linear_before_reset``, the candidate's block-diagonal R."""
    dirs, rows, size = w.shape
    hidden = r.shape[-1]
    gates = rows // hidden
    blocks = _blocks(kind, gates, lbr)
    state = dirs * hidden
    out = np.zeros((len(blocks), dirs, hidden, state + dirs * size + 1), w.dtype)
    rec_h = np.zeros((dirs, hidden, state), w.dtype)
    for d in range(dirs):
        wd = _halved(w[d], gates, hidden).reshape(gates, hidden, size)
        rd = _halved(r[d], gates, hidden).reshape(gates, hidden, hidden)
        bd = np.zeros((2, gates, hidden), w.dtype) if b is None else np.stack(
            [_halved(b[d, :rows], gates, hidden), _halved(b[d, rows:], gates, hidden)]).reshape(2, gates, hidden)
        for k, (g, takes_r, takes_w, bias) in enumerate(blocks):
            if takes_r:
                out[k, d, :, d * hidden:(d + 1) * hidden] = rd[g]
            if takes_w:
                out[k, d, :, state + d * size:state + (d + 1) * size] = wd[g]
            out[k, d, :, -1] = bd[0, g] + bd[1, g] if bias == "both" else bd[0 if bias == "W" else 1, g]
        if kind == "GRU":
            rec_h[d, :, d * hidden:(d + 1) * hidden] = r[d, 2 * hidden:]
    return out.reshape(-1, out.shape[-1]), rec_h.reshape(state, state)


def _kept(kind: str, lbr: bool, w: np.ndarray, r: np.ndarray, b: np.ndarray | None) -> tuple:
    """:func:`_matrices`, kept while W, R and B live when all three are read-only."""
    arrays = (w, r, b)
    if w.flags.writeable or r.flags.writeable or (b is not None and b.flags.writeable):
        return _matrices(kind, lbr, w, r, b)
    key = (kind, lbr, id(w), id(r), id(b))
    hit = _KEPT.get(key)
    if hit is not None:
        refs = hit[0]
        if refs[0]() is w and refs[1]() is r and (b is None or refs[2]() is b):
            return hit[1]
    made = _matrices(kind, lbr, w, r, b)
    _KEPT[key] = (tuple(None if a is None else weakref.ref(a) for a in arrays), made)
    for a in arrays:
        if a is not None:
            weakref.finalize(a, _KEPT.pop, key, None)
    return made


def _stacked(x: np.ndarray, h0: np.ndarray | None, dirs: int, hidden: int, backwards: Sequence[bool]) -> np.ndarray:
    """``[steps + 1, dirs * hidden + dirs * input + 1, batch]``: row block 0 of step 0 the
    initial state (transposed), below each step's state its inputs per direction and a one."""
    steps, batch, size = x.shape
    state = dirs * hidden
    z = np.empty((steps + 1, state + dirs * size + 1, batch), x.dtype)
    if h0 is None:
        z[0, :state] = 0
    else:  # one copy, straight from the transposed view
        z[0, :state].reshape(dirs, hidden, batch)[...] = h0.transpose(0, 2, 1)
    for d, back in enumerate(backwards):
        z[:steps, state + d * size:state + (d + 1) * size] = (x[::-1] if back else x).transpose(0, 2, 1)
    z[:, -1] = 1
    return z


def _half(dtype: np.dtype) -> np.ndarray:
    """A read-only 0-d 0.5 of ``dtype``, made once (a 0-d array operand costs a ufunc less than a
    Python float, which numpy converts on every call)."""
    found = _HALVES.get(dtype)
    if found is None:
        found = _HALVES[dtype] = np.array(0.5, dtype)
        found.flags.writeable = False
    return found


def _lstm_steps(m: np.ndarray, z: np.ndarray, c: np.ndarray, rows: int) -> None:
    """The LSTM loop (gates i, o, f, c): step t reads ``z[t]``, writes its state into
    ``z[t + 1]``'s first ``rows``; ``c`` ends as the cell."""
    g = np.empty((4, rows, z.shape[-1]), z.dtype)
    flat = g.reshape(-1, g.shape[-1])
    sig, i, o, f, cand = g[:3], g[0], g[1], g[2], g[3]
    tmp = np.empty_like(c)
    half = _half(z.dtype)
    states = z[:, :rows]
    dot, add, mul, tanh = np.dot, np.add, np.multiply, np.tanh
    for t in range(z.shape[0] - 1):
        dot(m, z[t], flat)
        tanh(g, g)
        mul(sig, half, sig)
        add(sig, half, sig)
        mul(f, c, c)
        mul(i, cand, tmp)
        add(c, tmp, c)
        tanh(c, tmp)
        mul(o, tmp, states[t + 1])


def _gru_steps(m: np.ndarray, rec_h: np.ndarray, z: np.ndarray, rows: int, lbr: bool) -> None:
    """The GRU loop (gates z, r, then the candidate's input part and, with ``lbr``, its
    recurrent part): as :func:`_lstm_steps`."""
    g = np.empty((4 if lbr else 3, rows, z.shape[-1]), z.dtype)
    flat = g.reshape(-1, g.shape[-1])
    zr, update, reset, cand = g[:2], g[0], g[1], g[2]
    part = g[3] if lbr else np.empty_like(cand)
    tmp = np.empty_like(cand)
    half = _half(z.dtype)
    states = z[:, :rows]
    dot, add, mul, sub, tanh = np.dot, np.add, np.multiply, np.subtract, np.tanh
    for t in range(z.shape[0] - 1):
        dot(m, z[t], flat)
        tanh(zr, zr)
        mul(zr, half, zr)
        add(zr, half, zr)
        state = states[t]
        if lbr:
            mul(reset, part, part)
        else:
            mul(reset, state, tmp)
            dot(rec_h, tmp, part)
        add(cand, part, cand)
        tanh(cand, cand)
        sub(state, cand, tmp)
        mul(update, tmp, tmp)
        add(cand, tmp, states[t + 1])


def _rnn_steps(m: np.ndarray, z: np.ndarray, rows: int) -> None:
    """The RNN loop with tanh: ``h = tanh([R | W | b] z[t])`` into ``z[t + 1]``."""
    g = np.empty((rows, z.shape[-1]), z.dtype)
    states = z[:, :rows]
    dot, tanh = np.dot, np.tanh
    for t in range(z.shape[0] - 1):
        dot(m, z[t], g)
        tanh(g, states[t + 1])


def _outputs(z: np.ndarray, steps: int, dirs: int, hidden: int, backwards: Sequence[bool]) -> tuple:
    """``Y`` ([steps, dirs, batch, hidden], each direction in time order) and ``Y_h`` from the
    stacked states ``z`` (step t's state in ``z[t + 1]``)."""
    batch = z.shape[-1]
    per = z[1:, :dirs * hidden].reshape(steps, dirs, hidden, batch)
    if not any(backwards):
        y_all = np.ascontiguousarray(per.transpose(0, 1, 3, 2))
    else:
        y_all = np.empty((steps, dirs, batch, hidden), z.dtype)
        for d, back in enumerate(backwards):
            y_all[:, d] = (per[::-1, d] if back else per[:, d]).transpose(0, 2, 1)
    return y_all, np.ascontiguousarray(per[steps - 1].transpose(0, 2, 1))


def fast_recurrent(kind: str, attrs: Any, x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray | None,
                   h0: np.ndarray | None, c0: np.ndarray | None, backwards: Sequence[bool]) -> tuple:
    """``(Y, Y_h, Y_c)`` of a layer that :func:`fits_fast_path` (``Y_c`` None but for an LSTM);
    ``x`` is ``[steps, batch, input]`` (layout 0), ``backwards`` says per direction whether it
    runs backwards in time."""
    steps, batch, _ = x.shape
    dirs, hidden = w.shape[0], r.shape[-1]
    rows = dirs * hidden
    lbr = kind == "GRU" and bool(int(attrs.get("linear_before_reset", 0)))
    m, rec_h = _kept(kind, lbr, w, r, b)
    z = _stacked(x, h0, dirs, hidden, backwards)
    cell = None
    if kind == "LSTM":
        cell = np.zeros((rows, batch), x.dtype) if c0 is None else c0.transpose(0, 2, 1).copy().reshape(rows, batch)
        _lstm_steps(m, z, cell, rows)
    elif kind == "GRU":
        _gru_steps(m, rec_h, z, rows, lbr)
    else:
        _rnn_steps(m, z, rows)
    y_all, y_h = _outputs(z, steps, dirs, hidden, backwards)
    y_c = None if cell is None else np.ascontiguousarray(cell.reshape(dirs, hidden, batch).transpose(0, 2, 1))
    return y_all, y_h, y_c
