"""A mapping table's replacement applied to one match in a scope: the update / remove / create
semantics, port maps and namespaces; the splice itself is the rewrite engine's
(:meth:`amanda.rewrite.replace.WorkingLevel.splice`), as for the optimiser's rules.

- Edges among the matched ops are the *matched edges*: they are deleted, and the replacement's
  edges are added.
- The other edges touching a matched op cross the match's boundary. They are re-attached through
  the port map: the replacement's ``ports``, else, for an updated op, the port of the same name,
  else the port at the same position (when the op's port names all changed). An input fed from
  outside that goes nowhere is an error (map it to ``None`` to drop it on purpose).
- A matched op that the replacement removes but whose output is still read outside the match
  (through a port the map does not re-route) is kept as it was, with its boundary edges.
- Control edges of an updated op stay on it; those of a removed op move to every op of the
  replacement (or, when it has none, join the removed op's predecessors to its successors).
- The replacement's ops take the place of the first matched op, in the replacement's order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from amanda.containers.container import Container
from amanda.containers.edge import CONTROL, SELF, Edge, Port
from amanda.errors import MappingError, SchemaError
from amanda.namespaces.attr_types import value_key
from amanda.rewrite.mapping.deep import is_outer
from amanda.rewrite.mapping.pattern import parse_endpoint
from amanda.rewrite.mapping.rule import RELABEL, NewOp, Replacement
from amanda.rewrite.mapping.scope import Scope, end_name
from amanda.rewrite.mapping.values import Far, far_producer

if TYPE_CHECKING:
    from amanda.rewrite.mapping.rule import Rule

__all__ = ["apply_replacement"]

_DROP = object()
_KEPT_WITHOUT_TYPE = ("metadata",)


def _ports(values: Sequence[Any] | None, old: tuple[Port, ...]) -> tuple[Port, ...]:
    if values is None:
        return old
    ports = []
    for value in values:
        if isinstance(value, Port):
            ports.append(value)
        elif isinstance(value, str):
            ports.append(Port(value))
        elif isinstance(value, Mapping) and "name" in value:
            attrs = {k: v for k, v in (value.get("attrs") or {}).items() if v is not None}
            ports.append(Port(str(value["name"]), attrs=attrs))
        else:
            raise TypeError(f"a port is a name or {{name, attrs}}, found {value!r}")
    return tuple(ports)


def _attrs(old: Container | None, spec: NewOp) -> dict[str, Any]:
    keep = spec.keep_attrs if spec.keep_attrs is not None else spec.type is None
    source = old.attrs if old is not None else {}
    if keep is True:
        attrs = dict(source)
    elif keep is False:
        attrs = {k: source[k] for k in _KEPT_WITHOUT_TYPE if k in source}
    else:
        attrs = {k: source[k] for k in keep if k in source}
    for key in spec.drop_attrs:
        attrs.pop(key, None)
    for key, value in (spec.attrs or {}).items():
        if value is None:
            attrs.pop(key, None)
        else:
            attrs[key] = value
    return attrs


def _schema(type_: str, namespace: str | None) -> Any:
    """The schema of ``type_`` in ``namespace``, or None (user namespaces need no schema)."""
    from amanda.namespaces.namespace import namespace as lookup

    if namespace is None:
        return None
    try:
        return lookup(namespace).schema(type_)
    except SchemaError:
        return None


def _fits(op: Container, schema: Any) -> bool:
    """Whether the op's port names are ports of ``schema`` (values of a variadic one included)."""
    for names, ports in ((op.input_names, schema.inputs), (op.output_names, schema.outputs)):
        variadic = ports[-1].name + "_" if ports and ports[-1].variadic else None
        fixed = {p.name for p in ports if not p.variadic}
        if any(n not in fixed and not (variadic and n.startswith(variadic)) for n in names):
            return False
    return True


