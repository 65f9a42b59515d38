"""Namespaces (versioned vocabularies of op schemas) and the registry that names them.

Names are hierarchical: ``amanda/tensorflow/1.13.1`` lies inside ``amanda/tensorflow`` and
``amanda/onnx/17`` inside ``amanda/onnx``. Asking the registry for a name that is not itself
registered but has versioned children (``amanda/onnx``) gives the newest child. Shipped
vocabularies are registered as *providers*: their namespaces are built on first request and
cached, so importing amanda does not build every ONNX opset.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from amanda.containers.arguments import brief, expect_flag, expect_str, shown
from amanda.errors import ArgumentError, SchemaError
from amanda.keywords import keyword_only_after
from amanda.namespaces.schema import FrozenMap, OpSchema, members, suggest

__all__ = [
    "Namespace",
    "known_namespaces",
    "namespace",
    "register_namespace",
    "register_provider",
    "unregister_namespace",
]

_VERSION = re.compile(r"^\d+(\.\d+)*$")


def version_key(version: Any) -> tuple[int, ...] | None:
    """Sort key of a version like ``17`` or ``'1.13.1'``, or None when it is not one.

    >>> version_key("1.13.1"), version_key(17), version_key("beta")
    ((1, 13, 1), (17,), None)
    """
    text = str(version)
    return tuple(int(p) for p in text.split(".")) if _VERSION.match(text) else None


def _enclosing(name: str) -> str | None:
    return name.rsplit("/", 1)[0] if "/" in name else None


@keyword_only_after(1)
@dataclass(frozen=True, slots=True)
class Namespace:
    """A named vocabulary: op type -> ``OpSchema``.

    ``parent`` names the namespace an unknown op type is looked up in when ``fallback`` is
    true (by default the enclosing name: ``amanda/tf/1.13.1`` -> ``amanda/tf``). ``version``
    defaults to the last name component when it looks like a version. ``retired`` maps op types
    that are no longer valid here to a note said in errors (e.g. ONNX ops deprecated at this
    opset).

    >>> ns = Namespace("demo/1", schemas=[OpSchema("Add", inputs=["A", "B"], outputs=["C"])])
    >>> ns.version, "Add" in ns, ns.schema("Add").input_names
    ('1', True, ('A', 'B'))
    """

    name: str
    _: KW_ONLY
    schemas: Mapping[str, OpSchema] = field(default_factory=FrozenMap)
    parent: str | None = None
    fallback: bool = False
    source: str = ""
    version: str | int | None = None
    retired: Mapping[str, str] = field(default_factory=FrozenMap)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or self.name.strip("/") != self.name:
            raise SchemaError.at("namespace", "a name like 'amanda/onnx/17'", brief(self.name))
        items = members(self.schemas, (self.name, "schemas"), OpSchema, "a list or mapping of OpSchemas")
        schemas = FrozenMap((s.type, s) for s in items)
        if isinstance(self.schemas, Mapping):
            for key, schema in self.schemas.items():
                if key != schema.type:
                    raise SchemaError.at((self.name, key), "the key to equal the schema's type",
                                         repr(schema.type))
        elif len(schemas) != len(list(items)):
            raise SchemaError.at(self.name, "one schema per op type", "duplicate op types")
        object.__setattr__(self, "schemas", schemas)
        if not isinstance(self.retired, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.retired.items()):
            raise SchemaError.at((self.name, "retired"), "a mapping of op types to notes (strings)",
                                 shown(self.retired))
        object.__setattr__(self, "retired", FrozenMap(self.retired))
        for key, kind, expected in (("fallback", bool, "True or False"), ("source", str, "a string"),
                                    ("parent", (str, type(None)), "a namespace name or None"),
                                    ("version", (str, int, type(None)), "a version (str or int) or None")):
            if not isinstance(getattr(self, key), kind):
                raise SchemaError.at((self.name, key), expected, shown(getattr(self, key)))
        if self.version is None:
            last = self.name.rsplit("/", 1)[-1]
            object.__setattr__(self, "version", last if version_key(last) else None)
        if self.fallback and self.parent is None:
            parent = _enclosing(self.name)
            if parent is None:
                raise SchemaError.at(self.name, "a parent namespace to fall back to",
                                     "fallback without a parent or an enclosing name")
            object.__setattr__(self, "parent", parent)

    @property
    def op_types(self) -> tuple[str, ...]:
        """The op types defined here (not counting the parent's), in order."""
        return tuple(self.schemas)

    def __contains__(self, op_type: object) -> bool:
        """Whether ``op_type`` is valid here, counting the parent when fallback is allowed."""
        if not isinstance(op_type, str):
            return False
        try:
            self.schema(op_type)
        except SchemaError:
            return False
        return True

    def __len__(self) -> int:
        return len(self.schemas)

    def __repr__(self) -> str:
        return f"Namespace({self.name!r}, {len(self.schemas)} op types)"

    def schema(self, op_type: str) -> OpSchema:
        """The schema of ``op_type``; falls back to the parent only when ``fallback`` is set.

        Raises ``SchemaError`` naming the namespace and op type, with close matches.

        >>> Namespace("demo/1", schemas=[OpSchema("MatMul")]).schema("Matmul")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        amanda.errors.SchemaError: at demo/1/Matmul: ... (did you mean 'MatMul'?)
        """
        if not isinstance(op_type, str):
            raise SchemaError.at(self.name, "an op type name such as 'MatMul'", brief(op_type))
        seen: list[str] = []
        ns: Namespace = self
        while True:
            found = ns.schemas.get(op_type)
            if found is not None:
                return found
            seen.append(ns.name)
            if op_type in ns.retired or not ns.fallback or ns.parent is None:
                break
            if ns.parent in seen:
                raise SchemaError.at(self.name, "an acyclic parent chain",
                                     " -> ".join([*seen, ns.parent]))
            ns = namespace(ns.parent)
        self._unknown(op_type, seen, ns)
        raise AssertionError("unreachable")

    def _unknown(self, op_type: str, seen: list[str], last: Namespace) -> None:
        choices: list[str] = []
        for name in seen:
            choices += namespace(name).op_types if name != self.name else self.op_types
        hint = last.retired.get(op_type, "") or suggest(op_type, choices)
        where = self.name if len(seen) == 1 else " -> ".join(seen)
        raise SchemaError.at((self.name, op_type), f"an op type of namespace {where}",
                             repr(op_type), hint)


# --- the registry -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Provider:
    prefix: str
    names: Callable[[], Iterable[str]]
    load: Callable[[str], Namespace]


_lock = threading.RLock()
_registered: dict[str, Namespace] = {}
_providers: list[_Provider] = []


def register_namespace(ns: Namespace, *, replace: bool = False) -> Namespace:
    """Register ``ns`` under its name and return it.

    Registering an equal namespace again is a no-op; a different one needs ``replace=True``.

    >>> ns = register_namespace(Namespace("doctest/reg/1", schemas=[OpSchema("Id")]))
    >>> namespace("doctest/reg") is ns
    True
    >>> unregister_namespace("doctest/reg/1")
    """
    if not isinstance(ns, Namespace):
        raise ArgumentError.at("ns", "a Namespace", shown(ns))
    expect_flag(replace, "replace")
    with _lock:
        old = _registered.get(ns.name)
        if old is None and not replace and _provided(ns.name):
            old = namespace(ns.name)
        if old is not None and old != ns and not replace:
            raise SchemaError.at(ns.name, "a namespace name not registered yet",
                                 "one already registered with other schemas",
                                 "pass replace=True to replace it")
        _registered[ns.name] = ns
    return ns


def unregister_namespace(name: str) -> None:
    """Forget a registered namespace (a shipped one is rebuilt on its next request).

    >>> unregister_namespace("doctest/never-registered")
    """
    expect_str(name, "name", "a namespace name (a non-empty string)")
    with _lock:
        _registered.pop(name, None)


def register_provider(prefix: str, names: Callable[[], Iterable[str]],
                      load: Callable[[str], Namespace]) -> None:
    """Register a lazy source of namespaces whose names start with ``prefix``.

    ``names()`` lists what it can build (it is called only when a lookup needs it) and
    ``load(name)`` builds one; the result is cached in the registry.

    >>> register_provider("doctest/lazy", lambda: ["doctest/lazy/2"],
    ...                   lambda name: Namespace(name, schemas=[OpSchema("Neg")]))
    >>> namespace("doctest/lazy").op_types
    ('Neg',)
    """
    expect_str(prefix, "prefix", "a namespace name prefix (a non-empty string)")
    for where, fn in (("names", names), ("load", load)):
        if not callable(fn):
            raise ArgumentError.at(where, "a function", shown(fn))
    with _lock:
        _providers.append(_Provider(prefix, names, load))


def _provider_for(name: str) -> _Provider | None:
    for provider in _providers:
        if name.startswith(provider.prefix) and name in set(provider.names()):
            return provider
    return None


def _provided(name: str) -> bool:
    return _provider_for(name) is not None


def _children(name: str) -> list[str]:
    prefix = name + "/"
    candidates = [n for n in _registered if n.startswith(prefix)]
    for provider in _providers:
        if provider.prefix.startswith(name) or name.startswith(provider.prefix):
            candidates += [n for n in provider.names() if n.startswith(prefix)]
    return [n for n in set(candidates) if version_key(n[len(prefix):]) is not None]


def known_namespaces() -> tuple[str, ...]:
    """Every registered or shipped namespace name, sorted (shipped ones are not built).

    >>> "amanda/onnx/17" in known_namespaces()
    True
    """
    with _lock:
        names = set(_registered)
        for provider in _providers:
            names.update(provider.names())
    return tuple(sorted(names, key=_sort_key))


def _sort_key(name: str) -> tuple[Any, ...]:
    head, _, last = name.rpartition("/")
    key = version_key(last)
    return (head, 0, key, "") if key is not None else (head, 1, (), last)


def _summary(names: Iterable[str]) -> str:
    """Collapse runs of integer versions: amanda/onnx/{1..28}."""
    groups: dict[str, list[int]] = {}
    others: list[str] = []
    for name in names:
        head, _, last = name.rpartition("/")
        if head and last.isdigit():
            groups.setdefault(head, []).append(int(last))
        else:
            others.append(name)
    parts = others
    for head, versions in groups.items():
        versions.sort()
        if len(versions) > 2 and versions == list(range(versions[0], versions[-1] + 1)):
            parts.append(f"{head}/{{{versions[0]}..{versions[-1]}}}")
        else:
            parts += [f"{head}/{v}" for v in versions]
    return ", ".join(sorted(parts)) or "none"


def namespace(name: str | Namespace) -> Namespace:
    """The namespace called ``name``; a name with versioned children means the newest one.

    Raises ``SchemaError`` naming the unknown namespace and listing the known ones.

    >>> namespace("amanda/onnx/11").schema("ReduceSum").input_names
    ('data',)
    >>> namespace("amanda/nonesuch")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    amanda.errors.SchemaError: at amanda/nonesuch: expected a known namespace ...
    """
    if isinstance(name, Namespace):
        return name
    if not isinstance(name, str):
        raise SchemaError.at("namespace", "a namespace name such as 'amanda/onnx/17'", brief(name))
    with _lock:
        found = _registered.get(name)
        if found is not None:
            return found
        provider = _provider_for(name) if isinstance(name, str) else None
        if provider is not None:
            _registered[name] = provider.load(name)
            return _registered[name]
        children = _children(name) if isinstance(name, str) else []
        if children:
            newest = max(children, key=lambda n: version_key(n.rsplit("/", 1)[1]) or ())
            return namespace(newest)
        known = known_namespaces()
    raise SchemaError.at(name, f"a known namespace ({_summary(known)})", brief(name),
                         _namespace_hint(str(name), known))


def _namespace_hint(name: str, known: tuple[str, ...]) -> str:
    head = _enclosing(name)
    versions = [n for n in known if _enclosing(n) == head]
    if head is not None and versions:
        newest = max(versions, key=_sort_key)
        return f"{head} has {_summary(versions)}; the newest is {newest}"
    return suggest(name, sorted({*known, *(h for h in map(_enclosing, known) if h)}))
