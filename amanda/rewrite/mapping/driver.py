"""The driver: one deterministic way to apply a table's rules to a container.

Order. Rules run one after another in the table's order, except that a rule runs after every
rule its ``apply_after`` names (a stable topological order; a cycle is an error when the table is
made). Each rule runs over every container level, bottom-up (nested containers first); within a
level its matches are found in document order and applied in that order.

Overlaps. Within one rule's pass over a level, a match that shares an op with a match applied
before it (or touches an op that pass already created) is skipped: the first match wins.

Namespaces. A pattern op matches, by default, only ops still in the table's source namespace
(the source name itself, a version inside it, or no namespace at all); ops a rule created or
updated are in the target namespace, so a conversion never maps its own output. When the
source and target are the same namespace (a rewrite table) every op is a candidate.

Fixed point. With ``fixed_point=True`` the whole sequence repeats on a level until a round
changes nothing; after ``max_iterations`` rounds a ``MappingLoopError`` names the rules still
firing.

Unmatched ops. After the rules, leaf ops still in the source namespace are unmatched: with
``on_unmatched="error"`` an ``UnmatchedOpsError`` lists every one by path (with the reasons rules
gave for skipping it); with ``"pass"`` they are kept, keeping their own namespace.

The result carries the target namespace; unchanged subtrees are the source's own objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from amanda.containers.container import Container
from amanda.containers.edge import SELF, Endpoint
from amanda.errors import AmandaError, MappingError
from amanda.rewrite.mapping.deep import hand_down, is_outer, take_back
from amanda.rewrite.mapping.names import NameMap
from amanda.rewrite.mapping.pattern import find_matches
from amanda.rewrite.mapping.rewrite import apply_replacement
from amanda.rewrite.mapping.rule import Match, Rule, Skip
from amanda.rewrite.mapping.scope import Scope
from amanda.rewrite.mapping.table import check_unmatched
from amanda.rewrite.mapping.values import Far

if TYPE_CHECKING:
    from amanda.rewrite.mapping.table import MappingTable

__all__ = ["MappingLoopError", "UnmatchedOpsError", "in_namespace", "run_table"]



class UnmatchedOpsError(MappingError):
    """Ops no rule mapped; ``ops`` lists ``(path, type, reasons)`` for every one."""

    def __init__(self, table: str, source: str, ops: Sequence[tuple[str, str, tuple[str, ...]]]) -> None:
        self.ops = tuple(ops)
        lines = []
        for path, type_, reasons in self.ops:
            why = f" ({'; '.join(reasons)})" if reasons else ""
            lines.append(f"  - {path} ({type_}){why}")
        message = (f"{len(self.ops)} op(s) of {source} have no rule in mapping table {table!r}:\n"
                   + "\n".join(lines) + "\n(pass on_unmatched='pass' to keep them unmapped)")
        super().__init__(message, path=self.ops[0][0] if self.ops else None,
                         expected=f"a rule of {table!r} for every op", found=f"{len(self.ops)} unmatched")


class MappingLoopError(MappingError):
    """A fixed point was not reached; ``rules`` are the rules that still fired in the last round."""

    def __init__(self, table: str, where: str, rounds: int, rules: Sequence[str]) -> None:
        self.rules = tuple(rules)
        super().__init__(
            f"mapping table {table!r} did not reach a fixed point at {where} after {rounds} rounds; "
            f"still firing: {', '.join(self.rules)} (rules that undo each other, or a rule whose "
            "output it matches again)", path=where, expected="a fixed point", found="an endless loop")


def in_namespace(name: str | None, family: str) -> bool:
    """Whether namespace ``name`` is ``family`` or lies inside it.

    >>> in_namespace("amanda/tensorflow/1.13.1", "amanda/tensorflow"), in_namespace("amanda/onnx/17", "amanda/onnx/1")
    (True, False)
    """
    return name is not None and (name == family or name.startswith(family + "/"))


class Context:
    """What one application of a table carries across container levels."""

    def __init__(self, table: MappingTable, fixed_point: bool) -> None:
        self.table = table
        self.source = table.source
        self.target = table.target
        self.rules: tuple[Rule, ...] = table.ordered_rules()
        self._by_type: dict[str, list[int]] = {}  # op type -> the rules anchored at it
        self._any: list[int] = []  # the rules anchored at any type
        for i, rule in enumerate(self.rules):
            anchor = rule.pattern.compiled[0][0].type
            for type_ in [] if anchor is None else [anchor] if isinstance(anchor, str) else anchor:
                self._by_type.setdefault(type_, []).append(i)
            if anchor is None:
                self._any.append(i)
        self.fixed_point = fixed_point
        self.names: dict[Endpoint, Endpoint | None] = {}
        self._by_value: dict[Endpoint, set[Endpoint]] = {}
        self.unmatched: list[tuple[str, str, tuple[str, ...]]] = []
        self.reasons: dict[tuple[str, ...], list[str]] = {}
        self.rewrite = self.source == self.target

    def candidates(self, types: Iterable[Any], after: int) -> list[int]:
        """The rules (by index, in order, after ``after``) anchored at one of ``types``."""
        found = {i for t in types for i in self._by_type.get(t, ())}
        found.update(self._any)
        return sorted(i for i in found if i > after)

    def source_like(self, ns: str | None) -> bool:
        if self.rewrite:
            return True
        return (ns is None or in_namespace(ns, self.source)) and not in_namespace(ns, self.target)

    def namespace_ok(self, ns: str | None, choice: str) -> bool:
        if choice == "any" or self.rewrite:
            return True
        if choice == "target":
            return in_namespace(ns, self.target)
        return self.source_like(ns)

    @staticmethod
    def endpoint(path: tuple[str, ...], port: Any, container: bool = False) -> Endpoint:
        """The name-map endpoint of an op's port, or of a container's own port (``container``)."""
        if container and not path:
            return Endpoint(SELF, port)
        return Endpoint(tuple(path), port)

    def record(self, old: Endpoint, new: Endpoint | None) -> None:
        """The value at ``old`` now lives at ``new`` (None: nowhere)."""
        for key in self._by_value.pop(old, set()):
            self._set(key, new)
        if old not in self.names:
            self._set(old, new)

    def rename_value(self, old: Endpoint, new: Endpoint) -> None:
        """Values recorded at ``old`` move to ``new`` (a hoisted input port)."""
        for key in self._by_value.pop(old, set()):
            self._set(key, new)

    def _set(self, key: Endpoint, value: Endpoint | None) -> None:
        previous = self.names.get(key)
        if previous is not None:
            self._by_value.get(previous, set()).discard(key)
        self.names[key] = value
        if value is not None:
            self._by_value.setdefault(value, set()).add(key)


def _new_namespace(container: Container, inherited: str | None, ctx: Context, root: bool) -> str | None:
    own = container.attrs.get("namespace")
    if own is None:
        return ctx.target if root and not ctx.rewrite else inherited
    return ctx.target if ctx.source_like(own) and not ctx.rewrite else own


def _run_rule(scope: Scope, rule: Rule, ctx: Context) -> bool:
    def ok(key: Any, choice: str) -> bool:
        return ctx.namespace_ok(key.namespace if isinstance(key, Far) else scope.ns.get(key), choice)

    matches = list(find_matches(scope, rule.pattern, ok))
    consumed: set[str] = set()
    fired = False
    for names in matches:
        if any(n in consumed or n not in scope.ops for n in names.values() if not isinstance(n, Far)):
            continue
        match = Match(scope, names, rule, ctx.source, ctx.target)
        try:
            if rule.pattern.where is not None and not rule.pattern.where(match):
                continue
            result = rule.function(match)
        except AmandaError:
            raise
        except Exception as exc:
            where = "/".join(match.path(next(iter(names))))
            raise MappingError(f"rule {rule.name!r} failed on {where}: {type(exc).__name__}: {exc}",
                               path=where) from exc
        if result is None:
            continue
        if isinstance(result, Skip):
            for name in names.values():
                ctx.reasons.setdefault((*scope.path, name), []).append(f"{rule.name}: {result.reason}")
            continue
        try:
            changed = apply_replacement(scope, rule, names, result)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            # a replacement built from a table's values (ports, attributes) that do not fit
            where = "/".join(match.path(next(iter(names))))
            raise MappingError(f"rule {rule.name!r} gave a replacement for {where} that cannot be built: "
                               f"{type(exc).__name__}: {exc}", path=where, expected="a well-formed replacement",
                               found=f"{type(exc).__name__}: {exc}") from None
        if changed:
            consumed |= changed
            fired = True
    return fired


def _round(scope: Scope, ctx: Context) -> list[str]:
    """Every rule once, in order, on ``scope``: the names of those that fired. Only the rules
    whose pattern is anchored at a type some leaf of the level has are run (the candidates,
    found again after each rule that fired, since it may have made ops of other types)."""
    fired: list[str] = []
    candidates, i, seen = ctx.candidates(scope.types(), -1), 0, scope.type_changes
    while i < len(candidates):
        index = candidates[i]
        i += 1
        if _run_rule(scope, ctx.rules[index], ctx):
            fired.append(ctx.rules[index].name)
            if scope.type_changes != seen:  # a type came or went: the candidates after this rule again
                candidates, i, seen = ctx.candidates(scope.types(), index), 0, scope.type_changes
    return fired


def _run_rules(scope: Scope, ctx: Context) -> None:
    rounds = 0
    while True:
        fired = _round(scope, ctx)
        if not ctx.fixed_point or not fired:
            return
        rounds += 1
        if rounds >= ctx.table.max_iterations:
            where = "/".join(scope.path) or scope.container.name or "<root>"
            raise MappingLoopError(ctx.table.name, where, rounds, fired)


def _map_level(container: Container, path: tuple[str, ...], inherited: str | None,
               new_inherited: str | None, ctx: Context, incoming: list | None = None,
               parent: Scope | None = None) -> tuple[Container, list, list]:
    """Map one container level (its nested containers first); returns the new container, the
    input ports it added (to hoist), and the handed-down edges as its rules left them."""
    scope = Scope(container, path, inherited, ctx, parent)
    for edge in incoming or ():
        scope.add_edge(edge, mark=not (is_outer(edge[0]) or is_outer(edge[1])))  # one moved down: a change
    namespace = _new_namespace(container, new_inherited, ctx, not path)
    for name in list(scope.names):
        child = scope.ops[name]
        if child.children:
            originals, passed = hand_down(scope, name)
            mapped, hoisted, returned = _map_level(child, (*path, name), scope.old_namespace,
                                                   namespace, ctx, passed, scope)
            scope.replace_child(name, mapped)
            take_back(scope, name, originals, returned)
            for port in hoisted:
                scope.hoist(name, port)
    _run_rules(scope, ctx)
    if not ctx.rewrite:
        scopes = {child.name for child in container.children if child.children}  # emptied by its rules: no op
        for name in scope.names:
            if not scope.ops[name].children and name not in scopes and ctx.source_like(scope.ns.get(name)):
                reasons = tuple(ctx.reasons.get((*path, name), ()))
                ctx.unmatched.append(("/".join((*path, name)), str(scope.ops[name].type), reasons))
    returned = [e for e in scope.edges if is_outer(e[0]) or is_outer(e[1])]
    for edge in returned:
        scope.remove_edge(edge, mark=False)
    hoisted = scope.added_inputs if path else []
    return scope.build(namespace, not path), hoisted, returned


def run_table(table: MappingTable, container: Container, on_unmatched: str,
              fixed_point: bool) -> tuple[Container, NameMap]:
    """Apply ``table`` to ``container``: the mapped container and its name map."""
    check_unmatched(on_unmatched)
    if not isinstance(container, Container):
        raise MappingError.at("apply", "a Container", type(container).__name__)
    from amanda.containers.consolidate import consolidate

    folded = consolidate(container)  # edit wrappers reach into the model: fold them first
    ctx = Context(table, fixed_point)
    result, _, _ = _map_level(folded, (), None, None, ctx)
    if ctx.unmatched and on_unmatched == "error":
        raise UnmatchedOpsError(table.name, table.source, ctx.unmatched)
    return result, NameMap(ctx.names, container)
