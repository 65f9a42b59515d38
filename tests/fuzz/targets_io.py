"""Fuzz targets over binary inputs and execution: ONNX protobufs (mutated through the
protobuf API, or as bytes), Session feeds and fetches, and weight files."""

from __future__ import annotations

import atexit
import functools
import io
import os
import shutil
import tempfile
import zipfile
from typing import Any

import numpy as np

import amanda
from amanda import Container, Endpoint
from amanda.containers.phases import computations
from tests.fuzz import seeds
from tests.fuzz.harness import (
    InvalidResult,
    ModifiedInput,
    Source,
    Target,
    check_unchanged,
    snapshot,
)
from tests.fuzz.mutate import mutate_bytes


@functools.cache
def _scratch() -> str:
    """A directory for this process's case files, removed when the process exits."""
    path = tempfile.mkdtemp(prefix="amanda-fuzz-")
    atexit.register(shutil.rmtree, path, True)
    return path


def _file(data: bytes, suffix: str) -> str:
    path = os.path.join(_scratch(), f"case{suffix}")
    with open(path, "wb") as handle:
        handle.write(data)
    return path


# -- ONNX -----------------------------------------------------------------------------------


def _graphs(graph: Any) -> list[Any]:
    """``graph`` and every graph held in its nodes' attributes, at any depth."""
    found = [graph]
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                found += _graphs(attr.g)
            for sub in attr.graphs:
                found += _graphs(sub)
    return found


def _names(graph: Any) -> list[str]:
    names = [v.name for v in (*graph.input, *graph.output, *graph.initializer)]
    return names + [o for n in graph.node for o in n.output] + ["", "dangling", "x", "a/b:0"]


ODD_ATTRS = [1, -1, 2**62, 1.5, float("nan"), "s", b"\xff", [], [1, 2], [1.0], ["a"],
             np.zeros((0, 3), np.float32), np.array(["a"], object)]
OP_TYPES = ["Relu", "Conv", "If", "Loop", "Scan", "Gemm", "Constant", "Split", "", "Unknown",
            "Identity", "Concat", "Reshape", "SequenceMap", "Normalizer"]


def _mutate_graph(src: Source, model: Any, g: Any) -> None:
    from onnx import helper

    kind = src.integer(0, 13)
    node = src.choice(g.node) if len(g.node) else None
    if kind == 0 and node is not None:  # an input fewer, or one more
        if len(node.input) and src.boolean():
            del node.input[src.integer(0, len(node.input) - 1)]
        else:
            node.input.append(src.choice(_names(g)))
    elif kind == 1 and node is not None and len(node.input):  # dangling or cyclic input
        node.input[src.integer(0, len(node.input) - 1)] = src.choice(_names(g))
    elif kind == 2 and node is not None and len(node.output):  # two producers, or none
        node.output[src.integer(0, len(node.output) - 1)] = src.choice(_names(g))
    elif kind == 3:  # remove an input, output, initializer or node
        field = getattr(g, src.choice(["input", "output", "initializer", "node", "value_info"]))
        if len(field):
            del field[src.integer(0, len(field) - 1)]
    elif kind == 4 and node is not None and len(node.attribute):  # attribute of a wrong type
        src.choice(node.attribute).type = src.integer(0, 14)
    elif kind == 5 and node is not None:  # an odd attribute
        name = src.choice(["axis", "perm", "then_branch", "body", "value", "kernel_shape", "zz", ""])
        try:
            node.attribute.append(helper.make_attribute(name, src.choice(ODD_ATTRS)))
        except (ValueError, TypeError):
            node.attribute.add(name=name, type=src.integer(0, 14))
    elif kind == 6 and len(g.initializer):  # bad dims, type or data
        t = src.choice(g.initializer)
        choice = src.integer(0, 3)
        if choice == 0 and len(t.dims):
            t.dims[src.integer(0, len(t.dims) - 1)] = src.choice([-1, 0, 3, 2**40])
        elif choice == 1:
            t.dims.append(src.integer(0, 5))
        elif choice == 2:
            t.data_type = src.integer(0, 30)
        else:
            t.raw_data = t.raw_data[: src.integer(0, len(t.raw_data))]
    elif kind == 7 and len(g.input) + len(g.output):  # bad value info
        vi = src.choice([*g.input, *g.output])
        tensor = vi.type.tensor_type
        if src.boolean():
            tensor.elem_type = src.integer(0, 30)
        else:
            tensor.shape.dim.add().dim_value = src.choice([-5, 0, 2**62])
            tensor.shape.dim.add().dim_param = src.choice(["", "n", "é", "a b"])
    elif kind == 8 and node is not None:  # another op type or domain
        node.op_type = src.choice(OP_TYPES)
        if src.boolean(0.3):
            node.domain = src.choice(["", "ai.onnx", "ai.onnx.ml", "com.example", "ai.onnx.preview.training"])
    elif kind == 9:  # odd opsets
        if len(model.opset_import) and src.boolean():
            model.opset_import[0].version = src.choice([0, -1, 1, 6, 11, 10**6])
        else:
            model.opset_import.add(domain=src.choice(["", "ai.onnx", "x"]), version=src.integer(-1, 30))
    elif kind == 10:
        model.ir_version = src.choice([-1, 0, 1, 2, 3, 4, 7, 10, 11, 99])
    elif kind == 11:  # metadata amanda reads
        where = src.choice([model, g, node] if node is not None else [model, g])
        key = src.choice(["amanda.uid", "amanda.attr.debug", "amanda.attr.", "amanda.attr.value", "k"])
        value = src.choice(["", "{", "1", "null", '{"__ndarray__": 1}', '{"__bytes__": "!"}', "[[[]]]",
                            '"x"', '{"__ndarray__": {"dtype": "float32", "shape": [9], "data": ""}}'])
        where.metadata_props.add(key=key, value=value)
    elif kind == 12 and node is not None:  # odd or duplicate node names
        node.name = src.choice(["", "a/b", ":", "-1", "$", "..", g.node[0].name, g.name or "g"])
    elif kind == 13 and len(g.node) > 1:  # nodes out of order
        i, j = src.integer(0, len(g.node) - 1), src.integer(0, len(g.node) - 1)
        a, b = type(g.node[i])(), type(g.node[j])()
        a.CopyFrom(g.node[i])
        b.CopyFrom(g.node[j])
        g.node[i].CopyFrom(b)
        g.node[j].CopyFrom(a)