def _schema_ports(type_: str, namespace: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    schema = _schema(type_, namespace)
    if schema is None:
        return (), ()
    # optional outputs are left out: an output nobody asked for would be computed for nothing
    return (tuple(p.name for p in schema.inputs if not p.variadic),
            tuple(p.name for p in schema.outputs if not p.variadic and not p.optional))


class _Application:
    """The bookkeeping of one replacement applied to one match."""

    def __init__(self, scope: Scope, rule: Rule, names: Mapping[str, str], rep: Replacement) -> None:
        self.scope, self.rule, self.rep = scope, rule, rep
        self.matched = dict(names)
        self.var_of = {name: var for var, name in names.items()}
        self.where = "/".join((*scope.path, next(iter(names.values()))))
        self.ports: dict[tuple[str, Any], Any] = {}
        for key, value in rep.ports.items():
            var, port = parse_endpoint(key, self.where)
            if var not in self.matched:
                self.fail(f"ports naming a matched variable ({', '.join(self.matched)})", key)
            self.ports[(var, port)] = value
        self.new_names: dict[str, str] = {}
        self.new_ops: dict[str, Container] = {}
        self.added: dict[str, str] = {}  # input port asked for -> the name it got

    def fail(self, expected: str, found: str) -> None:
        raise MappingError.at(self.where, expected, found, f"rule {self.rule.name!r}")

    # -- the new ops --------------------------------------------------------------------------

    def build_ops(self, kept: set[str]) -> None:
        scope, target = self.scope, self.scope.ctx.target
        removed = {self.matched[v] for v in self.matched if v not in self.rep.ops} - kept
        first = next(iter(self.matched.values()))
        for var, spec in self.rep.ops.items():
            ns = (spec.attrs or {}).get("namespace") or target
            if var in self.matched:
                old = scope.ops[self.matched[var]]
                self.new_names[var] = str(old.name)
                self.new_ops[var] = self._updated(old, spec, ns)
                continue
            if spec.type is None:
                raise MappingError.at(self.where, f"a type for the created op ${var}", "none",
                                      f"rule {self.rule.name!r}")
            name = scope.fresh_name(spec.name or f"{first}/{var}", removed)
            removed.discard(name)
            ins, outs = _schema_ports(spec.type, ns)
            inputs = _ports(spec.inputs, tuple(Port(p) for p in ins))
            outputs = _ports(spec.outputs, tuple(Port(p) for p in outs))
            self.new_names[var] = name
            self.new_ops[var] = Container(spec.type, name, inputs=inputs, outputs=outputs,
                                          attrs=_attrs(None, spec))

    def _updated(self, old: Container, spec: NewOp, ns: str) -> Container:
        type_ = spec.type or old.type
        default_in, default_out = old.inputs, old.outputs
        if spec.type is not None:
            schema = _schema(spec.type, ns)
            if schema is not None and not _fits(old, schema):
                # ports of another vocabulary: the schema's, re-attached by position
                ins, outs = _schema_ports(spec.type, ns)
                default_in, default_out = tuple(map(Port, ins)), tuple(map(Port, outs))
        inputs = _ports(spec.inputs, default_in)
        outputs = _ports(spec.outputs, default_out)
        attrs = _attrs(old, spec)
        attrs.pop("namespace", None)  # the scope settles namespaces when it builds
        explicit = (spec.attrs or {}).get("namespace")
        if explicit:
            attrs["namespace"] = explicit
        if type_ == old.type and inputs == old.inputs and outputs == old.outputs and \
                value_key(attrs) == value_key(dict(old.attrs)):
            return old
        return Container(type_, old.name, inputs=inputs, outputs=outputs, attrs=attrs, uid=old.uid,
                         controls=old.controls)

    # -- port resolution ----------------------------------------------------------------------

    def _new_end(self, text: str, side: str) -> tuple[Any, Any]:
        var, port = parse_endpoint(text, self.where)
        if var == "SELF":
            port = self.added.get(str(port), port)
            names = {p.name for p in self.scope.inputs} if side == "src" else \
                {p.name for p in self.scope.container.outputs}
            if port not in names:
                self.fail(f"a {'input' if side == 'src' else 'output'} port of the container "
                          f"({sorted(names)})", text)
            return (SELF, port)
        if var not in self.new_ops:
            what = "removes" if var in self.matched else "does not define"
            self.fail("endpoints of the replacement's ops", f"{text} (the replacement {what} ${var})")
        op = self.new_ops[var]
        names_ = op.output_names if side == "src" else op.input_names
        if port != CONTROL and port not in names_:
            self.fail(f"{'an output' if side == 'src' else 'an input'} port of ${var} "
                      f"({op.type}: {list(names_)})", text)
        return ((self.new_names[var],), port)

    def _default_port(self, var: str, port: Any, side: str) -> Any:
        """The same-named port of the updated op, else the one at the same position."""
        if var not in self.new_ops or port == CONTROL:
            return None
        old = self.scope.ops[self.matched[var]]
        new = self.new_ops[var]
        old_names = old.input_names if side == "input" else old.output_names
        new_names = new.input_names if side == "input" else new.output_names
        if port in new_names:
            return port
        index = old_names.index(port) if port in old_names else -1
        if 0 <= index < len(new_names) and new_names[index] not in old_names:
            return new_names[index]
        return None

    def input_targets(self, var: str, port: Any, producer: Any) -> list[tuple[Any, Any]]:
        if (var, port) in self.ports:
            value = self.ports[(var, port)]
            values = [] if value is None else [value] if isinstance(value, str) else list(value)
            return [self._new_end(v, "dst") for v in values]
        found = self._default_port(var, port, "input")
        if found is None and var not in self.new_ops and (var, port) in self.forwarded():
            return []  # the value goes on to the consumers of the removed op, not into it
        if found is None:
            self.fail(f"a place for ${var}.{port}, which {producer} feeds from outside the match "
                      f"(add ports: {{${var}.{port}: ...}}, or null to drop it)", "none")
        return [((self.new_names[var],), found)]

    def forwarded(self) -> set[tuple[str, Any]]:
        """Inputs of matched ops that ``ports`` forwards to the consumers of an output."""
        found = set()
        for value in self.ports.values():
            if isinstance(value, str):
                var, port = parse_endpoint(value, self.where)
                if var in self.matched and port in self.scope.ops[self.matched[var]].input_names:
                    found.add((var, port))
        return found

    def output_source(self, var: str, port: Any, seen: frozenset = frozenset()) -> Any:
        """Where the value of output ``port`` of ``var`` now comes from (None: nowhere)."""
        if (var, port) in seen:
            self.fail("port mappings without a cycle", f"${var}.{port} again")
        if (var, port) not in self.ports:
            found = self._default_port(var, port, "output")
            return None if found is None else ((self.new_names[var],), found)
        value = self.ports[(var, port)]
        if value is None:
            return _DROP
        if not isinstance(value, str):
            self.fail(f"one endpoint for output ${var}.{port}", repr(value))
        other, other_port = parse_endpoint(value, self.where)
        if other == "SELF":
            return self._new_end(value, "src")
        if other in self.new_ops and other_port in self.new_ops[other].output_names:
            return self._new_end(value, "src")
        if other in self.matched and other_port in self.scope.ops[self.matched[other]].input_names:
            return self._forward(other, other_port, seen | {(var, port)})
        self.fail("an output of the replacement, SELF.<input>, or an input of a matched op", value)
        return None

    def _forward(self, var: str, port: Any, seen: frozenset) -> Any:
        fed = self.scope.producers(self.matched[var], port)
        if not fed:
            self.fail(f"a producer of ${var}.{port} to forward", "an input nobody feeds")
        src, src_port = fed[0]
        if src in self.var_of:
            return self.output_source(self.var_of[src], src_port, seen)
        return (SELF if src is None else src if isinstance(src, tuple) else (src,), src_port)


def apply_replacement(scope: Scope, rule: Rule, names: Mapping[str, Any], rep: Any) -> set[str]:
    """Apply ``rep`` to the match ``names`` (var -> op name, or a ``Far`` key: an op of another
    level, which the replacement may read but not name: one that names it, to change or re-route
    it, is not applied, as the ops are no siblings); the names it changed."""
    if rep is RELABEL:
        return _relabel(scope, names)
    if not isinstance(rep, Replacement):
        raise MappingError.at(rule.name, "a Replacement, None or Skip from the rule",
                              type(rep).__name__)
    far = {var: key for var, key in names.items() if isinstance(key, Far)}
    if far and _names_any(rep, set(far)):
        return set()  # it would change an op of another level: no match across the boundary for this rule
    app = _Application(scope, rule, {v: n for v, n in names.items() if v not in far}, rep)
    matched_names = set(app.matched.values())
    internal: list[Edge] = []
    boundary: list[Edge] = []
    touching = scope.touching(matched_names)
    for edge in touching:
        inside = end_name(edge[0]) in matched_names and end_name(edge[1]) in matched_names
        (internal if inside or _from_far(scope, edge, matched_names, far) else boundary).append(edge)
    kept = _kept(app, boundary, internal)
    app.build_ops(kept)
    for port in rep.inputs:
        app.added[port.name] = scope.add_input(port)
    edges, preds, succs = _reattached(app, boundary, kept)
    for text in rep.edges:
        src_text, dst_text = (text.split("->", 1) if isinstance(text, str) else text)
        edges.append(Edge(app._new_end(src_text.strip(), "src"), app._new_end(dst_text.strip(), "dst")))
    edges += _bridged([((app.new_names[v],), CONTROL) for v in rep.ops], preds, succs)
    _record_names(app, kept)
    _place(scope, app, kept, touching, edges)
    return {app.new_names[v] for v in rep.ops} | (matched_names - kept)


def _names_any(rep: Replacement, variables: set[str]) -> bool:
    """Whether the replacement names one of ``variables`` in its ops, ports or edges."""
    def var(text: Any) -> str:
        return str(text).strip().split(".", 1)[0].removeprefix("$")

    ends = [*rep.ports]
    for value in rep.ports.values():
        ends += [] if value is None else [value] if isinstance(value, str) else list(value)
    for edge in rep.edges:
        ends += edge.split("->", 1) if isinstance(edge, str) else list(edge)
    return bool(variables & {*rep.ops, *map(var, ends)})


def _from_far(scope: Scope, edge: Edge, matched: set[str], far: Mapping[str, Far]) -> bool:
    """Whether ``edge`` carries the value of a matched op of another level into a matched op
    (through a container port): a matched edge, as if the two were siblings."""
    if not far or edge.is_control or end_name(edge[1]) not in matched or \
            isinstance(end_name(edge[0]), tuple) or scope.is_leaf(end_name(edge[0])):
        return False
    found = far_producer(scope, end_name(edge[1]), edge[1][1])
    return found is not None and found[0] in far.values()


def _relabel(scope: Scope, names: Mapping[str, Any]) -> set[str]:
    """Move the matched ops to the target namespace as they are; the names that moved."""
    changed = {n for n in names.values() if isinstance(n, str) and scope.ns.get(n) != scope.ctx.target}
    for name in changed:
        scope.ns[name] = scope.ctx.target
    scope.changed = scope.changed or bool(changed)
    return changed


def _reattached(app: _Application, boundary: list[Edge], kept: set[str]) -> tuple[list[Edge], list, list]:
    """The edges crossing the match's boundary, re-attached to the replacement; and the
    control predecessors and successors of removed ops (see :func:`_bridged`)."""
    matched_names = set(app.matched.values())
    edges: list[Edge] = []
    preds, succs = [], []
    for edge in boundary:
        src, dst = end_name(edge[0]), end_name(edge[1])
        if src in kept or dst in kept:
            edges.append(edge)
        elif edge.is_control:
            if app.var_of.get(src if src in matched_names else dst) in app.rep.ops:
                edges.append(edge)  # an updated op keeps its control edges
            elif dst in matched_names:
                preds.append(edge[0])
            else:
                succs.append(edge[1])
        elif dst in matched_names:
            described = "the container's input" if src is None else \
                "an op outside this container" if is_outer(edge[0]) else "/".join(edge[0][0])
            edges += [Edge(edge[0], t, attrs=edge[2]) for t in app.input_targets(app.var_of[dst], edge[1][1], described)]
        else:
            edges += _read_outside(app, edge, src)
    return edges, preds, succs


def _read_outside(app: _Application, edge: Edge, src: str) -> list[Edge]:
    """A data edge from a matched op to outside the match, from where its value now comes."""
    source = app.output_source(app.var_of[src], edge[0][1])
    if source is None:
        app.fail(f"a producer for ${app.var_of[src]}.{edge[0][1]}, read outside the match",
                 "none (map it in ports)")
    return [] if source is _DROP else [Edge(source, edge[1], attrs=edge[2])]


def _bridged(anchors: list, preds: list, succs: list) -> list[Edge]:
    """Control edges of removed ops moved to every op of the replacement (``anchors``), or,
    when it has none, joining the removed ops' predecessors to their successors."""
    edges = []
    for pred in preds:
        edges += [Edge(pred, a) for a in anchors] if anchors else [Edge(pred, s) for s in succs]
    for succ in succs:
        edges += [Edge(a, succ) for a in anchors]
    return edges


def _kept(app: _Application, boundary: list[Edge], internal: list[Edge]) -> set[str]:
    """Removed ops whose outputs are still read outside the match through unmapped ports."""
    kept = set()
    for edge in boundary:
        src = end_name(edge[0])
        var = app.var_of.get(src)
        if var is None or edge.is_control or var in app.rep.ops:
            continue
        if (var, edge[0][1]) not in app.ports:
            kept.add(src)
    for edge in internal:
        dst = end_name(edge[1])
        if dst in kept and not edge.is_control and end_name(edge[0]) not in kept:
            app.fail(f"{dst!r} (still read outside the match, so kept) to keep its inputs",
                     f"its input {edge[1][1]!r} fed from inside the match")
    return kept


def _record_names(app: _Application, kept: set[str]) -> None:
    scope, ctx = app.scope, app.scope.ctx
    for var, name in app.matched.items():
        if name in kept:
            continue
        for port in scope.ops[name].output_names:
            try:
                source = app.output_source(var, port)
            except MappingError:
                source = None
            old = ctx.endpoint((*scope.path, name), port)
            if source is None or source is _DROP or is_outer(source):
                ctx.record(old, None)  # gone, or produced outside this container
            elif source[0] is SELF:
                ctx.record(old, ctx.endpoint(scope.path, source[1], container=True))
            else:
                ctx.record(old, ctx.endpoint((*scope.path, *source[0]), source[1]))


def _place(scope: Scope, app: _Application, kept: set[str], touching: list[Edge], edges: list[Edge]) -> None:
    """Splice the replacement in (the engine's one way to apply a replacement): the touching
    edges and removed ops go, the replacement's ops come where the first matched op was, in
    the namespace each asks for, and the re-attached edges come in."""
    matched = set(app.matched.values())
    first = min(scope.pos[n] for n in matched)
    new = list(app.new_ops.items())
    scope.splice(touching, matched - kept, [op for _, op in new], [first] * len(new), edges)
    for var, op in new:
        scope.ns[str(op.name)] = (app.rep.ops[var].attrs or {}).get("namespace") or scope.ctx.target
