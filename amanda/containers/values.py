"""Frozen attribute values: freezing, equality and hashing with arrays compared by value.

Attributes are pyrsistent maps whose values are frozen: lists become tuples, dicts
become pmaps, numpy scalars become 0-d arrays (so ``np.float64(1.5)`` keeps its dtype),
subclasses of ``int``/``float``/``str``/``bytes`` (an ``IntEnum``) become the plain value,
and numpy arrays become read-only arrays over an immutable ``bytes`` buffer, so that no
holder of a reference can make them writable again. Containers hand out fresh views of
their arrays (:func:`expose`), so setting ``.shape`` or ``.dtype`` on what a reader got
cannot change the container.

Equality is structural: floats are equal when they have the same value and sign (NaN
equals NaN, ``-0.0`` differs from ``0.0``), values of different types differ (``1`` is not
``1.0`` nor ``True``), arrays are equal when they have the same dtype, shape and bytes.

A weight kept in its file (a :class:`~amanda.containers.lazy.LazyTensor`) is stored as it is
and handed to readers as a read-only array over the file's memory map; it is compared by where
it lies, never by reading it (see ``amanda.containers.lazy``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from pyrsistent import PMap, pmap

from amanda.containers.lazy import LazyTensor, lazy_of
from amanda.containers.maps import map_of

_SCALARS = (str, int, float, bool, bytes, type(None))
_SCALAR_TYPES = frozenset(_SCALARS)


class ScalarMap(PMap):
    """A frozen attribute map whose values are all plain scalars (str, int, float, bool, bytes,
    None), as :func:`freeze_attrs` found while freezing it: a reader looking for arrays or
    graphs among attribute values can skip it by its type alone, without reading its values.
    It is a pmap in every other way; maps derived from it (``set``, ``update`` …) are plain
    pmaps again, read the slower way.

    >>> attrs = freeze_attrs({"axis": 1, "mode": "constant"})
    >>> type(attrs).__name__, attrs == {"axis": 1, "mode": "constant"}, type(attrs.set("w", 2)).__name__
    ('ScalarMap', True, 'PMap')
    """

    __slots__ = ()


def _scalar_map(frozen: PMap) -> ScalarMap:
    return ScalarMap(len(frozen), frozen._buckets)  # type: ignore[call-arg,attr-defined]  # shares the buckets



EMPTY: PMap = _scalar_map(pmap())
_PLAIN_BASES = (int, float, str, bytes)  # bool cannot be subclassed


def dtype_text(dtype: np.dtype) -> str:
    """The text a dtype is written as: its ``str`` (``'<f4'``), or its name when only the
    name reads back (``'bfloat16'`` of ml_dtypes); TypeError for dtypes neither gives back
    (structured dtypes, Python objects).

    >>> dtype_text(np.dtype("float32")), dtype_text(np.dtype(">i2"))
    ('<f4', '>i2')
    """
    text = _DTYPE_TEXT.get(dtype)
    if text is None:
        text = _dtype_text(dtype)
        _DTYPE_TEXT[dtype] = text
    return text


_DTYPE_TEXT: dict[np.dtype, str] = {}


def _dtype_text(dtype: np.dtype) -> str:
    if dtype.hasobject:
        raise TypeError("arrays and dtypes of Python objects cannot be stored in attributes")
    if dtype.itemsize == 0:
        raise TypeError(f"a dtype of zero item size ({dtype}) cannot be stored in attributes")
    for text in (dtype.str, dtype.name):
        try:
            if dtype_from_text(text) == dtype:
                return text
        except TypeError:
            continue
    raise TypeError(f"the dtype {dtype} cannot be written to YAML or JSON (structured dtype?)")


def dtype_from_text(text: str) -> np.dtype:
    """The dtype :func:`dtype_text` wrote; TypeError when ``text`` names none.

    >>> dtype_from_text("<i8")
    dtype('int64')
    """
    if not isinstance(text, str):
        raise TypeError(f"a dtype is written as a string, found {type(text).__name__}")
    try:
        return np.dtype(text)
    except TypeError:
        try:  # bfloat16, float8 …: registered with numpy once ml_dtypes is imported
            import ml_dtypes  # noqa: F401
        except ImportError:
            raise TypeError(f"unknown dtype {text!r}") from None
        try:
            return np.dtype(text)
        except TypeError:
            raise TypeError(f"unknown dtype {text!r}") from None


def _immutable_memory(array: np.ndarray) -> bool:
    base = array.base
    while isinstance(base, np.ndarray):
        base = base.base
    return type(base) is bytes


def freeze_array(array: np.ndarray) -> np.ndarray:
    """A read-only array with the same dtype, shape and values, over an immutable buffer.

    An array whose memory already is an immutable ``bytes`` object is shared through a new
    view; anything else is copied into one, so no outside reference can write into it.

    >>> frozen = freeze_array(np.arange(3))
    >>> frozen.flags.writeable, frozen.tolist()
    (False, [0, 1, 2])
    """
    dtype_text(array.dtype)  # refuse what could not be written
    if not array.flags.writeable and _immutable_memory(array):
        return array.view()
    # a view over the buffer's array: reshaping the base a reader can reach changes nothing
    return np.frombuffer(array.tobytes(), dtype=array.dtype).reshape(array.shape)


#: How deep lists and mappings may nest inside one attribute value. Every walk over attribute
#: values (hashing, equality, writing documents, mapping expressions) stays well inside Python's
#: recursion limit below this depth.
MAX_VALUE_DEPTH = 100


def freeze(value: Any, depth: int = 0) -> Any:
    """Freeze one attribute value (recursively); raise TypeError for what cannot be frozen,
    including lists and mappings nested more than ``MAX_VALUE_DEPTH`` levels deep."""
    if type(value) in _SCALAR_TYPES:
        return value
    if depth > MAX_VALUE_DEPTH:
        raise TypeError(f"attribute values may nest at most {MAX_VALUE_DEPTH} levels of lists and mappings")
    if isinstance(value, np.ndarray):
        # an array over a lazy tensor's map (what attrs handed out) stays that tensor, uncopied
        return (None if value.flags.writeable else lazy_of(value)) or freeze_array(value)
    if type(value) is LazyTensor:
        return value
    if isinstance(value, np.generic):
        # a 0-d array keeps the scalar's dtype through YAML and JSON
        return freeze_array(np.asarray(value))
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v, depth + 1) for v in value)
    if isinstance(value, Mapping):
        return _freeze_mapping(value, depth)
    if isinstance(value, np.dtype):
        dtype_text(value)
        return value
    # containers (for subgraph-valued attributes such as ONNX bodies) are immutable already
    if getattr(value, "_amanda_frozen", False):
        return value
    for base in _PLAIN_BASES:
        if isinstance(value, base):
            return base(value)  # type: ignore[arg-type]
    raise TypeError(f"cannot store a {type(value).__name__} as an attribute value")


def _freeze_mapping(value: Mapping, depth: int) -> PMap:
    if all(type(v) in _SCALAR_TYPES and type(k) is str and k.isascii() for k, v in value.items()):
        # a flat mapping of plain values (an imported node's metadata) needs no walk
        return value if isinstance(value, PMap) else map_of(value) if type(value) is dict else pmap(value)
    return map_of({_key(k): freeze(v, depth + 1) for k, v in value.items()})


def _key(key: Any) -> Any:
    if type(key) is not str:
        raise TypeError(f"attribute keys must be strings, found {type(key).__name__}")
    if not utf8_text(key):
        raise TypeError(f"attribute keys must be UTF-8 text (no lone surrogates), found {key!r}")
    return key


def utf8_text(text: str) -> bool:
    """Whether a string can be written as UTF-8 (YAML cannot write lone surrogates)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def freeze_attrs(attrs: Mapping[str, Any] | None) -> PMap:
    """Freeze a whole attribute mapping; empty mappings share one object."""
    if attrs is None:
        return EMPTY
    cls = attrs.__class__
    if cls is not dict and cls is not PMap and not isinstance(attrs, Mapping):  # before truth: arrays have none
        raise TypeError(f"attrs must be a mapping, found {type(attrs).__name__}")
    if not attrs:
        return EMPTY
    if type(attrs) is ArrayViews:
        return attrs._stored  # another container's attributes: frozen already
    if type(attrs) is dict:
        scalars = _SCALAR_TYPES
        for key, value in attrs.items():
            if type(value) not in scalars or type(key) is not str or not key.isascii():
                break
        else:
            return map_of(attrs, ScalarMap)
        return map_of({_key(k): freeze(v) for k, v in attrs.items()})
    elif type(attrs) is ScalarMap:
        return attrs
    elif isinstance(attrs, PMap) and all(
        type(v) in _SCALAR_TYPES and type(k) is str and k.isascii() for k, v in attrs.items()
    ):
        return _scalar_map(attrs)
    return pmap({_key(k): freeze(v) for k, v in attrs.items()})


