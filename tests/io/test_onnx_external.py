"""ONNX external data: lazy weights, saving without copying, and the folder's safety rules, on a
few-MB Llama-shaped decoder written by benchmarks/llama_onnx.py, checked against onnxruntime."""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import amanda  # noqa: E402
from amanda.containers.lazy import LazyTensor, is_mapped  # noqa: E402
from amanda.errors import FormatError  # noqa: E402
from amanda.io.onnx import dump_onnx, load_onnx  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_large import add_lora, block_output  # noqa: E402
from llama_onnx import LlamaShape, write_llama  # noqa: E402

SHAPE = LlamaShape(layers=2, width=128, heads=4, ffn=344, vocab=1024, positions=64)  # 2.6 MB of float32


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    return write_llama(tmp_path_factory.mktemp("llama"), SHAPE)


def _feeds(tokens=6):
    ids = (np.arange(tokens, dtype=np.int64)[None] * 37) % SHAPE.vocab
    return {"input_ids": ids, "position_ids": np.arange(tokens, dtype=np.int64)[None]}


def _ort(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, _feeds())[0]


def _digest(folder):
    return {p.name: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()) for p in Path(folder).iterdir()}


# -- reading nothing until values are read --------------------------------------------------

_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _resident_pages(path):
    """Pages of ``path`` in the page cache (mincore over a fresh map of it)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    address = np.frombuffer(mapped, np.uint8).ctypes.data
    vector = (ctypes.c_ubyte * ((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE))()
    assert _LIBC.mincore(ctypes.c_void_p(address), ctypes.c_size_t(size), vector) == 0
    return sum(v & 1 for v in vector)


def _evict(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


@pytest.mark.skipif(_LIBC is None or not hasattr(os, "posix_fadvise"), reason="mincore and fadvise are Linux's")
def test_structure_work_reads_no_weight_byte(original, tmp_path):
    """Loading, queries, validate, infer_types, summary, to_dot, diff, an edit and a dump beside
    the model leave every page of the data file unread; running the model reads them."""
    data = f"{original}.data"
    _evict(data)
    if _resident_pages(data):
        pytest.skip("the file system keeps the file's pages cached")
    model = amanda.load(original)
    projections = [path for path, c, _ in amanda.walk(model) if len(path) > 1 and c.type == "Constant" and path[-2].endswith("proj")]
    assert len(projections) == 7 * SHAPE.layers
    assert all(type(model.descendant(p)._attrs["value"]) is LazyTensor for p in projections)
    assert len(model.select("$..[?type=='MatMul']")) == (7 + 2) * SHAPE.layers + 1  # seven projections and two products a block, the head
    amanda.validate(model)
    amanda.infer_types(model)
    assert amanda.summary(model).total > 600_000
    assert "digraph" in amanda.to_dot(model)
    edited = add_lora(model, rank=4)
    assert amanda.diff(model, edited)
    assert model == amanda.load(original) and hash(model) == hash(amanda.load(original))
    report = amanda.dump(edited, original.with_name("beside.onnx"))
    assert report.referenced == ("model.onnx.data",)
    assert _resident_pages(data) == 0
    amanda.Session(model).run(["logits"], _feeds())
    assert _resident_pages(data) > 0


# -- running ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_lazy_model_runs_as_onnxruntime_does(tmp_path, dtype):
    """A Session over a lazily loaded decoder gives onnxruntime's logits, reading its weights
    through their maps (no copy kept); one block's output is fetched alone."""
    path = write_llama(tmp_path, LlamaShape(**{**SHAPE.__dict__, "dtype": dtype}))
    model = amanda.load(path)
    (logits,) = amanda.Session(model).run(["logits"], _feeds())
    tolerance = 1e-4 if dtype == "float32" else 2e-2
    np.testing.assert_allclose(logits.astype(np.float32), _ort(path).astype(np.float32), atol=tolerance, rtol=tolerance)
    (hidden,) = amanda.Session(model).run([block_output(model)], _feeds())
    assert hidden.shape == (1, 6, SHAPE.width) and np.isfinite(hidden).all()
    assert is_mapped(model.descendant(("model", "layers.0", "mlp", "up_proj", "weight")).attrs["value"])


