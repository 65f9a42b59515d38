"""Data-parallel inference on Dask: a model applied block by block to a dask array.

``map_blocks(model, array)`` returns a lazy dask array whose blocks are the model's output
for the matching blocks of ``array`` (split along the first axis only), so inputs larger than
memory stream through the workers a few blocks at a time. The model travels once per worker:
as amanda's JSON text (containers are never pickled), scattered to every worker when a
``dask.distributed`` client is in use, and each worker keeps one compiled Session per model.
Without a client the blocks run on dask's local scheduler. Needs the ``dask`` extra.

>>> import amanda, numpy as np, pytest
>>> da = pytest.importorskip("dask.array")  # the dask extra
>>> g = amanda.Container("G", "g", inputs=["x"], outputs=["y"], attrs={"namespace": "amanda/onnx/17"},
...     children=[amanda.op("Relu", "r", ["X"], ["Y"])], edges=[("g:x", "r:X"), ("r:Y", "g:y")])
>>> x = da.from_array(np.array([[-1.0, 2.0], [3.0, -4.0], [5.0, 6.0]], np.float32), chunks=(2, 2))
>>> map_blocks(g, x, client=False).compute().tolist()
[[0.0, 2.0], [3.0, 0.0], [5.0, 6.0]]
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from typing import Any

import numpy as np

from amanda.containers import Container
from amanda.errors import ArgumentError
from amanda.exec.session import Session
from amanda.io.text import dumps, loads

__all__ = ["map_blocks"]

_KEEP = 4  # compiled models a worker keeps (least recently used go first)
_LOCK = threading.Lock()
_SESSIONS: OrderedDict[str, Session] = OrderedDict()


def _session(text: str, token: str, threads: int | None) -> Session:
    with _LOCK:
        session = _SESSIONS.get(token)
        if session is None:
            session = _SESSIONS[token] = Session(loads(text, "json"), threads=threads)
            while len(_SESSIONS) > _KEEP:
                _SESSIONS.popitem(last=False)
        _SESSIONS.move_to_end(token)
        return session


def apply_block(block: np.ndarray, text: str, token: str, input: str, output: str, threads: int | None) -> Any:
    """The model's ``output`` for one block fed as ``input`` (what each Dask task runs)."""
    return _session(text, token, threads).run([output], {input: block})[0]


def _port(model: Container, given: str | None, names: tuple[str, ...], role: str) -> str:
    if given is not None:
        if given not in names:
            raise ArgumentError.at(role, f"one of the model's {role}s {list(names)}", repr(given))
        return given
    if len(names) != 1:
        raise ArgumentError.at(role, f"the {role} to use, as the model has {len(names)}: {list(names)}", "none named")
    return names[0]


def _default_client() -> Any:
    try:
        from distributed import get_client
    except ImportError:
        return None
    try:
        return get_client()
    except ValueError:  # no client in this process
        return None


def map_blocks(model: Container, array: Any, *, input: str | None = None, output: str | None = None,
               client: Any = None, threads: int | None = 1) -> Any:
    """A dask array: ``model``'s ``output`` for each block of ``array`` fed as ``input``.

    ``input``/``output`` default to the model's only input and output. ``array`` is rechunked
    so that only its first axis is split. The output's shape past the first axis and its dtype
    come from running the model once, here, on zeros shaped like the first block. ``client``:
    the ``dask.distributed`` Client to scatter the model with (default: the current one, if
    any; False: none). ``threads``: each worker Session's setting (1: the workers already
    share the cores).
    """
    import dask.array as da

    if not isinstance(model, Container):
        raise ArgumentError.at("model", "a Container", type(model).__name__)
    if not isinstance(array, da.Array) or array.ndim < 1:
        raise ArgumentError.at("array", "a dask array with at least one axis", type(array).__name__)
    input = _port(model, input, model.input_names, "input")
    output = _port(model, output, model.output_names, "output")
    if any(len(c) > 1 for c in array.chunks[1:]):
        array = array.rechunk({axis: -1 for axis in range(1, array.ndim)})
    probe = Session(model, threads=threads).run([output], {input: np.zeros(array.chunksize, array.dtype)})[0]
    probe = np.asarray(probe)
    if probe.ndim < 1 or probe.shape[0] != array.chunksize[0]:
        raise ArgumentError.at(f"output {output!r}", f"one row per input row ({array.chunksize[0]} for the first block)",
                               f"shape {probe.shape}")
    text, token = dumps(model, "json"), uuid.uuid4().hex
    client = _default_client() if client is None else (client or None)
    shipped: Any = text if client is None else client.scatter(text, broadcast=True, hash=False)
    chunks = (array.chunks[0], *((n,) for n in probe.shape[1:]))
    extra = probe.ndim - array.ndim
    return da.map_blocks(apply_block, array, shipped, token, input, output, threads, dtype=probe.dtype,
                         chunks=chunks, meta=np.empty((0,) * probe.ndim, probe.dtype),
                         **({"new_axis": list(range(array.ndim, probe.ndim))} if extra > 0 else {}),
                         **({"drop_axis": list(range(probe.ndim, array.ndim))} if extra < 0 else {}))
