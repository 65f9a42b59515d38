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

__all__ = ["array_at", "raw_spans", "spans_pay", "stripped"]

_GRAPH = 7  # ModelProto.graph
_INITIALIZER = 5  # GraphProto.initializer
_RAW_DATA = 9  # TensorProto.raw_data
_RAW_DATA_KEY = _RAW_DATA << 3 | 2  # its key: length-delimited
_INITIALIZER_KEY = _INITIALIZER << 3 | 2
_DATA_TYPE_KEY = 2 << 3  # TensorProto.data_type: a varint
_DATA_LOCATION_KEY = 14 << 3  # TensorProto.data_location (1: external): a varint
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


def _field(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """(key, offset of the payload, end of the field) of the field at ``pos`` in ``data[:end]``:
    a length-delimited field's payload, or another's value (keys and lengths of one or two
    bytes, most of a graph's, read inline)."""
    key = data[pos]
    pos += 1
    if key >= 0x80:
        key, pos = _varint(data, pos - 1)
    wire = key & 7
    if wire != 2:
        if wire == 0:
            stop = _varint(data, pos)[1]
        elif wire == 1:
            stop = pos + 8
        elif wire == 5:
            stop = pos + 4
        else:  # groups are not used by ONNX
            raise _Unexpected
        return key, pos, stop
    length = data[pos]
    pos += 1
    if length >= 0x80:  # a node past 127 bytes (most): two bytes, read inline too
        if data[pos] < 0x80:
            length = (length & 0x7F) | data[pos] << 7
            pos += 1
        else:
            length, pos = _varint(data, pos - 1)
    if pos + length > end:
        raise _Unexpected
    return key, pos, pos + length


def _headed(data: bytes, pos: int, end: int):  # type: ignore[no-untyped-def]
    """(field number, offset of the field's key, of its payload, end of its payload) of each
    length-delimited field in ``data[pos:end]``, past every other field."""
    while pos < end:
        key, payload, stop = _field(data, pos, end)
        if key & 7 == 2:
            yield key >> 3, pos, payload, stop
        pos = stop
    if pos != end:
        raise _Unexpected


def raw_spans(data: bytes, count: int | None = None) -> list[tuple[int, int]] | None:
    """For each initializer of the main graph of the serialized model ``data``, in order, the
    offset and length of its ``raw_data`` in ``data`` (``(0, 0)`` for one without raw data);
    None where the walk cannot tell (see the module docstring). ``count``: how many initializers
    the parsed graph holds (the walk stops at the last; the fields after it, value_info most,
    are not walked)."""
    try:
        graphs = [field for field in _headed(data, 0, len(data)) if field[0] == _GRAPH]
        if len(graphs) != 1:  # a graph given in pieces is merged by the parser: not worth following
            return None
        spans: list[tuple[int, int]] = []
        if count != 0:
            _initializer_spans(data, graphs[0][2], graphs[0][3], spans, count)
        return spans
    except (_Unexpected, IndexError):
        return None


def _initializer_spans(data: bytes, pos: int, end: int, spans: list, count: int | None) -> None:
    """Append to ``spans`` the raw data span of each initializer among the graph's fields in
    ``data[pos:end]``, up to ``count`` of them."""
    while pos < end:
        key, payload, pos = _field(data, pos, end)
        if key == _INITIALIZER_KEY:
            found = _raw_data(data, payload, pos)
            spans.append((found[1], found[2] - found[1]) if found else (0, 0))
            if len(spans) == count:
                return
    if pos != end:
        raise _Unexpected


def _raw_data(data: bytes, pos: int, end: int, viewed: frozenset[int] | None = None) -> tuple[int, int, int] | None:
    """(offset of the key, of the payload, end of the payload) of the ``raw_data`` of the
    ``TensorProto`` in ``data[pos:end]`` (the last one wins, as when parsing); None where it has
    none. With ``viewed``: only where it has exactly one, not empty, its element type is one of
    ``viewed`` and its data is not external."""
    found, count, dtype, external = None, 0, 0, False
    while pos < end:
        at = pos
        key, payload, pos = _field(data, pos, end)
        if key == _RAW_DATA_KEY:
            found, count = (at, payload, pos), count + 1
        elif key == _DATA_TYPE_KEY:
            dtype = _varint(data, payload)[0]
        elif key == _DATA_LOCATION_KEY:
            external = _varint(data, payload)[0] == 1
    if pos != end:
        raise _Unexpected
    if viewed is None or found is None:
        return found
    return found if count == 1 and found[2] > found[1] and dtype in viewed and not external else None


def stripped(data: bytes, viewed: frozenset[int], least: int = 1 << 20) -> tuple[bytes, list[tuple[int, int]]] | None:
    """``data`` (a serialized model) without the ``raw_data`` of the main graph's initializers
    whose element type is one of ``viewed`` (the types the reader views as arrays), and for
    each initializer in order the span of its raw data in ``data`` (``(0, 0)``: kept in the
    message; initializers past the first run of them, which serializers never write, are kept
    and have none); None where the walk cannot tell (see the module docstring) or strips fewer
    than ``least`` bytes.

    Parsing a message copies every bytes field into it; the weights are read from ``data``
    anyway (as views), so parsing the stripped bytes skips a copy of all of them. Only an
    initializer with one non-empty ``raw_data``, an element type of ``viewed`` and its data in
    the file loses it; the rest of the bytes are copied as they are, lengths written anew.

    >>> import onnx
    >>> from onnx import helper, numpy_helper
    >>> w = numpy_helper.from_array(np.arange(3, dtype=np.float32), "w")
    >>> graph = helper.make_graph([], "g", [], [helper.make_tensor_value_info("w", 1, [3])], [w])
    >>> data = helper.make_model(graph).SerializeToString()
    >>> small, spans = stripped(data, frozenset({1}), least=0)
    >>> parsed = onnx.ModelProto.FromString(small)
    >>> parsed.graph.initializer[0].raw_data, np.frombuffer(data, np.float32, 3, spans[0][0]).tolist()
    (b'', [0.0, 1.0, 2.0])
    """
    try:
        graphs = [field for field in _headed(data, 0, len(data)) if field[0] == _GRAPH]
        if len(graphs) != 1:
            return None
        _, begin, start, end = graphs[0]
        pieces: list = []
        spans: list[tuple[int, int]] = []
        cursor = _strip_initializers(data, start, end, viewed, pieces, spans)
        pieces.append(data[cursor:end])
        graph = b"".join(pieces)
        if end - start - len(graph) < least:
            return None
        return b"".join([data[:begin], _header(_GRAPH, len(graph)), graph, data[end:]]), spans
    except (_Unexpected, IndexError):
        return None


def _strip_initializers(data: bytes, pos: int, end: int, viewed: frozenset[int], pieces: list,
                        spans: list) -> int:
    """Walk the graph's fields in ``data[pos:end]`` up to the end of its (first run of)
    initializers, adding to ``pieces`` the bytes up to each stripped initializer and that
    initializer without its raw data, and to ``spans`` each initializer's span; the offset
    from which the rest is kept as it is."""
    cursor = pos
    while pos < end:
        at = pos
        key, payload, pos = _field(data, pos, end)
        if key != _INITIALIZER_KEY:
            if spans:  # past the initializers: the rest is kept as it is
                return cursor
            continue
        raw = _raw_data(data, payload, pos, viewed)
        if raw is None:
            spans.append((0, 0))
            continue
        key_at, raw_start, raw_end = raw
        pieces += [data[cursor:at], _header(_INITIALIZER, pos - payload - (raw_end - key_at)),
                   data[payload:key_at], data[raw_end:pos]]
        spans.append((raw_start, raw_end - raw_start))
        cursor = pos
    if pos != end:
        raise _Unexpected
    return cursor


def _header(number: int, length: int) -> bytes:
    """The key and length of a length-delimited field."""
    out = bytearray()
    for value in (number << 3 | 2, length):
        while value >= 0x80:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out)


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
