"""Weights paired by uid survive wrapping, editing and consolidation (challenge C7)."""

import numpy as np
import pytest
from hypothesis import given

import amanda
from amanda import FormatError, chain, consolidate, edit, load_weights, op, save_weights
from tests.strategies import nested_containers, snapshot


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
