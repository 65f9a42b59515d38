"""The ONNX vocabularies: one namespace per opset of each ONNX domain.

Naming: the default domain (``''``, also spelled ``ai.onnx``) gives ``amanda/onnx/<N>``; any
other domain drops a leading ``ai.`` and turns dots into dashes, so ``ai.onnx.ml`` gives
``amanda/onnx-ml/<N>`` and ``ai.onnx.preview.training`` gives
``amanda/onnx-preview-training/<N>``. Opset N holds, for each op type, its newest schema with
``since_version <= N``; an op whose newest such schema is deprecated (``Upsample`` from 10,
``Scatter`` from 11 …) is left out and listed in ``Namespace.retired``.

The source of truth is ``onnx.defs`` when onnx is importable, else the file
``data/onnx_schemas.json.gz`` shipped with amanda and written by ``tools/gen_onnx_vocabulary.py``
(each (domain, op type, since_version) schema once, as gzip'ed JSON). Both give equal schemas.
ONNX's long op docs are left out of both to keep the file small; ``onnx.defs`` has them.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amanda.errors import FormatError, SchemaError
from amanda.namespaces.namespace import Namespace, register_provider
from amanda.namespaces.schema import AttrSchema, FrozenMap, OpSchema, PortSchema
from amanda.namespaces.schema_io import op_schema_from_data, op_schema_to_data
from amanda.safe_load import load_text

__all__ = [
    "DATA_FILE",
    "OnnxVocabulary",
    "namespace_names",
    "onnx_domain_of",
    "onnx_domains",
    "onnx_namespace_name",
    "onnx_opset",
    "onnx_vocabulary",
    "vocabulary_from_file",
    "vocabulary_from_onnx",
    "vocabulary_to_bytes",
]

DATA_FILE = Path(__file__).parent / "data" / "onnx_schemas.json.gz"
FORMAT = "amanda-onnx-schemas/1"
PREFIX = "amanda/onnx"


@dataclass(frozen=True, slots=True)
class OnnxVocabulary:
    """Every schema of every ONNX domain, with each domain's opset range."""

    onnx_version: str
    domains: Mapping[str, tuple[int, int]]
    schemas: tuple[OpSchema, ...]
    source: str

    def names(self) -> tuple[str, ...]:
        """The namespace names this vocabulary provides."""
        return namespace_names(self.domains)


def namespace_names(domains: Mapping[str, tuple[int, int]]) -> tuple[str, ...]:
    """The namespace name of every opset of every domain in ``domains``.

    >>> namespace_names({"ai.onnx.ml": (1, 2)})
    ('amanda/onnx-ml/1', 'amanda/onnx-ml/2')
    """
    return tuple(onnx_namespace_name(d, v) for d, (lo, hi) in domains.items() for v in range(lo, hi + 1))


def onnx_namespace_name(domain: str, version: int) -> str:
    """The amanda namespace of opset ``version`` of ONNX ``domain``.

    >>> onnx_namespace_name("", 17), onnx_namespace_name("ai.onnx.ml", 3)
    ('amanda/onnx/17', 'amanda/onnx-ml/3')
    """
    base = "onnx" if domain in ("", "ai.onnx") else domain.removeprefix("ai.").replace(".", "-")
    return f"amanda/{base}/{version}"


def onnx_domain_of(name: str, domains: Mapping[str, Any]) -> tuple[str, int] | None:
    """The (ONNX domain, opset) of an amanda namespace name, or None.

    >>> onnx_domain_of("amanda/onnx-ml/2", {"": 0, "ai.onnx.ml": 0})
    ('ai.onnx.ml', 2)
    """
    head, _, last = name.rpartition("/")
    if not last.isdigit():
        return None
    for domain in domains:
        if onnx_namespace_name(domain, 0).rpartition("/")[0] == head:
            return domain, int(last)
    return None


# --- from onnx.defs ---------------------------------------------------------------------------

def _default(attr: Any) -> Any:
    from onnx import AttributeProto, TensorProto, helper, numpy_helper

    proto = attr.default_value
    if proto.type == AttributeProto.UNDEFINED:
        return None
    value = helper.get_attribute_value(proto)
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list):
        if all(isinstance(v, TensorProto) for v in value) and value:
            return [numpy_helper.to_array(v) for v in value]
        return [v.decode("utf-8") if isinstance(v, bytes) else v for v in value]
    if isinstance(value, (int, float)):
        return value
    raise SchemaError.at(attr.name, "a default amanda can store (scalar, list, tensor)",
                         type(value).__name__, "extend onnx_vocab._default")