def mutate_proto(src: Source, seed: Any) -> Any:
    """A copy of ``seed`` after 1..3 structural mutations made through the protobuf API."""
    model = type(seed)()
    model.CopyFrom(seed)
    for _ in range(src.integer(1, 3)):
        _mutate_graph(src, model, src.choice(_graphs(model.graph)))
    return model


def generate_onnx_proto(src: Source) -> Any:
    """A structurally mutated fixture model."""
    return mutate_proto(src, src.choice(list(seeds.onnx_protos().values())))


def generate_onnx_bytes(src: Source) -> bytes:
    """A fixture model's bytes (maybe structurally mutated first), mutated byte by byte."""
    model = generate_onnx_proto(src) if src.boolean(0.3) else src.choice(list(seeds.onnx_protos().values()))
    return mutate_bytes(src, model.SerializeToString(), rounds=src.choice([1, 2, 8]))


def _export(container: Container) -> None:
    """Export must give a model or an AmandaError, and leave the container as it was."""
    from amanda.io.onnx import to_onnx

    before = snapshot(container)
    to_onnx(container)
    check_unchanged(container, before, "the container exported")


def run_onnx_proto(model: Any) -> None:
    """``from_onnx`` leaves the proto unchanged; the container imported exports again."""
    from amanda.io.onnx import from_onnx

    before = model.SerializeToString(deterministic=True)
    result = from_onnx(model)
    if model.SerializeToString(deterministic=True) != before:
        raise ModifiedInput("from_onnx changed the ModelProto")
    _export(result)


def run_onnx_bytes(data: bytes) -> None:
    """``amanda.load`` on the bytes as an .onnx file; the container imported exports again."""
    _export(amanda.load(_file(data, ".onnx")))


# -- Session feeds and fetches --------------------------------------------------------------

SESSION_MODELS = ("mlp", "cnn", "control_flow", "attention")
DTYPES = ["float32", "float64", "float16", "int64", "int32", "int8", "uint64", "bool", "complex64",
          "U3", "S2", "object", "datetime64[s]"]