# -- saving -------------------------------------------------------------------------------


def test_a_dump_beside_the_model_writes_only_the_graph(original, tmp_path):
    """Dumping a loaded model next to it refers to its data file in place (nothing copied, the
    original untouched); the saved model loads in onnxruntime and in amanda, equal to the first."""
    model = amanda.load(original)
    before = _digest(original.parent)
    target = original.with_name("again.onnx")
    report = dump_onnx(model, target)
    assert report.data is None and report.referenced == ("model.onnx.data",) and not report.copied
    assert report.written == target.stat().st_size < 0.1 * SHAPE.weight_bytes()
    assert {k: v for k, v in _digest(original.parent).items() if k in before} == before
    np.testing.assert_array_equal(_ort(target), _ort(original))
    assert amanda.load(target) == model


def test_a_lora_edit_saved_to_a_new_folder(original, tmp_path):
    """A LoRA edit of q and v saved to a new folder writes its new weights only, with hard links
    (link=True), or copies the rest with a warning; both load in onnxruntime with the edited
    model's outputs; the original files are unchanged."""
    model = amanda.load(original)
    edited = add_lora(model, rank=4)
    (expected,) = amanda.Session(edited).run(["logits"], _feeds())
    assert not np.allclose(expected, _ort(original), atol=1e-4)  # the adapters change the outputs
    before = _digest(original.parent)
    (tmp_path / "copied").mkdir()
    with pytest.warns(UserWarning, match="could not be cloned.*copied into model.onnx.data"):
        copied = dump_onnx(edited, tmp_path / "copied" / "model.onnx")
    used = sum(c.attrs["value"].nbytes for c in model if c.type == "Constant" and c.attrs["value"].nbytes >= 1024)
    assert copied.copied == ((str(Path(f"{original}.data").resolve()), used),)
    np.testing.assert_allclose(_ort(copied.model), expected, atol=1e-4)
    (tmp_path / "linked").mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        linked = dump_onnx(edited, tmp_path / "linked" / "model.onnx", link=True)
    assert [(loc, how) for loc, _, how in linked.linked] == [("model.onnx.1.data", "hard link")]
    new_bytes = 2 * 2 * 4 * (SHAPE.width * 4 + 4 * SHAPE.width)  # A and B of q and v in two blocks
    assert new_bytes <= os.path.getsize(linked.data) < new_bytes + 16 * 4096
    assert linked.written < 0.2 * SHAPE.weight_bytes()
    np.testing.assert_allclose(_ort(linked.model), expected, atol=1e-4)
    (again,) = amanda.Session(amanda.load(linked.model)).run(["logits"], _feeds())
    np.testing.assert_allclose(again, expected, atol=1e-5)
    assert {k: v[1] for k, v in _digest(original.parent).items() if k in before} == {k: v[1] for k, v in before.items()}
    os.unlink(tmp_path / "linked" / "model.onnx.1.data")  # the module's other tests read the original with onnx


def test_new_data_never_overwrites_data_the_model_reads(original):
    """Dumping an edit over the original model's own name puts new tensors in a numbered data
    file; naming the read data file as the location is refused."""
    work = original.parent / "over"
    work.mkdir(exist_ok=True)
    for name in ("model.onnx", "model.onnx.data"):
        (work / name).write_bytes((original.parent / name).read_bytes())
    data = work / "model.onnx.data"
    stamp = data.stat().st_mtime_ns, hashlib.sha256(data.read_bytes()).hexdigest()
    edited = add_lora(amanda.load(work / "model.onnx"), rank=4)
    with pytest.raises(FormatError, match="'model.onnx.data' is a data file the model reads"):
        dump_onnx(edited, work / "model.onnx", location="model.onnx.data")
    report = dump_onnx(edited, work / "model.onnx")
    assert Path(report.data).name == "model.onnx.1.data" and report.referenced == ("model.onnx.data",)
    assert (data.stat().st_mtime_ns, hashlib.sha256(data.read_bytes()).hexdigest()) == stamp
    (expected,) = amanda.Session(edited).run(["logits"], _feeds())
    np.testing.assert_allclose(_ort(work / "model.onnx"), expected, atol=1e-4)


