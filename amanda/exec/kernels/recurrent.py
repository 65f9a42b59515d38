"""The numerics of the recurrent layers RNN, GRU and LSTM (:func:`run_recurrent`; the ops are
registered in :mod:`amanda.opset.onnx.recurrent`).

One driver serves all three. The input projection ``X @ W^T`` of every time step is one
GEMM before the loop; each step then adds ``H @ R^T`` and applies the cell. Directions
(forward, reverse, bidirectional), per-batch ``sequence_lens`` (steps past a sequence's
end leave its state unchanged and write zeros to ``Y``), initial states, both layouts,
the activation attributes with their alpha and beta, ``clip``, LSTM peepholes and
``input_forget``, and GRU's ``linear_before_reset`` follow the ONNX operator definitions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from amanda.errors import ExecutionError
from amanda.exec.kernels.math_util import attr_str
from amanda.exec.kernels.recurrent_fast import fast_recurrent, fits_fast_path

Attrs = Mapping[str, Any]
Activation = Callable[[np.ndarray], np.ndarray]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


# name -> (number of alpha/beta parameters it takes, defaults, function of (x, alpha, beta))
_ACTIVATIONS: dict[str, tuple[int, tuple[float, float], Callable[..., np.ndarray]]] = {
    "relu": (0, (0.0, 0.0), lambda x, a, b: np.maximum(x, 0)),
    "tanh": (0, (0.0, 0.0), lambda x, a, b: np.tanh(x)),
    "sigmoid": (0, (0.0, 0.0), lambda x, a, b: _sigmoid(x)),
    "affine": (2, (1.0, 0.0), lambda x, a, b: a * x + b),
    "leakyrelu": (1, (0.01, 0.0), lambda x, a, b: np.where(x >= 0, x, a * x)),
    "thresholdedrelu": (1, (1.0, 0.0), lambda x, a, b: np.where(x > a, x, 0)),
    "scaledtanh": (2, (1.0, 1.0), lambda x, a, b: a * np.tanh(b * x)),
    "hardsigmoid": (2, (0.2, 0.5), lambda x, a, b: np.clip(a * x + b, 0, 1)),
    "elu": (1, (1.0, 0.0), lambda x, a, b: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0)))),
    "softsign": (0, (0.0, 0.0), lambda x, a, b: x / (1 + np.abs(x))),
    "softplus": (0, (0.0, 0.0), lambda x, a, b: np.logaddexp(0, x)),
}


def _bind(fn: Callable[..., Any], alpha: float, beta: float) -> Callable[[Any], Any]:
    def activation(x: Any) -> Any:
        return fn(x, alpha, beta)

    return activation


def bound_activations(attrs: Mapping[str, Any], defaults: Sequence[str], directions: int, table: Mapping[str, Any],
                      fail: Callable[[str, str], Exception]) -> list[list[Callable[[Any], Any]]]:
    """Per direction, a recurrent cell's activation functions read from its ``activations``,
    ``activation_alpha`` and ``activation_beta`` attributes, with alpha and beta bound. ``table``
    maps a lower-case name to (how many of alpha, beta it takes, their defaults, fn(x, alpha,
    beta)): numpy functions for the kernel, builder ops for the gradient rule; ``fail(expected,
    found)`` makes the caller's error."""
    names = attrs.get("activations")
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in names] if names else list(defaults) * directions
    if len(names) > len(defaults) * directions:  # ONNX's schema default lists two for RNN, forward or not
        names = names[:len(defaults) * directions]
    if len(names) != len(defaults) * directions:
        raise fail(f"{len(defaults) * directions} activation names", repr(names))
    alphas = list(attrs.get("activation_alpha") or ())
    betas = list(attrs.get("activation_beta") or ())
    bound = []
    for name in names:
        if name.lower() not in table:
            raise fail(f"an activation among {sorted(table)}", repr(name))
        count, (alpha, beta), fn = table[name.lower()]
        if count >= 1 and alphas:
            alpha = float(alphas.pop(0))
        if count >= 2 and betas:
            beta = float(betas.pop(0))
        bound.append(_bind(fn, alpha, beta))
    per = len(defaults)
    return [bound[d * per:(d + 1) * per] for d in range(directions)]


def _kernel_error(expected: str, found: str) -> Exception:
    return ExecutionError(f"expected {expected}, found {found}", expected=expected, found=found)


def _activations(attrs: Attrs, defaults: Sequence[str], directions: int) -> list[list[Activation]]:
    """Per direction, the cell's numpy activation functions with their alpha and beta bound."""
    return bound_activations(attrs, defaults, directions, _ACTIVATIONS, _kernel_error)