def schema_from_onnx(schema: Any) -> OpSchema:
    """Convert one ``onnx.defs.OpSchema`` to an amanda ``OpSchema``.

    >>> import onnx.defs
    >>> schema_from_onnx(onnx.defs.get_schema("Concat", 13)).inputs[0].variadic
    True
    """
    constraints = {t.type_param_str: tuple(t.allowed_type_strs) for t in schema.type_constraints}

    def port(p: Any) -> PortSchema:
        option = p.option.name  # Single, Optional or Variadic
        bound = p.type_str if p.type_str in constraints else None
        return PortSchema(p.name, optional=option == "Optional", variadic=option == "Variadic",
                          type_constraint=bound,
                          allowed_types=constraints[bound] if bound else (p.type_str,),
                          homogeneous=bool(p.is_homogeneous), min_arity=int(p.min_arity))

    attrs = [AttrSchema(a.name, a.type.name.lower(), required=bool(a.required),
                        default=_default(a)) for a in schema.attributes.values()]
    return OpSchema(schema.name, domain=schema.domain, since_version=schema.since_version,
                    inputs=tuple(port(p) for p in schema.inputs),
                    outputs=tuple(port(p) for p in schema.outputs),
                    attrs={a.name: a for a in sorted(attrs, key=lambda a: a.name)},
                    type_constraints=constraints,
                    deprecated=bool(schema.deprecated))


def _sort_key(schema: OpSchema) -> tuple[str, str, int]:
    return (schema.domain, schema.type, schema.since_version)


def vocabulary_from_onnx() -> OnnxVocabulary:
    """Read every schema of every domain from the installed ``onnx.defs``.

    >>> vocabulary_from_onnx().domains[""][0]
    1
    """
    import onnx
    import onnx.defs

    domains = {d: (int(lo), int(hi)) for d, (lo, hi) in
               sorted(onnx.defs.C.schema_version_map().items())}
    schemas = sorted((schema_from_onnx(s) for s in onnx.defs.get_all_schemas_with_history()),
                     key=_sort_key)
    return OnnxVocabulary(onnx.__version__, FrozenMap(domains), tuple(schemas),
                          f"onnx.defs (onnx {onnx.__version__})")


# --- the shipped file -------------------------------------------------------------------------

def vocabulary_to_bytes(vocabulary: OnnxVocabulary) -> bytes:
    """The gzip'ed JSON form of a vocabulary (reproducible: no timestamp in the gzip header).

    >>> vocabulary_to_bytes(OnnxVocabulary("0", {"": (1, 1)}, (), ""))[:2]
    b'\\x1f\\x8b'
    """
    document = {
        "format": FORMAT,
        "onnx_version": vocabulary.onnx_version,
        "domains": {d: list(r) for d, r in vocabulary.domains.items()},
        "schemas": [op_schema_to_data(s, attr_style="mapping") for s in vocabulary.schemas],
    }
    text = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def vocabulary_from_file(path: str | Path = DATA_FILE) -> OnnxVocabulary:
    """Read a vocabulary file written by ``tools/gen_onnx_vocabulary.py``.

    >>> vocabulary_from_file().domains["ai.onnx.ml"][0]
    1
    """
    path = Path(path)
    try:
        document = load_text(gzip.decompress(path.read_bytes()), "json")
    except (OSError, ValueError, FormatError) as exc:
        raise SchemaError.at(str(path), "a gzip'ed JSON ONNX vocabulary", str(exc)) from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        found = document.get("format") if isinstance(document, dict) else type(document)
        raise SchemaError.at(str(path), f"format {FORMAT!r}", repr(found),
                             "regenerate it with tools/gen_onnx_vocabulary.py")
    schemas = tuple(op_schema_from_data(item, (str(path), "schemas", str(i)))
                    for i, item in enumerate(document["schemas"]))
    domains = FrozenMap((d, (int(r[0]), int(r[1]))) for d, r in document["domains"].items())
    version = document["onnx_version"]
    return OnnxVocabulary(version, domains, schemas, f"{path.name} (from onnx {version})")


_cache: dict[str, Any] = {}
_lock = threading.Lock()