def test_inline_dumps_and_eager_loads_read_the_weights(original, tmp_path):
    """``external_data=False`` writes one self-contained file; ``lazy=False`` loads the values
    into memory, equal to a load of that file."""
    model = amanda.load(original)
    report = dump_onnx(model, tmp_path / "inline.onnx", external_data=False)
    assert report.data is None and sorted(os.listdir(tmp_path)) == ["inline.onnx"]
    np.testing.assert_array_equal(_ort(tmp_path / "inline.onnx"), _ort(original))
    eager = load_onnx(original, lazy=False)
    assert not is_mapped(eager.descendant(("model", "embed_tokens", "weight")).attrs["value"])
    assert eager == amanda.load(tmp_path / "inline.onnx") and eager != model


def test_a_file_changed_after_loading_is_refused(original, tmp_path):
    """Running, or dumping, a model whose data file changed since it was loaded raises a
    FormatError naming the tensor."""
    work = tmp_path / "m"
    work.mkdir()
    for name in ("model.onnx", "model.onnx.data"):
        (work / name).write_bytes((original.parent / name).read_bytes())
    model = amanda.load(work / "model.onnx")
    with open(work / "model.onnx.data", "r+b") as f:
        f.seek(8192)
        f.write(b"\1" * 64)
    with pytest.raises(FormatError, match=r"tensor '.*weight' keeps its data in .* changed on disk"):
        amanda.Session(model).run(["logits"], _feeds())
    with pytest.raises(FormatError, match="changed on disk"):
        dump_onnx(model, work / "again.onnx")


# -- the folder's safety rules ------------------------------------------------------------


def _one_tensor_model(folder, entries):
    tensor = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[16], data_location=TensorProto.EXTERNAL)
    for key, value in entries.items():
        tensor.external_data.add(key=key, value=value)
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])], [tensor])
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "w.bin").write_bytes(np.arange(16, dtype=np.float32).tobytes())
    (folder / "m.onnx").write_bytes(model.SerializeToString())
    return folder / "m.onnx"


@pytest.mark.parametrize(("entries", "message"), [
    ({"location": "/etc/passwd"}, "which is an absolute path"),
    ({"location": "../outside.bin"}, "which lies outside the model's folder"),
    ({"location": "link.bin"}, "which lies outside the model's folder"),
    ({"location": "missing.bin"}, "which cannot be read"),
    ({"location": "w.bin", "offset": "8"}, "run past the file's end"),
    ({"location": "w.bin", "length": "1000"}, "run past the file's end"),
    ({"location": "w.bin", "length": "32"}, "with length 32, but its dims and type take 64 bytes"),
    ({"location": "w.bin", "offset": "eight"}, "not an integer"),
    ({"location": "w.bin", "offset": "-4"}, "negative offset"),
])
def test_locations_are_resolved_inside_the_folder(tmp_path, entries, message):
    """An absolute location, one leaving the folder (``..`` or a symlink), a missing file or a
    range past the file's end raises FormatError naming the tensor, before anything is read."""
    (tmp_path / "outside.bin").write_bytes(np.ones(16, np.float32).tobytes())
    path = _one_tensor_model(tmp_path / "model", entries)
    os.symlink(tmp_path / "outside.bin", tmp_path / "model" / "link.bin")
    with pytest.raises(FormatError, match=f"m.onnx: tensor 'w' keeps its data in external file .*{message}") as info:
        load_onnx(path)
    assert info.value.path == "w"


def test_a_symlink_inside_the_folder_is_followed(tmp_path):
    """A location that is a symlink to another file of the model's folder reads that file."""
    path = _one_tensor_model(tmp_path, {"location": "alias.bin"})
    os.symlink(tmp_path / "w.bin", tmp_path / "alias.bin")
    value = load_onnx(path).child("w").attrs["value"]
    np.testing.assert_array_equal(value, np.arange(16, dtype=np.float32))