class _Cell:
    """One direction's weights and the step function shared by the three cell kinds."""

    def __init__(self, kind: str, w: np.ndarray, r: np.ndarray, b: np.ndarray | None,
                 p: np.ndarray | None, fns: list[Activation], attrs: Attrs) -> None:
        self.kind = kind
        self.r_t = r.T
        hidden = r.shape[-1]
        gates = r.shape[0] // hidden
        self.wb = b[: gates * hidden] if b is not None else None
        self.rb = b[gates * hidden:] if b is not None else None
        self.p = p
        self.fns = fns
        clip = attrs.get("clip")
        self.clip = None if clip is None else float(clip)
        self.input_forget = bool(int(attrs.get("input_forget", 0)))
        self.linear_before_reset = bool(int(attrs.get("linear_before_reset", 0)))
        self.hidden = hidden
        self.w = w
        # the default activations unclipped (and for an LSTM no peepholes or input_forget): the
        # sigmoid gates (LSTM i, o, f; GRU z, r) in one call
        self.plain = attrs.get("activations") is None and self.clip is None and (
            kind == "GRU" or (kind == "LSTM" and p is None and not self.input_forget))
        if kind == "GRU":
            self.r_zr = np.ascontiguousarray(self.r_t[:, :2 * hidden])
            self.r_h = np.ascontiguousarray(self.r_t[:, 2 * hidden:])

    def _act(self, i: int, x: np.ndarray, gate: bool = True) -> np.ndarray:
        if self.clip is not None and gate:
            x = np.clip(x, -self.clip, self.clip)
        return self.fns[i](x)

    def step(self, xw: np.ndarray, h: np.ndarray, c: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        """The next hidden (and cell) state from this step's input projection ``xw``."""
        n = self.hidden
        if self.kind == "GRU" and self.plain:  # xw holds the recurrent bias of z and r
            zr = _sigmoid(xw[:, :2 * n] + h @ self.r_zr)
            z, reset = zr[:, :n], zr[:, n:]
            rb_h = self.rb[2 * n:] if self.rb is not None else 0
            if self.linear_before_reset:
                cand = np.tanh(xw[:, 2 * n:] + reset * (h @ self.r_h + rb_h))
            else:
                cand = np.tanh(xw[:, 2 * n:] + (reset * h) @ self.r_h + rb_h)
            return cand + z * (h - cand), None
        if self.kind == "GRU":
            r_z, r_r, r_h = self.r_t[:, :n], self.r_t[:, n:2 * n], self.r_t[:, 2 * n:]
            rb = self.rb if self.rb is not None else np.zeros(3 * n, xw.dtype)
            z = self._act(0, xw[:, :n] + h @ r_z + rb[:n])
            reset = self._act(0, xw[:, n:2 * n] + h @ r_r + rb[n:2 * n])
            if self.linear_before_reset:
                cand = self._act(1, xw[:, 2 * n:] + reset * (h @ r_h + rb[2 * n:]))
            else:
                cand = self._act(1, xw[:, 2 * n:] + (reset * h) @ r_h + rb[2 * n:])
            return (1 - z) * cand + z * h, None
        gates = xw + h @ self.r_t  # xw holds both biases (see _run_direction)
        if self.plain:
            s = _sigmoid(gates[:, :3 * n])  # i, o, f
            cell = s[:, 2 * n:] * c + s[:, :n] * np.tanh(gates[:, 3 * n:])
            return s[:, n:2 * n] * np.tanh(cell), cell
        if self.kind == "RNN":
            return self._act(0, gates), None
        assert c is not None
        pi, po, pf = (self.p[:n], self.p[n:2 * n], self.p[2 * n:]) if self.p is not None else (0, 0, 0)
        i = self._act(0, gates[:, :n] + pi * c)
        f = 1 - i if self.input_forget else self._act(0, gates[:, 2 * n:3 * n] + pf * c)
        cell = f * c + i * self._act(1, gates[:, 3 * n:])
        o = self._act(0, gates[:, n:2 * n] + po * cell)
        return o * self._act(2, cell, gate=False), cell


def _run_direction(cell: _Cell, x: np.ndarray, lens: np.ndarray, h: np.ndarray,
                   c: np.ndarray | None, reverse: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    steps, batch, _ = x.shape
    xw = (x.reshape(steps * batch, -1) @ cell.w.T).reshape(steps, batch, -1)
    if cell.wb is not None:
        xw += cell.wb
    if cell.rb is not None and cell.kind != "GRU":  # RNN and LSTM add it to every step's gates
        xw += cell.rb
    elif cell.rb is not None and cell.plain:  # a GRU's z and r gates too (not the candidate's)
        xw[:, :, :2 * cell.hidden] += cell.rb[:2 * cell.hidden]
    y = np.zeros((steps, batch, cell.hidden), dtype=x.dtype)
    full = bool(np.all(lens >= steps))
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        new_h, new_c = cell.step(xw[t], h, c)
        if full:
            h, c = new_h, new_c
            y[t] = h
            continue
        live = (t < lens)[:, None]
        h = np.where(live, new_h, h)
        if c is not None and new_c is not None:
            c = np.where(live, new_c, c)
        y[t] = np.where(live, h, 0)
    return y, h, c


def _direction(kind: str, attrs: Attrs, dirs: int) -> str:
    """The ``direction`` attribute, checked against the number of directions W holds."""
    direction = attr_str(attrs, "direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional") or dirs != (2 if direction == "bidirectional" else 1):
        raise ExecutionError(
            f"{kind}: direction {direction!r} does not fit W with {dirs} direction(s)",
            expected="forward or reverse with 1 direction, bidirectional with 2", found=f"{direction}, {dirs}",
        )
    return direction


def _batch_first(a: np.ndarray | None) -> np.ndarray | None:
    """An optional state with its first two axes swapped (``layout=1``)."""
    return None if a is None else np.swapaxes(a, 0, 1)


def _part(a: np.ndarray | None, d: int) -> np.ndarray | None:
    """Direction ``d``'s slice of an optional per-direction input."""
    return None if a is None else a[d]


def _by_direction(kind: str, attrs: Attrs, fns: list, x: np.ndarray, w: np.ndarray, r: np.ndarray,
                  b: np.ndarray | None, p: np.ndarray | None, lens: np.ndarray, h0: np.ndarray | None,
                  c0: np.ndarray | None, backwards: Sequence[bool]) -> tuple:
    """``(Y, Y_h, Y_c)`` (``Y_c`` None but for an LSTM), one direction after the other, one
    :class:`_Cell` step at a time: any activation, clip, peepholes and sequence lengths."""
    batch, hidden = x.shape[1], r.shape[-1]
    ys, hs, cs = [], [], []
    for d in range(w.shape[0]):
        cell = _Cell(kind, w[d], r[d], _part(b, d), _part(p, d), fns[d], attrs)
        h = np.zeros((batch, hidden), x.dtype) if h0 is None else h0[d]
        c = (np.zeros((batch, hidden), x.dtype) if c0 is None else c0[d]) if kind == "LSTM" else None
        y, h, c = _run_direction(cell, x, lens, h, c, backwards[d])
        ys.append(y)
        hs.append(h)
        cs.append(c)
    y_all = np.stack(ys, axis=1).astype(x.dtype, copy=False)  # [steps, dirs, batch, hidden]
    y_h = np.stack(hs).astype(x.dtype, copy=False)
    y_c = np.stack([c for c in cs if c is not None]).astype(x.dtype, copy=False) if kind == "LSTM" else None
    return y_all, y_h, y_c


_SETTINGS: dict[int, tuple] = {}  # id(attrs) -> (attrs, kind, dirs, settings): see _settings


def _settings(kind: str, attrs: Attrs, dirs: int) -> tuple[int, tuple[bool, ...], bool]:
    """``(layout, backwards per direction, plain)`` of a layer's attributes, ``plain`` when they
    allow the fast path (default activations, no clip, an LSTM without ``input_forget``); read
    once per attribute mapping of a plan's step (read-only: a ``MappingProxyType``), every time
    for any other mapping."""
    hit = _SETTINGS.get(id(attrs))
    if hit is not None and hit[0] is attrs and hit[1] == kind and hit[2] == dirs:
        return hit[3]  # type: ignore[no-any-return]
    direction = _direction(kind, attrs, dirs)
    plain = attrs.get("activations") is None and attrs.get("clip") is None and not (
        kind == "LSTM" and int(attrs.get("input_forget", 0)))
    found = (int(attrs.get("layout", 0)), tuple(direction == "reverse" or d == 1 for d in range(dirs)), plain)
    if type(attrs) is MappingProxyType:
        if len(_SETTINGS) >= 1024:  # plans come and go: keep the table small
            _SETTINGS.clear()
        _SETTINGS[id(attrs)] = (attrs, kind, dirs, found)
    return found


def run_recurrent(kind: str, gates: int, defaults: Sequence[str], attrs: Attrs, x: np.ndarray, w: np.ndarray,
               r: np.ndarray, b: np.ndarray | None, lens: np.ndarray | None, h0: np.ndarray | None,
               c0: np.ndarray | None = None, p: np.ndarray | None = None) -> tuple:
    dirs = w.shape[0]
    layout, backwards, plain = _settings(kind, attrs, dirs)
    if layout:
        x, h0, c0 = np.swapaxes(x, 0, 1), _batch_first(h0), _batch_first(c0)
    steps, batch = x.shape[0], x.shape[1]
    hidden = r.shape[-1]
    if r.shape[1] != gates * hidden:
        raise ExecutionError(f"{kind}: R has {r.shape[1]} rows, expected {gates} x hidden_size {hidden}",
                             expected=f"{gates * hidden}", found=str(r.shape[1]))
    if fits_fast_path(kind, plain, x, (w, r, b, h0, c0), lens, p):
        y_all, y_h, y_c = fast_recurrent(kind, attrs, x, w, r, b, h0, c0, backwards)
    else:
        lens = np.full(batch, steps) if lens is None else np.asarray(lens).astype(np.int64)
        fns = _activations(attrs, defaults, dirs)
        y_all, y_h, y_c = _by_direction(kind, attrs, fns, x, w, r, b, p, lens, h0, c0, backwards)
    if layout:
        y_all = np.ascontiguousarray(np.transpose(y_all, (2, 0, 1, 3)))
        y_h = np.ascontiguousarray(np.swapaxes(y_h, 0, 1))
        y_c = None if y_c is None else np.ascontiguousarray(np.swapaxes(y_c, 0, 1))
    return (y_all, y_h) if kind != "LSTM" else (y_all, y_h, y_c)