def _value(src: Source, good: np.ndarray) -> Any:
    rng = np.random.default_rng(src.integer(0, 2**32))
    kind = src.integer(0, 9)
    if kind <= 1:  # right shape, maybe another dtype
        dtype = good.dtype if kind == 0 else np.dtype(src.choice(DTYPES))
        return rng.standard_normal(good.shape).astype(dtype)
    if kind == 2:  # another shape
        shape = tuple(src.integer(0, 5) for _ in range(src.integer(0, 4)))
        return rng.standard_normal(shape).astype(src.choice(["float32", "int64", "bool"]))
    if kind == 3:
        return src.choice([0, -1, 3, 1.5, True, 1j, 2**70, float("nan")])
    if kind == 4:
        return None
    if kind == 5:
        return src.choice(["x", "", b"\x00", "1.0"])
    if kind == 6:
        return src.choice([[1.0, 2.0], [[1], [2, 3]], [], [None], good.tolist()])
    if kind == 7:
        return src.choice([{}, {"x": 1}, object(), Endpoint(("x",), 0), np.float32])
    if kind == 8:  # odd arrays
        return src.choice([np.array([1, "a"], object), np.zeros((0, 8), np.float32),
                           np.full(good.shape, np.nan, good.dtype), np.asfortranarray(good),
                           np.broadcast_to(good.ravel()[0], good.shape), good[..., ::-1] if good.ndim else good])
    return good.copy()


def _names_of(model: Container) -> list[Any]:
    names: list[Any] = [*model.input_names, *model.output_names]
    for child in model.children[:6]:
        names += [child.name, f"{child.name}:{child.output_names[0]}" if child.outputs else child.name]
    return names + ["", "nosuch", ":", "a:b:c", "x:-1", 0, -1, None, 1.5, ("x",), Endpoint(("relu",), "Y")]


def generate_session(src: Source) -> tuple[str, dict, Any, Any, Any]:
    """A model name, feeds, fetches, threads and phase."""
    from tests.fixtures.onnx.onnx_models import feeds as good_feeds

    name = src.choice(SESSION_MODELS)
    model, good = seeds.onnx_containers()[name], good_feeds(name)
    feeds: dict[Any, Any] = {}
    for key, value in good.items():
        if src.boolean(0.85):
            feeds[key] = _value(src, value) if src.boolean(0.6) else value.copy()
    trip = feeds.get("trip")
    if name == "control_flow" and isinstance(trip, np.ndarray) and trip.dtype.kind in "iuf":
        feeds["trip"] = np.clip(feeds["trip"], -2, 20).astype(feeds["trip"].dtype)  # no endless loops
    if src.boolean(0.3):
        feeds[src.choice(_names_of(model))] = _value(src, next(iter(good.values())))
    fetches: Any = [src.choice(_names_of(model)) for _ in range(src.integer(0, 3))]
    if src.boolean(0.2):
        fetches = src.choice([*model.output_names, "nosuch", 3, None, ()])
    elif src.boolean(0.7):
        fetches.insert(0, model.output_names[0])
    return name, feeds, fetches, src.choice([None, 1, 2]), src.choice([None, None, "train", "trian", 3])


def run_session(case: tuple[str, dict, Any, Any, Any]) -> None:
    """``Session.run``: a list of one result per fetch; feeds and model unchanged."""
    name, feeds, fetches, threads, phase = case
    model = seeds.onnx_containers()[name]
    before = snapshot(model)
    copies = {k: v.copy() for k, v in feeds.items() if isinstance(v, np.ndarray)}
    with amanda.Session(model, threads=threads) as session:
        result = session.run(fetches, feeds, phase=phase)
    if phase is not None and phase not in computations(model):
        raise InvalidResult(f"run accepted phase {phase!r}, which the model does not have")
    for key, old in copies.items():
        new = feeds[key]
        if new.dtype != old.dtype or new.shape != old.shape or not np.array_equal(
                new, old, equal_nan=old.dtype.kind in "fc"):
            raise ModifiedInput(f"the session changed the array fed as {key!r}")
    check_unchanged(model, before, "the model run")
    expected = 1 if isinstance(fetches, (str, Endpoint)) else len(fetches)
    if not isinstance(result, list) or len(result) != expected:
        raise InvalidResult(f"run returned {type(result).__name__} for {expected} fetches")


# -- weight files ---------------------------------------------------------------------------

WEIGHT_MODELS = ("mlp", "cnn")


@functools.cache
def _weights(name: str) -> bytes:
    path = _file(b"", ".npz")
    amanda.save_weights(seeds.onnx_containers()[name], path)
    with open(path, "rb") as handle:
        return handle.read()


