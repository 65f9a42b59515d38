"""Sequence models: RNN, GRU, LSTM, Attention, RotaryEmbedding, LinearAttention, the cache
and convolution-state ops, and the row normalisations that keep their input's type."""

from __future__ import annotations

from amanda.types.node import Node
from amanda.types.rules import by_name, rule
from amanda.types.rules.elementwise import same_as_first
from amanda.types.tensor_type import TensorType

rule("TensorScatter")(same_as_first)


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


@rule("CausalConvWithState")
def causal_conv_with_state(node: Node) -> list:
    """The input's type, and the state ``[batch, channels, k - 1]``."""
    x, w = node.shape(0), node.shape(1)
    k = w[2] if w is not None else None
    state = (x[0] if x else None, x[1] if x else None, k - 1 if type(k) is int else None)
    return by_name(node, output=node.type(0), present_state=TensorType(node.dtype(0), state))


@rule("LinearAttention")
def linear_attention(node: Node) -> list:
    """``[batch, seq, q_heads * d_v]`` and the state ``[batch, kv_heads, d_k, d_v]``."""
    q, v = node.shape(0), node.shape(2)
    heads_q, heads_kv = node.attr("q_num_heads"), node.attr("kv_num_heads")
    d_v = v[2] // int(heads_kv) if v is not None and type(v[2]) is int and heads_kv else None
    d_k = q[2] // int(heads_q) if q is not None and type(q[2]) is int and heads_q else None
    y = (q[0], q[1], d_v * int(heads_q) if d_v is not None and heads_q else None) if q is not None else None
    state = (q[0] if q else None, heads_kv, d_k, d_v)
    return by_name(node, output=TensorType(node.dtype(0), y), present_state=TensorType(node.dtype(0), state))


@rule("SwiGLU")
def swiglu(node: Node) -> list:
    """Gate and value of one shape and dtype; the output has it too."""
    a, b = node.shape(0), node.shape(1)
    if a is not None and b is not None:
        if len(a) != len(b):
            raise node.fail(f"inputs of one rank ({len(a)})", str(len(b)))
        a = tuple(node.same(x, y, "the gate's and value's dims") for x, y in zip(a, b))
    return [TensorType(node.dtype(0), a)]