class ArrayViews(Mapping):
    """A read-only mapping over stored attributes that hands out a fresh view of every array it
    holds on every read. Reading is lazy (nothing is copied up front); ``set``, ``update``,
    ``remove`` and ``discard`` return pmaps of views, as a pmap's would.

    Built over a container (whose stored attributes are frozen), never over a caller's
    mapping, so that a container given these views back can share the stored values.

    >>> from amanda import op
    >>> views = ArrayViews(op("Const", "c", attrs={"w": np.arange(2)}))
    >>> views["w"] is views["w"], views["w"].tolist()
    (False, [0, 1])
    """

    __slots__ = ("_stored",)

    def __init__(self, owner: Any) -> None:
        self._stored: PMap = owner._attrs

    def __getitem__(self, key: str) -> Any:
        return expose(self._stored[key])

    def get(self, key: str, default: Any = None) -> Any:
        value = self._stored.get(key, _MISSING)
        return default if value is _MISSING else expose(value)

    def __contains__(self, key: object) -> bool:
        return key in self._stored

    def __iter__(self) -> Any:
        return iter(self._stored)

    def __len__(self) -> int:
        return len(self._stored)

    def __repr__(self) -> str:
        return f"pmap({dict(self)!r})"

    def _pmap(self) -> PMap:
        return expose(self._stored)  # type: ignore[no-any-return]

    def set(self, key: str, value: Any) -> PMap:
        """A pmap of views with ``key`` set (as ``PMap.set``)."""
        return self._pmap().set(key, value)

    def update(self, *maps: Mapping) -> PMap:
        """A pmap of views updated with ``maps`` (as ``PMap.update``)."""
        return self._pmap().update(*maps)

    def remove(self, key: str) -> PMap:
        """A pmap of views without ``key`` (KeyError if absent, as ``PMap.remove``)."""
        return self._pmap().remove(key)

    def discard(self, key: str) -> PMap:
        """A pmap of views without ``key`` (as ``PMap.discard``)."""
        return self._pmap().discard(key)


