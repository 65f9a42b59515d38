"""The op registry: one :class:`OpDef` per (namespace family, domain, op type) holding
every fact amanda knows about that op, as typed fields.

- ``kernels``: plain kernels, ``kernel(attrs, *inputs) -> tuple[ndarray | None, ...]``,
  newest first. ``attrs`` is a read-only mapping of the op's own attributes (ONNX defaults
  are applied by the kernel itself, with ``attrs.get(name, default)``); ``inputs`` are numpy
  arrays, or ``None`` for an omitted optional input; the result has one entry per output
  port (``None`` for an optional output the kernel does not produce).
- ``session_kernels``: kernels that also take the session's ``OpContext`` first (state,
  control flow); they win over plain kernels (``needs_session``).
- ``heavy``: worth a worker thread whatever its input sizes (BLAS products, convolutions).
- ``fresh``: its kernels always return memory shared with nothing else, so a later op may
  overwrite the result (see :mod:`amanda.exec.inplace`).
- ``inplace``: an :class:`InPlace` variant that writes into a donated input.
- ``effect``: :class:`~amanda.ops.effects.Effect` (pure, random, stateful, control): a
  non-pure op is never merged, removed, folded or cached.
- ``bodies``: the attributes holding graphs the op runs (If's branches, Loop's body).
- ``constant``: the op's output is its ``value`` attribute (a source known before any run).
- ``schema``: the namespace whose schema describes the op's ports and attributes (None: the
  vocabulary of its family, ``amanda/onnx/<opset>`` for the ONNX ops).
- ``type_rule``, ``vjp``: the type inference and vector-Jacobian rules; ``no_gradient``: why
  the op has no gradient, when it has none; ``gradient_gap``: why amanda has no rule for an op
  that has one (see :attr:`OpDef.differentiable`).
- ``dtype_rule``: ``"same"`` when every output has the first input's dtype.
- ``facts``: anything else a later layer attaches, by key.
- ``origins``: for each of ``kernels``, ``session_kernels``, ``type_rule``, ``vjp``,
  ``no_gradient`` and ``gradient_gap``, the modules that registered it (the first module up
  the call stack that is not registry plumbing): where an op's facts are written down.

Versions: ``@kernel("ReduceSum", since=13)`` registers the kernel used for opsets 13 and
later; a lookup for opset ``v`` takes the newest registration with ``since <= v`` whose
dtype predicate accepts the input dtypes. Arity (how many inputs a version takes) and
whether it wants the node's output count (``output_count=True``) are per version.

Entries are frozen: registering replaces the entry with an updated copy, so an entry a
caller holds never changes under it. :func:`amanda.ops.define` writes one op's facts side by
side; ``exec.kernels.registry``, ``types.rules.rule`` and the gradient tables of
``amanda.autodiff`` are other ways into this same registry.

>>> import amanda
>>> e = entry(ONNX, "MatMul")
>>> e.heavy, e.fresh, e.needs_session, e.arity(17), e.effect.value
(True, True, False, (2, 2), 'pure')
>>> entry(ONNX, "Loop").needs_session, entry(ONNX, "Loop").bodies
(True, ('body',))
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np

from amanda.errors import ArgumentError, ExecutionError, suggest
from amanda.ops.effects import Effect
from amanda.ops.fields import DECLARABLE, InPlace, checked_field

__all__ = [
    "ONNX", "DtypePredicate", "InPlace", "Kernel", "KernelVersion", "OpDef", "OpEntry", "OpKey",
    "declare", "effect_of", "entries", "entry", "fact", "kernel", "lookup", "op_types", "register_fact",
    "run_kernel", "session_kernel", "session_op_types", "supported_op_types", "version_of",
]

Kernel = Callable[..., tuple]
DtypePredicate = Callable[[Sequence[np.dtype]], bool]
OpKey = tuple[str, str, str]
"""(family, domain, op type): what one registry entry is about."""

ONNX = "amanda/onnx"
_NEWEST = 1 << 30


@dataclass(frozen=True)
class KernelVersion:
    """One registered implementation of an op type, used from opset ``since`` on."""

    op_type: str
    since: int
    fn: Kernel
    accepts: DtypePredicate | None = None
    domain: str = ""
    output_count: bool = False  # wants the node's output count as attrs["num_outputs"]

    @cached_property
    def arity(self) -> tuple[int, float]:
        """How many inputs (after ``attrs``, and the context of a session kernel) ``fn`` takes:
        (required, most); (0, inf) when its signature does not say."""
        try:
            params = list(inspect.signature(self.fn).parameters.values())[1:]
        except (TypeError, ValueError):
            return (0, math.inf)
        if any(p.kind == p.VAR_POSITIONAL for p in params):
            return (0, math.inf)
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return (sum(p.default is p.empty for p in positional), len(positional))


@dataclass(frozen=True, eq=False)
class OpDef:
    """Everything registered about one op type of one family and domain (module docstring)."""

    family: str
    domain: str
    op_type: str
    kernels: tuple[KernelVersion, ...] = ()
    session_kernels: tuple[KernelVersion, ...] = ()
    heavy: bool = False
    fresh: bool = False
    inplace: InPlace | None = None
    effect: Effect = Effect.PURE
    bodies: tuple[str, ...] = ()
    constant: bool = False
    schema: str | None = None
    type_rule: Callable[[Any], Sequence[Any]] | None = None
    vjp: Callable[[Any], list] | None = None
    no_gradient: str | None = None
    gradient_gap: str | None = None
    dtype_rule: str | None = None
    facts: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    origins: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def key(self) -> OpKey:
        """The registry key, ``(family, domain, op_type)``."""
        return (self.family, self.domain, self.op_type)

    @property
    def needs_session(self) -> bool:
        """Whether the op runs through a session kernel (state, control flow)."""
        return bool(self.session_kernels)

    @property
    def pure(self) -> bool:
        """Whether the op computes its outputs from its inputs alone (see :class:`Effect`)."""
        return self.effect is Effect.PURE

    @property
    def foldable(self) -> bool:
        """Whether constant inputs make the outputs constant: a pure op run by a plain kernel."""
        return self.pure and not self.session_kernels and not self.bodies

    @property
    def differentiable(self) -> bool | None:
        """False when marked ``no_gradient`` (inputs get no gradient through it); True with a
        vector-Jacobian rule; False when marked ``gradient_gap`` (it has one, amanda has no rule yet: a gradient
        through it is an error naming the op and the reason); None when nothing is said."""
        if self.no_gradient is not None:
            return False  # its vjp, if any, passes nothing back
        if self.vjp is not None:
            return True
        return False if self.gradient_gap is not None else None

    def fact(self, key: str, default: Any = None) -> Any:
        """The extension fact ``key``, else ``default``."""
        return self.facts.get(key, default)

    def kernels_at(self, opset: int | None) -> tuple[KernelVersion, ...]:
        """The plain versions usable at ``opset`` (None: the newest), newest first."""
        newest = opset if opset is not None else _NEWEST
        return tuple(v for v in self.kernels if v.since <= newest)

    def arity(self, opset: int | None = None) -> tuple[int, float]:
        """(fewest required, most accepted) inputs over the versions usable at ``opset``;
        (0, inf) when there is none."""
        versions = self.kernels_at(opset)
        if not versions:
            return (0, math.inf)
        return (min(v.arity[0] for v in versions), max(v.arity[1] for v in versions))


OpEntry = OpDef  # the name the executor's registry used


_ENTRIES: dict[OpKey, OpDef] = {}


_LEAST_PURE: dict[str, Effect] = {}  # op type -> an effect some family declares, rebuilt after a change


# the fields whose registering module ``OpDef.origins`` records, and the modules that only pass
# a registration on (the registry's own ways in): the origin is the first module past them
_TRACED = ("kernels", "session_kernels", "type_rule", "vjp", "no_gradient", "gradient_gap")
_PLUMBING = frozenset({__name__, "amanda.ops.definition", "amanda.exec.kernels.registry", "amanda.types.rules"})


def _caller() -> str:
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") in _PLUMBING:
        frame = frame.f_back  # type: ignore[assignment]
    return "?" if frame is None else str(frame.f_globals.get("__name__", "?"))


def _update(family: str, domain: str, op_type: str, **changes: Any) -> OpDef:
    key = (family, domain, op_type)
    old = _ENTRIES.get(key) or OpDef(family, domain, op_type)
    traced = [name for name in _TRACED if changes.get(name) is not None]
    if traced:
        origins, where = dict(old.origins), _caller()
        for name in traced:
            origins[name] = (*(m for m in origins.get(name, ()) if m != where), where)
        changes["origins"] = MappingProxyType(origins)
    new = _ENTRIES[key] = dataclasses.replace(old, **changes)
    if "effect" in changes:
        _LEAST_PURE.clear()
    return new


def entry(family: str, op_type: str, *, domain: str = "") -> OpDef | None:
    """The registry entry of ``op_type`` in ``family`` (and ``domain``), or None."""
    return _ENTRIES.get((family, domain, op_type))


def entries(family: str | None = None, domain: str | None = None) -> list[OpDef]:
    """Every entry, or those of one family and/or domain, sorted by key."""
    return [e for k, e in sorted(_ENTRIES.items())
            if (family is None or k[0] == family) and (domain is None or k[1] == domain)]


def kernel(
    op_type: str,
    since: int = 1,
    *,
    family: str = ONNX,
    domain: str = "",
    dtypes: Iterable[Any] | None = None,
    accepts: DtypePredicate | None = None,
    heavy: bool = False,
    output_count: bool = False,
) -> Callable[[Kernel], Kernel]:
    """Register ``fn`` as the kernel of ``op_type`` from opset ``since`` on.

    ``dtypes`` restricts the version to inputs whose first dtype is one of them;
    ``accepts`` is a general predicate over all input dtypes. ``heavy`` marks the op as
    worth a worker thread; ``output_count`` asks for the node's output count as
    ``attrs["num_outputs"]`` (see :mod:`amanda.exec.kernels.arity`).
    """
    if dtypes is not None:
        allowed = frozenset(np.dtype(d) for d in dtypes)

        def by_first(ds: Sequence[np.dtype]) -> bool:
            return bool(ds) and ds[0] in allowed

        accepts = by_first

    def register(fn: Kernel) -> Kernel:
        old = entry(family, op_type, domain=domain)
        version = KernelVersion(op_type, since, fn, accepts, domain, output_count)
        # newest first; among equal since, dtype-specific before generic
        versions = sorted((*(old.kernels if old else ()), version), key=lambda v: (-v.since, v.accepts is None))
        _update(family, domain, op_type, kernels=tuple(versions), heavy=heavy or bool(old and old.heavy))
        return fn

    return register


def session_kernel(op_type: str, family: str, since: int = 1, domain: str = "") -> Callable[[Kernel], Kernel]:
    """Register ``fn(ctx, attrs, *inputs) -> tuple`` as the session kernel of ``op_type``.

    Session kernels win over plain kernels of the same op type. They always run on the
    scheduling thread, so they may touch session state without locks.
    """

    def register(fn: Kernel) -> Kernel:
        old = entry(family, op_type, domain=domain)
        version = KernelVersion(op_type, since, fn, None, domain)
        versions = sorted((*(old.session_kernels if old else ()), version), key=lambda v: -v.since)
        _update(family, domain, op_type, session_kernels=tuple(versions))
        return fn

    return register


def declare(
    op_type: str,
    *,
    family: str = ONNX,
    domain: str = "",
    **fields: Any,
) -> OpDef:
    """Set typed facts of ``op_type`` (those given; None leaves one as it is): ``heavy``,
    ``fresh``, ``inplace``, ``effect``, ``bodies``, ``constant``, ``schema``, ``type_rule``,
    ``vjp``, ``no_gradient``, ``gradient_gap``, ``dtype_rule``.

    >>> e = declare("Scale", family="amanda/example", heavy=True)
    >>> e.heavy, e.fresh, e.kernels, e.pure
    (True, False, (), True)
    >>> declare("Scale", family="amanda/example", colour="red")
    Traceback (most recent call last):
    amanda.errors.ArgumentError: at colour: expected a field of OpDef ...
    """
    unknown = sorted(set(fields) - DECLARABLE)
    if unknown:
        raise ArgumentError.at(unknown[0], f"a field of OpDef ({', '.join(sorted(DECLARABLE))})",
                               repr(fields[unknown[0]]), hint=suggest(unknown[0], DECLARABLE))
    for name, text in (("op_type", op_type), ("family", family)):
        if not isinstance(text, str) or not text:
            raise ArgumentError.at(name, "a non-empty string", repr(text))
    if not isinstance(domain, str):
        raise ArgumentError.at("domain", "a string ('' for the default domain)", repr(domain))
    fields = {k: checked_field(k, v) for k, v in fields.items() if v is not None}
    if fields.get("vjp") is not None:
        fields["gradient_gap"] = _CLEARED  # a rule closes the gap it was marked with
    given = {k: (None if v is _CLEARED else v) for k, v in fields.items() if v is not None}
    return _update(family, domain, op_type, **given)


_CLEARED = object()
# fact keys that older code attaches with register_fact, and the typed field each one sets
_TYPED_FACTS = {"autodiff.vjp": "vjp", "types.rule": "type_rule"}


def register_fact(family: str, op_type: str, key: str, value: Any, *, domain: str = "",
                  replace: bool = False) -> OpDef:
    """Attach fact ``key`` (a dotted name such as ``"types.rule"``) to an op's entry.

    This is how later layers (type rules, gradients, passes) extend the registry instead of
    keeping tables of their own. Setting a key again to a different value raises an
    ExecutionError unless ``replace`` is set.

    >>> register_fact("amanda/example", "Twice", "example.cost", 2).facts["example.cost"]
    2
    >>> fact("amanda/example", "Twice", "example.cost"), fact("amanda/example", "Twice", "other", 0)
    (2, 0)
    """
    old = entry(family, op_type, domain=domain)
    if key in _TYPED_FACTS:  # an older way into a typed field
        current = getattr(old, _TYPED_FACTS[key], None) if old else None
        if current is not None and current is not value and not replace:
            _refuse(family, domain, op_type, key, current)
        return declare(op_type, family=family, domain=domain, **{_TYPED_FACTS[key]: value})
    facts = dict(old.facts) if old else {}
    if key in facts and not replace and facts[key] is not value and facts[key] != value:
        _refuse(family, domain, op_type, key, facts[key])
    facts[key] = value
    return _update(family, domain, op_type, facts=MappingProxyType(facts))


def _refuse(family: str, domain: str, op_type: str, key: str, current: Any) -> None:
    where = f"{family}{'/' + domain if domain else ''} {op_type}"
    raise ExecutionError(
        f"fact `{key}` of {where} is already {current!r}; pass replace=True to change it",
        path=where, expected=f"no other value for `{key}`", found=repr(current))


def fact(family: str, op_type: str, key: str, default: Any = None, *, domain: str = "") -> Any:
    """The fact ``key`` attached to an op's entry, else ``default``."""
    found = entry(family, op_type, domain=domain)
    if found is not None and key in _TYPED_FACTS:
        typed = getattr(found, _TYPED_FACTS[key])
        return default if typed is None else typed
    return default if found is None else found.facts.get(key, default)


