"""Weights paired by uid survive wrapping, editing and consolidation (challenge C7); by path
they pair with a model built again; unreadable files are FormatErrors."""

import numpy as np
import pytest
from hypothesis import given

import amanda
from amanda import FormatError, chain, consolidate, edit, load_weights, op, save_weights
from tests.strategies import check_invariants, nested_containers, snapshot


def model():
    w1 = op("Dense", "d1", ["x"], ["y"], {"kernel": np.zeros((4, 3), np.float32), "bias": np.zeros(3, np.float32)})
    w2 = op("Dense", "d2", ["x"], ["y"], {"kernel": np.zeros((3, 2), np.float32)})
    return chain(w1, w2, name="body")


def test_trained_weights_find_their_ops_after_editing(tmp_path):
    """Weights saved from a trained model load into an edited, consolidated version of it."""
    base = model()
    trained = amanda.with_attrs(base, [("d1",)], kernel=np.full((4, 3), 2.0, np.float32))
    path = tmp_path / "w.npz"
    keys = save_weights(trained, path)
    assert len(keys) == 3
    edited = consolidate(edit(base).add(op("Log", "log", ["x"], [])).connect("body/d1:y", "log:x").build())
    loaded = load_weights(edited, path)
    kernel = loaded.container.child("d1").attrs["kernel"]
    assert kernel[0, 0] == 2.0 and not kernel.flags.writeable
    assert loaded.unmatched == () and loaded.missing == () and loaded.mismatched == ()
    assert edited.child("d1").attrs["kernel"][0, 0] == 0.0


def test_unmatched_missing_and_mismatched_are_reported(tmp_path):
    """Keys without a uid, arrays the file lacks and shape mismatches are reported, not loaded."""
    path = tmp_path / "w.npz"
    save_weights(model(), path)
    other = chain(op("Dense", "d1", ["x"], ["y"], {"kernel": np.zeros((1,), np.float32)}), name="o")
    result = load_weights(other, path)
    assert len(result.unmatched) == 3 and len(result.missing) == 1
    same_uid = model()
    reshaped = amanda.with_attrs(same_uid, [("d2",)], kernel=np.zeros((5, 5), np.float32))
    save_weights(same_uid, path)
    assert len(load_weights(reshaped, path).mismatched) == 1


def test_bad_weights_file_is_a_format_error(tmp_path):
    """A file that is not an npz archive raises FormatError naming it."""
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(FormatError, match="bad.npz"):
        load_weights(model(), bad)


@given(nested_containers())
def test_weights_round_trip_never_modifies(pair):
    """save then load puts back equal arrays and leaves the model unchanged."""
    import tempfile

    _, m = pair
    before = snapshot(m)
    with tempfile.TemporaryDirectory() as folder:
        save_weights(m, f"{folder}/w.npz")
        result = load_weights(m, f"{folder}/w.npz")
    assert result.container == m and result.unmatched == () and result.missing == ()
    assert snapshot(m) == before


def test_a_model_built_again_pairs_by_path(tmp_path):
    """A model rebuilt from code (new uids) pairs with nothing by uid and with every op by path."""
    trained = amanda.with_attrs(model(), [("d1",)], kernel=np.full((4, 3), 3.0, np.float32))
    path = tmp_path / "w.npz"
    save_weights(trained, path)
    rebuilt = model()
    by_uid = load_weights(rebuilt, path)
    assert len(by_uid.unmatched) == 3 and by_uid.container is rebuilt
    by_path = load_weights(rebuilt, path, by="path")
    assert by_path.unmatched == () and by_path.missing == () and by_path.mismatched == ()
    np.testing.assert_array_equal(by_path.container.child("d1").attrs["kernel"], np.full((4, 3), 3.0, np.float32))
    assert rebuilt.child("d1").attrs["kernel"].sum() == 0


def test_pairing_by_path_reports_what_did_not_pair(tmp_path):
    """By path, entries at absent paths are unmatched, arrays the file lacks are missing, and
    shape changes are mismatched, each named by path and attribute."""
    path = tmp_path / "w.npz"
    save_weights(model(), path)
    other = chain(
        op("Dense", "d1", ["x"], ["y"], {"kernel": np.zeros((9, 9), np.float32), "bias": np.ones(3, np.float32)}),
        op("Dense", "d3", ["x"], ["y"], {"kernel": np.zeros((3, 2), np.float32)}),
        name="body",
    )
    result = load_weights(other, path, by="path")
    assert result.unmatched == ("d2::kernel",)
    assert result.missing == ("d3::kernel",)
    assert result.mismatched == ("d1::kernel",)
    assert result.container.child("d1").attrs["bias"].sum() == 0 and other.child("d1").attrs["bias"].sum() == 3