def _npy(src: Source, good: np.ndarray | None) -> bytes:
    out = io.BytesIO()
    kind = src.integer(0, 4)
    if kind == 0 and good is not None:
        np.save(out, good)
    elif kind == 1:
        np.save(out, np.zeros(tuple(src.integer(0, 4) for _ in range(src.integer(0, 3))),
                              src.choice(DTYPES[:-1])), allow_pickle=True)
    elif kind == 2:
        np.save(out, np.array([{"a": 1}], object), allow_pickle=True)
    elif kind == 3:
        np.save(out, np.zeros(3, np.float32))
        return mutate_bytes(src, out.getvalue()[:128]) + out.getvalue()[128:]  # the header
    else:
        return src.data(64)
    return out.getvalue()


def _zip(src: Source, name: str) -> bytes:
    model = seeds.onnx_containers()[name]
    keys = [f"{c.uid}::value" for c in model.children if "value" in c.attrs]
    members = keys + ["x", "a::b", "::", "_", "../up", "dir/", "é::value", f"{model.uid}::value"]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for _ in range(src.integer(0, 5)):
            key = src.choice(members)
            child = next((c for c in model.children if key == f"{c.uid}::value"), None)
            suffix = src.choice([".npy", ".npy", "", ".txt"])
            archive.writestr(key + suffix, _npy(src, child.attrs["value"] if child else None))
    return out.getvalue()


BOMB_BYTES = 1 << 26  # what a compressed member of the bomb kind decompresses to, at most
MEMORY_BOUND = 16 << 20  # what a load of these small models may allocate at its peak


def _bomb(src: Source, name: str) -> bytes:
    """A small archive whose deflated members of zeros decompress to up to 64 MB each, keyed to
    pair with nothing, with a weight of the model (another shape), or under a bare name."""
    model = seeds.onnx_containers()[name]
    keys = [f"{c.uid}::value" for c in model.children if "value" in c.attrs] + ["nobody::value", "x"]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for key in dict.fromkeys(src.choice(keys) for _ in range(src.integer(1, 3))):  # each name once
            count = src.integer(1, BOMB_BYTES // 4)
            with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array_header_1_0(member, {"descr": "<f4", "fortran_order": False,
                                                              "shape": (count,)})
                left, chunk = count * 4, bytes(1 << 20)
                while left:
                    member.write(chunk[:min(left, len(chunk))])
                    left -= min(left, len(chunk))
    return out.getvalue()


def generate_weights(src: Source) -> tuple[str, bytes]:
    """A model name and the bytes of a (broken) weights file for it."""
    name = src.choice(WEIGHT_MODELS)
    good = _weights(name)
    kind = src.integer(0, 6)
    if kind == 0:
        data = good[: src.integer(0, len(good))]
    elif kind == 1:
        data = mutate_bytes(src, good, rounds=src.choice([1, 3]))
    elif kind == 2:
        data = src.choice([b"", b"PK", b"PK\x03\x04", b"\x93NUMPY", b"not a zip", b"\x80\x04K\x01."])
    elif kind == 3:
        data = _npy(src, np.zeros((8, 16), np.float32))
    elif kind == 4:
        data = _zip(src, name)
    elif kind == 5:
        data = _bomb(src, name)
    else:
        data = good
    return name, data


def run_weights(case: tuple[str, bytes]) -> None:
    """``load_weights``: the model is unchanged, every array loaded is read-only, and the load
    allocates at most a bound of its own however much the file's members decompress to."""
    import tracemalloc

    name, data = case
    model = seeds.onnx_containers()[name]
    before = snapshot(model)
    path = _file(data, ".npz")
    tracemalloc.start()
    try:
        loaded = amanda.load_weights(model, path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    if peak > MEMORY_BOUND:
        raise InvalidResult(f"loading a {len(data)}-byte file allocated {peak} bytes")
    check_unchanged(model, before, "the model loaded into")
    for _, node, _ in amanda.walk(loaded.container):
        for key, value in node.attrs.items():
            if isinstance(value, np.ndarray) and value.flags.writeable:
                raise InvalidResult(f"{node.name}.{key} was loaded writeable")


TARGETS = (
    Target("onnx_proto", generate_onnx_proto, run_onnx_proto, lambda m: m.SerializeToString()),
    Target("onnx_bytes", generate_onnx_bytes, run_onnx_bytes, lambda data: data),
    Target("session", generate_session, run_session),
    Target("weights", generate_weights, run_weights, lambda case: case[1]),
)