_MISSING = object()


class _Stored:
    __slots__ = ("_attrs",)

    def __init__(self, attrs: PMap) -> None:
        self._attrs = attrs


def views_of(stored: PMap) -> Any:
    """The stored attributes of a port or an edge as their ``attrs`` hands them out: the pmap
    itself when it holds no array, else ArrayViews (a fresh read-only view per read)."""
    if not stored or not holds_arrays(stored):
        return stored
    return ArrayViews(_Stored(stored))


def holds_arrays(value: Any) -> bool:
    """Whether a frozen value holds an array anywhere (not counting nested containers)."""
    if type(value) in _SCALAR_TYPES or type(value) is ScalarMap:
        return False
    if isinstance(value, (np.ndarray, LazyTensor)):
        return True
    if isinstance(value, tuple):
        return any(type(v) not in _SCALAR_TYPES and holds_arrays(v) for v in value)
    if isinstance(value, Mapping):
        return any(type(v) not in _SCALAR_TYPES and holds_arrays(v) for v in value.values())
    return False


def expose(value: Any) -> Any:
    """A frozen value with every array replaced by a fresh view of it, to hand to a reader:
    setting ``.shape``, ``.dtype`` or ``.strides`` on a view leaves the stored array alone."""
    if type(value) in _SCALAR_TYPES:
        return value
    if isinstance(value, np.ndarray):
        return value.view()
    if type(value) is LazyTensor:
        return value.array()  # over the file's memory map: nothing is read until values are
    if isinstance(value, tuple) and holds_arrays(value):
        return tuple(expose(v) for v in value)
    if isinstance(value, PMap) and holds_arrays(value):
        return pmap({k: expose(v) for k, v in value.items()})
    return value


_TENSORS = (np.ndarray, LazyTensor)


def values_equal(a: Any, b: Any) -> bool:
    """Structural equality: arrays by dtype, shape and bytes, floats by value and sign with
    NaN equal to NaN, and values of different types unequal. A lazy tensor (or an array over
    its map) equals only a lazy tensor naming the same bytes of the same file.

    >>> values_equal(float("nan"), float("nan")), values_equal(0.0, -0.0), values_equal(1, 1.0)
    (True, False, False)
    """
    if a is b:
        return True
    if isinstance(a, _TENSORS) or isinstance(b, _TENSORS):
        return _tensors_equal(a, b)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return attrs_equal(a, b)
    if type(a) is not type(b):
        return False  # True == 1 == 1.0 in Python, but not as attributes
    if type(a) is float:
        return _floats_equal(a, b)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - exotic values that cannot compare are unequal
        return False


def _tensors_equal(a: Any, b: Any) -> bool:
    """Lazy tensors by where they lie (never by reading), arrays by dtype, shape and bytes."""
    lazy_a, lazy_b = lazy_of(a), lazy_of(b)
    if lazy_a is not None or lazy_b is not None:
        return lazy_a == lazy_b
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
        return False
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _floats_equal(a: float, b: float) -> bool:
    """Floats by value and sign, NaN equal to NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def attrs_equal(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equality of two attribute mappings, values as :func:`values_equal` compares them."""
    if a is b:
        return True
    if len(a) != len(b):
        return False
    for key, value in a.items():
        if key not in b or not values_equal(value, b[key]):
            return False
    return True


_NAN_HASH = hash("nan")


def value_hash(value: Any) -> int:
    """A hash consistent with :func:`values_equal`."""
    if isinstance(value, _TENSORS):
        # dtype and shape only: hashing the bytes of every weight would cost a pass over them
        return hash((value.dtype.str, value.shape))
    if isinstance(value, tuple):
        return hash(tuple(value_hash(v) for v in value))
    if isinstance(value, Mapping):
        return attrs_hash(value)
    if isinstance(value, bool):
        return hash(("bool", value))
    if type(value) is float and math.isnan(value):
        return _NAN_HASH  # hash(nan) is per object
    try:
        return hash(value)
    except TypeError:
        return hash(type(value).__name__)


def attrs_hash(attrs: Mapping[str, Any]) -> int:
    """Order-independent hash of an attribute mapping."""
    if not attrs:
        return 0
    return hash(frozenset((k, value_hash(v)) for k, v in attrs.items()))


def thaw(value: Any) -> Any:
    """Plain Python structures from frozen ones (tuples -> lists, pmaps -> dicts); arrays stay."""
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    return value