def test_only_existing_array_attributes_are_loaded_unless_asked(tmp_path):
    """An array for an attribute the op lacks is unmatched unless add_missing=True; an
    attribute holding a non-array value (a namespace) is never replaced."""
    m = chain(op("Dense", "d1", ["x"], ["y"], {"kernel": np.zeros(2, np.float32)}), name="body")
    m = amanda.with_attrs(m, [("d1",)], namespace="amanda/onnx/17")
    uid = m.child("d1").uid
    path = tmp_path / "w.npz"
    np.savez(path, **{f"{uid}::kernel": np.ones(2, np.float32), f"{uid}::extra": np.ones(1),
                      f"{uid}::namespace": np.array([7])})
    result = load_weights(m, path)
    assert result.unmatched == (f"{uid}::extra", f"{uid}::namespace")
    assert result.container.child("d1").attrs["kernel"].sum() == 2
    assert "extra" not in result.container.child("d1").attrs
    added = load_weights(m, path, add_missing=True)
    assert added.unmatched == (f"{uid}::namespace",)
    assert added.container.child("d1").attrs["extra"].tolist() == [1.0]
    assert added.container.child("d1").attrs["namespace"] == "amanda/onnx/17"


def _write_bad(kind, target, good):
    if kind == "npy":
        np.save(target.with_suffix(".npy"), np.ones(3))
        target.with_suffix(".npy").rename(target)
    elif kind == "object":
        np.savez(target, a=np.array([object()], dtype=object))
    else:
        data = good.read_bytes()
        blob = {"empty": b"", "truncated": data[: len(data) // 2], "text": b"weights: 1\n",
                "crc": data[:60] + bytes(40) + data[100:]}[kind]
        target.write_bytes(blob)


@pytest.mark.parametrize("kind", ["empty", "truncated", "text", "crc", "npy", "object"])
def test_unreadable_weights_files_raise_format_error_naming_the_file(tmp_path, kind):
    """Empty, truncated, corrupt, non-npz, .npy and pickled-object files raise FormatError naming the file."""
    good = tmp_path / "good.npz"
    save_weights(model(), good)
    bad = tmp_path / f"{kind}.npz"
    _write_bad(kind, bad, good)
    with pytest.raises(FormatError, match=f"{kind}.npz"):
        load_weights(model(), bad)


def test_pairing_by_path_needs_recorded_paths(tmp_path):
    """A file without recorded paths cannot pair by path (FormatError), and `by` is checked."""
    m = model()
    path = tmp_path / "w.npz"
    np.savez(path, **{f"{m.child('d1').uid}::kernel": np.ones((4, 3), np.float32)})
    assert load_weights(m, path).container.child("d1").attrs["kernel"].sum() == 12
    with pytest.raises(FormatError, match="records no paths"):
        load_weights(m, path, by="path")
    with pytest.raises(amanda.AmandaError, match="one of"):
        load_weights(m, path, by="name")


def _rebuilt(node):
    """The same model built again: equal structure, new uids everywhere."""
    return amanda.Container(node.type, node.name, inputs=node.inputs, outputs=node.outputs, children=[_rebuilt(c) for c in node.children],
                            edges=node.edges, tombstones=node.tombstones, attrs=node.attrs, uid=None, controls=node.controls)


def _trained(m):
    """Every array attribute changed (same dtype and shape)."""
    paths = [p for p, n, _ in amanda.walk(m) if any(isinstance(v, np.ndarray) for v in n.attrs.values())]

    def train(node):
        return node.with_attrs(**{k: np.asarray(~v if v.dtype == bool else v + 1) for k, v in node.attrs.items()
                                  if isinstance(v, np.ndarray)})

    return amanda.replace(m, paths, train) if paths else m


@given(nested_containers())
def test_weights_pair_by_path_with_a_rebuilt_model(pair):
    """Arrays saved from a trained model load by path into the model built again (new uids),
    land on the op at the same path, leave the input unchanged and satisfy the invariants."""
    import tempfile

    _, m = pair
    trained, fresh = _trained(m), _rebuilt(m)
    before = snapshot(fresh)
    with tempfile.TemporaryDirectory() as folder:
        save_weights(trained, f"{folder}/w.npz")
        result = load_weights(fresh, f"{folder}/w.npz", by="path")
    assert snapshot(fresh) == before
    assert result.unmatched == () and result.missing == () and result.mismatched == ()
    check_invariants(result.container)
    want = {p: n.attrs for p, n, _ in amanda.walk(trained)}
    for path, node, _ in amanda.walk(result.container):
        for key, value in node.attrs.items():
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(value, want[path][key])
                assert value.dtype == want[path][key].dtype


@pytest.mark.parametrize("member, content", [
    ("x.npy", b"\x93NUMPY\x01\x00\x10\x00{'descr': '<f4', "),  # a header cut short
    ("uid::kernel", b"raw bytes, not an array"),  # a member without the .npy suffix
])
def test_malformed_archive_members_raise_format_error(tmp_path, member, content):
    """An archive whose member is not a readable .npy array raises FormatError naming the file
    (numpy's header parser raised TokenError, a raw member gave bytes)."""
    import zipfile

    bad = tmp_path / "members.npz"
    with zipfile.ZipFile(bad, "w") as archive:
        archive.writestr(member, content)
    with pytest.raises(FormatError, match="members.npz"):
        load_weights(model(), bad)


def _compressed(path, entries):
    """An .npz of members ``key -> (dtype, shape)`` all zeros, deflated and written in chunks (a
    small file that decompresses to their full size)."""
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for key, (dtype, shape) in entries.items():
            with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array_header_1_0(member, {"descr": np.dtype(dtype).str, "fortran_order": False,
                                                              "shape": shape})
                left = int(np.prod(shape)) * np.dtype(dtype).itemsize
                chunk = bytes(1 << 20)
                while left:
                    member.write(chunk[:min(left, len(chunk))])
                    left -= min(left, len(chunk))


def _peak(call):
    """What ``call()`` returns and the peak of the memory Python and numpy allocated meanwhile."""
    import tracemalloc

    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_loading_decompresses_only_the_arrays_it_loads(tmp_path):
    """A small file holding a 64 MB array that pairs with nothing, or pairs with an array of
    another shape, costs a few MB to load (its header is read, not its data); an array that
    does pair is read, and only it."""
    m = model()
    uid = m.child("d1").uid
    path = tmp_path / "bomb.npz"
    _compressed(path, {"nobody::kernel": ("float32", (1 << 24,)), f"{uid}::kernel": ("float32", (1 << 24,)),
                       f"{uid}::bias": ("float32", (3,))})
    assert path.stat().st_size < 1 << 20
    result, peak = _peak(lambda: load_weights(m, path))
    assert peak < 8 << 20, peak
    assert result.unmatched == ("nobody::kernel",) and result.mismatched == (f"{uid}::kernel",)
    assert result.container.child("d1").attrs["bias"].tolist() == [0, 0, 0]


def test_arrays_past_a_bound_or_larger_than_their_member_are_format_errors(tmp_path, monkeypatch):
    """An array added with add_missing past MAX_ADDED_BYTES, a paths index past
    MAX_INDEX_BYTES, and a header that promises more data than its member holds are
    FormatErrors naming the file, raised before the data is read."""
    from amanda.containers import weights

    m = model()
    uid = m.child("d1").uid
    path = tmp_path / "big.npz"
    _compressed(path, {f"{uid}::extra": ("float64", (1 << 20,))})
    monkeypatch.setattr(weights, "MAX_ADDED_BYTES", 1 << 20)
    (result, peak) = _peak(lambda: load_weights(m, path))  # not added: not read
    assert result.unmatched == (f"{uid}::extra",) and peak < 4 << 20
    with pytest.raises(FormatError, match=r"big.npz.*8388608 bytes, more than the limit of 1048576"):
        load_weights(m, path, add_missing=True)
    saved = tmp_path / "w.npz"
    save_weights(m, saved)
    monkeypatch.setattr(weights, "MAX_INDEX_BYTES", 16)
    assert load_weights(m, saved).unmatched == ()  # pairing by uid does not read the index
    with pytest.raises(FormatError, match="w.npz.*__amanda_paths__"):
        load_weights(m, saved, by="path")
    import zipfile

    lying = tmp_path / "lying.npz"
    with zipfile.ZipFile(lying, "w") as archive:
        with archive.open(f"{uid}::kernel.npy", "w") as member:
            np.lib.format.write_array_header_1_0(member, {"descr": "<f4", "fortran_order": False,
                                                          "shape": (1 << 40,)})
            member.write(bytes(48))
    with pytest.raises(FormatError, match=r"lying.npz.*takes"):
        load_weights(m, lying)


def test_a_weights_file_whose_paths_nest_too_deep_is_a_format_error(tmp_path):
    """A saved path entry is read by the one plain-data loader, under its depth guard: JSON
    nested 5,000 levels (json.loads raised RecursionError) is a FormatError naming the file."""
    deep = tmp_path / "deep.npz"
    np.savez(deep, __amanda_paths__=np.array([["k", "[" * 5000 + "]" * 5000]]), k=np.ones(1))
    with pytest.raises(FormatError, match="deep.npz"):
        load_weights(model(), deep, by="path")
