"""The type rule of the recurrent ops RNN, GRU and LSTM (their kernels are not in an op family
yet)."""

from __future__ import annotations

from amanda.types.node import Node
from amanda.types.rules import by_name, rule
from amanda.types.tensor_type import TensorType


@rule("RNN", "GRU", "LSTM")
def recurrent(node: Node) -> list:
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


