"""A stateful machine applies random edits to a model and to a plain-set mirror of its
effective dataflow, and checks after every step that they agree and that every earlier
version of the model is unchanged; consolidate, fuse and unfuse also keep every leaf's
effective attributes (wrappers and tags set attributes at random levels)."""

import itertools

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import amanda
from amanda import SELF, Container, consolidate, edit, fuse, op, unfuse
from tests.strategies import check_invariants, dataflow, same_leaf_attrs, snapshot

TAGS = st.dictionaries(st.sampled_from(["debug", "tag"]), st.sampled_from([True, False, "a", "b"]), max_size=2)


def leaf_paths(model: Container) -> dict[str, tuple]:
    return {path[-1]: path for path, node, _ in amanda.walk(model) if node.is_op and path}


def live_leaf_edges(model: Container) -> list[tuple]:
    """Stored data edges joining two leaves in one hop and buried by no tombstone above them,
    in top coordinates: exactly what an edit can remove by naming it."""
    buried: dict[tuple, int] = {}
    stored = []
    for path, node, _ in amanda.walk(model):
        for tomb in node.tombstones:
            key = (path + tomb.src.op, tomb.src.port, path + tomb.dst.op, tomb.dst.port)
            buried[key] = min(buried.get(key, len(path)), len(path))
        for edge in node.edges:
            if edge.is_control or edge.src.op is SELF or edge.dst.op is SELF:
                continue
            src, dst = path + edge.src.op, path + edge.dst.op
            if model.descendant(src).is_op and model.descendant(dst).is_op:
                stored.append(((src, edge.src.port, dst, edge.dst.port), len(path)))
    return [key for key, depth in stored if buried.get(key, depth) >= depth]


class EditMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.names = itertools.count()
        first, second = self.fresh_op(), self.fresh_op()
        self.model = Container("Graph", "g", children=[first, second], edges=[(f"{first.name}:y", f"{second.name}:x")],
                               attrs={"debug": True})
        self.mirror = {(first.name, "y", second.name, "x")}
        self.history: list[tuple[Container, dict, set]] = []
        self.remember()

    def fresh_op(self) -> Container:
        return op("Op", f"n{next(self.names)}", ["x"], ["y"])

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self.names)}"

    def remember(self) -> None:
        check_invariants(self.model)
        self.history.append((self.model, snapshot(self.model), dataflow(self.model)))

    def in_wrapper(self, path: tuple) -> tuple:
        return (self.model.name, *path)

    def upstream(self, name: str) -> set:
        found, todo = set(), [name]
        while todo:
            current = todo.pop()
            for a, _, b, _ in self.mirror:
                if b == current and a not in found:
                    found.add(a)
                    todo.append(a)
        return found

    @rule(data=st.data())
    def add_op(self, data):
        new = self.fresh_op()
        paths = leaf_paths(self.model)
        src = data.draw(st.sampled_from(sorted(paths)))
        self.model = (
            edit(self.model).add(new).connect((self.in_wrapper(paths[src]), "y"), f"{new.name}:x")
            .build(name=self.fresh("w"))
        )
        self.mirror.add((src, "y", new.name, "x"))
        self.remember()

    @rule(data=st.data())
    def connect(self, data):
        paths = leaf_paths(self.model)
        fed = {b for _, _, b, _ in self.mirror}
        free = sorted(n for n in paths if n not in fed)
        if not free:
            return
        dst = data.draw(st.sampled_from(free))
        sources = sorted(n for n in paths if n != dst and dst not in self.upstream(n))
        if not sources:
            return
        src = data.draw(st.sampled_from(sources))
        self.model = edit(self.model).connect((self.in_wrapper(paths[src]), "y"), (self.in_wrapper(paths[dst]), "x")).build(name=self.fresh("w"))
        self.mirror.add((src, "y", dst, "x"))
        self.remember()

    @rule(data=st.data())
    def remove_edge(self, data):
        edges = live_leaf_edges(self.model)
        if not edges:
            return
        src, sport, dst, dport = data.draw(st.sampled_from(edges))
        self.model = edit(self.model).remove_edge((self.in_wrapper(src), sport), (self.in_wrapper(dst), dport)).build(name=self.fresh("w"))
        self.mirror.discard((src[-1], sport, dst[-1], dport))
        self.remember()

    @rule(attrs=TAGS)
    def wrap(self, attrs):
        self.model = edit(self.model).build(name=self.fresh("w"), attrs=attrs)
        self.remember()

    @rule(data=st.data(), attrs=TAGS)
    def tag(self, data, attrs):
        paths = [p for p, _, _ in amanda.walk(self.model)]
        self.model = amanda.with_attrs(self.model, [data.draw(st.sampled_from(paths))], **attrs)
        self.remember()

    @rule()
    def consolidate(self):
        before = self.model
        self.model = consolidate(self.model)
        assert same_leaf_attrs(self.model, before)
        self.remember()

    @rule(data=st.data())
    def fuse(self, data):
        parents = [(p, n) for p, n, _ in amanda.walk(self.model) if len(n.children) >= 1]
        path, parent = data.draw(st.sampled_from(parents))
        members = data.draw(st.lists(st.sampled_from([c.name for c in parent.children]), min_size=1, unique=True))
        before = self.model
        self.model = fuse(self.model, [(*path, m) for m in members], "Fused", name=self.fresh("f"))
        assert same_leaf_attrs(self.model, before)
        self.remember()

    @precondition(lambda self: any(p and not n.is_op for p, n, _ in amanda.walk(self.model)))
    @rule(data=st.data())
    def unfuse(self, data):
        candidates = []
        for path, node, _ in amanda.walk(self.model):
            if not path or node.is_op or node.controls:
                continue
            parent = self.model.descendant(path[:-1]) if path[:-1] else self.model
            others = {c.name for c in parent.children} - {node.name}
            if not others & {c.name for c in node.children}:
                candidates.append(path)
        if not candidates:
            return
        before = self.model
        self.model = unfuse(self.model, data.draw(st.sampled_from(candidates)))
        assert same_leaf_attrs(self.model, before)
        self.remember()

    @invariant()
    def agrees_with_mirror(self):
        assert dataflow(self.model) == self.mirror

    @invariant()
    def earlier_versions_unchanged(self):
        for version, document, flow in self.history[-4:]:
            assert snapshot(version) == document
            assert dataflow(version) == flow


EditMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=12, deadline=None)
TestEditMachine = EditMachine.TestCase
