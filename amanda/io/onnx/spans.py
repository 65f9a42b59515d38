"""Where the main graph's initializers keep their raw bytes in a serialized ``ModelProto``.

Reading a ``bytes`` field of a parsed protobuf message copies it out of the message, so reading
every weight of a model through ``TensorProto.raw_data`` copies every byte of it once more. The
file's own bytes hold the same values: :func:`raw_spans` walks the wire format of the model
(top-level fields, the graph's fields, each initializer's fields; node contents are skipped by
their length) and gives, for each initializer in order, the offset and length of its
``raw_data`` in ``data``, so the importer reads each weight as a read-only array over the
file's immutable bytes, without a copy.

The walk gives up (returns None) on anything it does not expect, and the importer then reads
every tensor from the parsed message as before; a span is only used where its length is the one
the tensor's dtype and dims call for, so a file the walk misreads cannot give wrong values.

>>> import onnx
>>> from onnx import helper, numpy_helper
>>> w = numpy_helper.from_array(np.arange(3, dtype=np.float32), "w")
>>> graph = helper.make_graph([], "g", [], [helper.make_tensor_value_info("w", 1, [3])], [w])
>>> data = helper.make_model(graph).SerializeToString()
>>> [(offset, length) for offset, length in raw_spans(data)], len(w.raw_data)
... # doctest: +ELLIPSIS
([(..., 12)], 12)
>>> np.frombuffer(data, np.float32, 3, raw_spans(data)[0][0]).tolist()
[0.0, 1.0, 2.0]
"""

from __future__ import annotations

import numpy as np

__all__ = ["raw_spans", "spans_pay"]

_GRAPH = 7  # ModelProto.graph
_INITIALIZER = 5  # GraphProto.initializer
_RAW_DATA = 9  # TensorProto.raw_data
_RAW_DATA_KEY = _RAW_DATA << 3 | 2  # its key: length-delimited
_BYTES_PER_FIELD = 2048  # raw bytes per field walked past below which copying is cheaper


class _Unexpected(Exception):
    """The bytes are not the well-formed message the walk expects."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift = 0, 0
    while True:
        if shift > 63 or pos >= len(data):
            raise _Unexpected
        byte = data[pos]
        result |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes, start: int, end: int):  # type: ignore[no-untyped-def]
    """(field number, offset of the payload, end of the payload) of each length-delimited field
    in ``data[start:end]``, past every other field."""
    pos = start
    while pos < end:
        key, pos = _varint(data, pos)
        wire = key & 7
        if wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > end:
                raise _Unexpected
            yield key >> 3, pos, pos + length
            pos += length
        elif wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:  # groups are not used by ONNX
            raise _Unexpected
    if pos != end:
        raise _Unexpected


def raw_spans(data: bytes, count: int | None = None) -> list[tuple[int, int]] | None:
    """For each initializer of the main graph of the serialized model ``data``, in order, the
    offset and length of its ``raw_data`` in ``data`` (``(0, 0)`` for one without raw data);
    None where the walk cannot tell (see the module docstring). ``count``: how many initializers
    the parsed graph holds (the walk stops at the last; the fields after it, value_info most,
    are not walked)."""
    try:
        graphs = [(start, end) for number, start, end in _fields(data, 0, len(data)) if number == _GRAPH]
        if len(graphs) != 1:  # a graph given in pieces is merged by the parser: not worth following
            return None
        spans: list[tuple[int, int]] = []
        if count != 0:
            _initializer_spans(data, *graphs[0], spans, count)
        return spans
    except (_Unexpected, IndexError):
        return None


def _initializer_spans(data: bytes, pos: int, end: int, spans: list, count: int | None) -> None:
    """Append to ``spans`` the raw data span of each initializer among the graph's fields in
    ``data[pos:end]``, up to ``count`` of them: :func:`_fields` written out as one loop, since a
    graph has a field per node and value_info (one-byte keys and lengths read inline)."""
    while pos < end:
        key = data[pos]
        pos += 1
        if key >= 0x80:
            key, pos = _varint(data, pos - 1)
        if key & 7 != 2:
            pos = _past(data, pos, key & 7)
            continue
        length = data[pos]
        pos += 1
        if length >= 0x80:  # a node past 127 bytes (most): two bytes, read inline too
            if data[pos] < 0x80:
                length = (length & 0x7F) | data[pos] << 7
                pos += 1
            else:
                length, pos = _varint(data, pos - 1)
        stop = pos + length
        if stop > end:
            raise _Unexpected
        if key >> 3 == _INITIALIZER:
            spans.append(_raw_data(data, pos, stop))
            if len(spans) == count:
                return
        pos = stop
    if pos != end:
        raise _Unexpected


def _raw_data(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The span of the raw data of the ``TensorProto`` in ``data[pos:end]`` (``(0, 0)``: none;
    the last one wins, as when parsing); :func:`_fields` written out, one-byte keys inline."""
    span = (0, 0)
    while pos < end:
        key = data[pos]
        pos += 1
        if key >= 0x80:
            key, pos = _varint(data, pos - 1)
        if key & 7 != 2:
            pos = _past(data, pos, key & 7)
            continue
        length, pos = _varint(data, pos)
        stop = pos + length
        if stop > end:
            raise _Unexpected
        if key == _RAW_DATA_KEY:
            span = (pos, length)
        pos = stop
    if pos != end:
        raise _Unexpected
    return span


def _past(data: bytes, pos: int, wire: int) -> int:
    """The offset past the payload at ``pos`` of a field of wire type ``wire`` (not 2)."""
    if wire == 0:
        return _varint(data, pos)[1]
    if wire == 1:
        return pos + 8
    if wire == 5:
        return pos + 4
    raise _Unexpected  # groups are not used by ONNX


def spans_pay(raw_bytes: int, fields: int) -> bool:
    """Whether walking ``fields`` fields of a graph to find ``raw_bytes`` bytes of weights costs
    less than copying them (a graph of many small ops and few weights is read faster by copying)."""
    return raw_bytes >= _BYTES_PER_FIELD * max(fields, 1)


def array_at(data: bytes, span: tuple[int, int], dtype: np.dtype, dims: tuple[int, ...]) -> np.ndarray | None:
    """The read-only array of ``dims`` values of ``dtype`` at ``span`` of ``data``, or None if the
    span's length is not what they call for (or there is none)."""
    offset, length = span
    count = 1
    for d in dims:
        count *= d
    if length == 0 or length != count * dtype.itemsize:
        return None
    return np.frombuffer(data, dtype, count, offset).reshape(dims)