def onnx_domains() -> Mapping[str, tuple[int, int]]:
    """Each ONNX domain's opset range, from ``onnx.defs`` (else the shipped file): what an
    importer needs to read a model's ``opset_import``, without converting any schema.

    >>> onnx_domains()[""][0]
    1
    """
    with _lock:
        if "domains" not in _cache:
            try:
                import onnx.defs

                _cache["domains"] = FrozenMap((d, (int(lo), int(hi))) for d, (lo, hi) in
                                              sorted(onnx.defs.C.schema_version_map().items()))
            except ImportError:
                _cache["domains"] = vocabulary_from_file(DATA_FILE).domains
        return _cache["domains"]  # type: ignore[no-any-return]


def _newest_from_onnx(version: int, domain: str) -> tuple[list[OpSchema], str] | None:
    """Opset ``version`` of ``domain``'s schemas straight from ``onnx.defs``: onnx picks the
    newest of each op type, and only those are converted (a model's first load converts one
    opset's schemas, 178 for opset 17, not ONNX's whole history of 659); None without onnx."""
    try:
        import onnx
        import onnx.defs
    except ImportError:
        return None
    chosen = []
    for latest in onnx.defs.get_all_schemas():  # one per op type: listing the history costs 10x
        if (latest.domain or "") == domain:
            try:
                chosen.append(onnx.defs.get_schema(latest.name, version, latest.domain))
            except onnx.defs.SchemaError:  # the op arrived after this opset
                continue
    return [schema_from_onnx(raw) for raw in chosen], f"onnx.defs (onnx {onnx.__version__})"


def onnx_vocabulary(path: str | Path | None = None) -> OnnxVocabulary:
    """The ONNX vocabulary: from ``path`` if given, else ``onnx.defs``, else the shipped file.

    The default one is read once and cached.

    >>> onnx_vocabulary(DATA_FILE).source.startswith("onnx_schemas.json.gz")
    True
    """
    if path is not None:
        return vocabulary_from_file(path)
    with _lock:
        if "default" not in _cache:
            try:
                _cache["default"] = vocabulary_from_onnx()
            except ImportError:
                _cache["default"] = vocabulary_from_file(DATA_FILE)
        return _cache["default"]


def onnx_opset(version: int, domain: str = "",
               vocabulary: OnnxVocabulary | None = None) -> Namespace:
    """The namespace of opset ``version`` of ONNX ``domain`` (built anew; the registry caches).

    >>> ns = onnx_opset(13)
    >>> ns.name, ns.schema("ReduceSum").input_names
    ('amanda/onnx/13', ('data', 'axes'))
    """
    domains = vocabulary.domains if vocabulary is not None else onnx_domains()
    domain = "" if domain == "ai.onnx" else domain
    if domain not in domains:
        raise SchemaError.at(domain, f"an ONNX domain ({', '.join(map(repr, domains))})", repr(domain))
    lo, hi = domains[domain]
    if not lo <= version <= hi:
        raise SchemaError.at(onnx_namespace_name(domain, version),
                             f"an opset of {domain or 'ai.onnx'} from {lo} to {hi}", str(version))
    direct = _newest_from_onnx(version, domain) if vocabulary is None else None
    if direct is None:
        vocabulary = vocabulary or onnx_vocabulary()
        chosen = [s for s in vocabulary.schemas if s.domain == domain and s.since_version <= version]
        source = vocabulary.source
    else:
        chosen, source = direct
    newest: dict[str, OpSchema] = {}
    for schema in chosen:  # the newest of each op type (the whole history lists them all)
        if newest.get(schema.type) is None or newest[schema.type].since_version < schema.since_version:
            newest[schema.type] = schema
    schemas = {t: s for t, s in sorted(newest.items()) if not s.deprecated}
    retired = {t: f"{t} is deprecated since opset {s.since_version} of {domain or 'ai.onnx'}"
               for t, s in sorted(newest.items()) if s.deprecated}
    return Namespace(onnx_namespace_name(domain, version), schemas=schemas, source=source,
                     version=version, retired=retired)


def _provided_names() -> tuple[str, ...]:
    return namespace_names(onnx_domains())


def _load(name: str) -> Namespace:
    found = onnx_domain_of(name, onnx_domains())
    if found is None:
        raise SchemaError.at(name, "an ONNX namespace name like amanda/onnx/17", repr(name))
    return onnx_opset(found[1], found[0])


register_provider(PREFIX, _provided_names, _load)