def lookup(
    op_type: str,
    opset: int | None = None,
    dtypes: Sequence[np.dtype] = (),
    *,
    family: str = ONNX,
    domain: str = "",
) -> KernelVersion | None:
    """The plain kernel version for ``op_type`` at ``opset`` and these input dtypes, or None."""
    found = entry(family, op_type, domain=domain)
    newest = opset if opset is not None else _NEWEST
    for version in found.kernels if found else ():
        if version.since <= newest and (version.accepts is None or version.accepts(dtypes)):
            return version
    return None


def version_of(fn: Kernel) -> KernelVersion | None:
    """The registered version whose function is ``fn``, or None (a scan: not for hot paths)."""
    for e in _ENTRIES.values():
        for version in (*e.kernels, *e.session_kernels):
            if version.fn is fn:
                return version
    return None


def op_types(family: str | None = None, *, domain: str | None = None, effect: Effect | None = None,
             where: Callable[[OpDef], bool] | None = None) -> frozenset[str]:
    """The op types registered in ``family`` (None: any) and ``domain`` (None: any) with this
    ``effect`` (None: any) for which ``where(entry)`` holds: the registry's answer where a
    module would otherwise keep a list of op names.

    >>> import amanda
    >>> sorted(op_types(ONNX, effect=Effect.CONTROL))
    ['If', 'Loop', 'Scan', 'SequenceMap']
    """
    return frozenset(e.op_type for e in entries(family, domain)
                     if (effect is None or e.effect is effect) and (where is None or where(e)))


