"""Lazy tensors: compared by where they lie, read through a read-only map, refused once their
file changed."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from amanda.containers.container import op
from amanda.containers.lazy import LazyTensor, is_mapped, lazy_of, stamp_of
from amanda.containers.values import freeze, values_equal
from amanda.errors import FormatError


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(np.arange(64, dtype=np.float32).tobytes())
    return path


def _lazy(path, offset=0, shape=(4, 4), name="w"):
    return LazyTensor(stamp_of(path), offset, np.float32, shape, name=name)


def test_values_come_from_the_file_read_only(data):
    """A lazy tensor's array holds the file's bytes at its offset and cannot be made writable."""
    lazy = _lazy(data, offset=64)
    array = lazy.array()
    np.testing.assert_array_equal(array, np.arange(16, 32, dtype=np.float32).reshape(4, 4))
    assert not array.flags.writeable and is_mapped(array)
    with pytest.raises(ValueError):
        array.setflags(write=True)
    assert np.asarray(lazy).sum() == sum(range(16, 32))
    assert (lazy.size, lazy.ndim, lazy.nbytes) == (16, 2, 64)


def test_equality_and_hash_follow_the_source_without_reading(data):
    """Equal lazy tensors name the same bytes (the name does not count); an array in memory with
    the same values is not equal to one; arrays over the map count as their tensor."""
    a, b = _lazy(data, name="a"), _lazy(data, name="b")
    assert a == b and hash(a) == hash(b)
    assert a != _lazy(data, offset=4) and a != _lazy(data, shape=(16,))
    assert a != LazyTensor(stamp_of(data), 0, np.int32, (4, 4))
    in_memory = np.arange(16, dtype=np.float32).reshape(4, 4)
    assert not values_equal(a, in_memory) and not values_equal(in_memory, a)
    assert values_equal(a, b.array()) and values_equal(a.array(), b.array())
    assert lazy_of(a.array()) == a and lazy_of(a.array().T) is None  # not contiguous: not a tensor of the file


def test_freezing_keeps_lazy_tensors_and_arrays_over_their_map(data):
    """An op keeps a lazy tensor as it is, hands out an array over the map, and given that array
    back stores the same lazy tensor (nothing copied)."""
    lazy = _lazy(data)
    c = op("Constant", "w", outputs=["output"], attrs={"value": lazy})
    assert c._attrs["value"] is lazy
    handed = c.attrs["value"]
    assert is_mapped(handed)
    again = op("Constant", "w2", outputs=["output"], attrs={"value": handed})
    assert type(again._attrs["value"]) is LazyTensor and again._attrs["value"] == lazy
    assert freeze(handed) == lazy
    assert c.with_attrs(note=1).attrs["value"].sum() == handed.sum()


@pytest.mark.parametrize("change", ["append", "touch", "replace", "remove"])
def test_a_changed_file_is_refused(data, change):
    """A file grown, re-timed, replaced by another or removed after the tensor was made raises
    FormatError naming the tensor, instead of reading other bytes."""
    lazy = _lazy(data)
    if change == "append":
        with open(data, "ab") as f:
            f.write(b"\0" * 4)
    elif change == "touch":
        st = os.stat(data)
        os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    elif change == "replace":
        other = data.with_name("other.bin")
        other.write_bytes(np.ones(64, np.float32).tobytes())
        os.replace(other, data)
    else:
        data.unlink()
    with pytest.raises(FormatError, match="tensor 'w' keeps its data in .*w.bin.*since the model was loaded") as info:
        lazy.array()
    assert info.value.path == "w"
    with pytest.raises(FormatError):
        lazy.check()


def test_pickles_by_reference_and_empty_tensors_need_no_map(data):
    """A pickled lazy tensor comes back equal (by source); a zero-size one reads as empty."""
    lazy = _lazy(data)
    assert pickle.loads(pickle.dumps(lazy)) == lazy
    empty = LazyTensor(stamp_of(data), 256, np.float32, (0, 3))
    assert empty.array().shape == (0, 3) and not empty.array().flags.writeable
    assert "w.bin" in repr(lazy) and "'w'" in repr(lazy)
    with pytest.raises(AttributeError):
        lazy.offset = 3  # type: ignore[misc]