def effect_of(op_type: str, family: str | None = None, domain: str = "") -> Effect:
    """The effect of ``op_type`` in ``family``; with no family, or a family that does not know
    the op, the effect any family declares for it (an op of unknown origin is taken at its
    least pure).

    >>> import amanda
    >>> effect_of("RandomNormal").value, effect_of("Read", "amanda/core").value, effect_of("Add").value
    ('random', 'stateful', 'pure')
    """
    found = None if family is None else _ENTRIES.get((family, domain, op_type))
    if found is not None:
        return found.effect
    if not _LEAST_PURE:
        for (_, _, t), e in sorted(_ENTRIES.items()):
            if not e.pure:
                _LEAST_PURE.setdefault(t, e.effect)
        _LEAST_PURE.setdefault("", Effect.PURE)  # built, even with nothing impure
    return _LEAST_PURE.get(op_type, Effect.PURE)


def supported_op_types(family: str = ONNX, domain: str = "") -> list[str]:
    """Sorted op types that have at least one plain kernel."""
    return sorted(t for (f, d, t), e in _ENTRIES.items() if f == family and d == domain and e.kernels)


def session_op_types(family: str = ONNX, domain: str = "") -> list[str]:
    """Sorted op types with a session kernel in this family and domain."""
    return sorted(t for (f, d, t), e in _ENTRIES.items() if f == family and d == domain and e.session_kernels)


def run_kernel(version: KernelVersion, attrs: Mapping[str, Any], inputs: Sequence[Any]) -> tuple:
    """Call a kernel and check it returned a tuple; numpy's floating-point warnings are off
    while it runs, as in a Session run (kernels set no ``errstate`` of their own)."""
    with np.errstate(all="ignore"):
        result = version.fn(attrs, *inputs)
    if not isinstance(result, tuple):
        raise ExecutionError(
            f"kernel for {version.op_type} returned {type(result).__name__}, expected a tuple"
        )
    return result
