"""Wrong argument types to the public functions of amanda.containers raise AmandaError
subclasses that say what was expected, never a bare TypeError, AttributeError or StopIteration."""

import numpy as np
import pytest

import amanda
from amanda import (
    Container,
    Edge,
    Endpoint,
    Port,
    bind,
    chain,
    consolidate,
    edit,
    effective_attrs,
    flatten,
    fuse,
    load_weights,
    named_merge,
    op,
    replace,
    save_weights,
    unfuse,
    walk,
)
from amanda.containers import iter_ops, phases, sorted_ops
from amanda.errors import AmandaError


def model():
    return chain(op("Dense", "d1", ["x"], ["y"], {"k": np.zeros(2)}), op("Dense", "d2", ["x"], ["y"]), name="m")


M = model()

# (what is called, the call, what the message must say was expected)
CASES = [
    ("Container children int", lambda: Container(children=3), "a sequence of children"),
    ("Container edges int", lambda: Container(edges=3), "a sequence of edges"),
    ("Container tombstones int", lambda: Container(tombstones=3), "a sequence of tombstones"),
    ("Container inputs int", lambda: Container(inputs=3), "a sequence of ports"),
    ("Container inputs bytes", lambda: Container(inputs=b"x"), "a sequence of ports"),
    ("Container integer port name", lambda: Container(inputs=[3]), "a port name"),
    ("Container bytes edge", lambda: Container(children=[op("A", "a", [], ["y"])], edges=[b"a:y"]), "an edge"),
    ("Container attrs list", lambda: Container(attrs=[1]), "attribute"),
    # numpy arrays as fields have no truth value: each is named, not a bare ValueError
    ("Container attrs array", lambda: Container("G", "g", attrs=np.zeros((2, 2))), "at g: expected attrs as a mapping"),
    ("Container children array", lambda: Container("G", "g", children=np.zeros(2)), "at g/children: expected a sequence"),
    ("Container edges array", lambda: Container("G", "g", edges=np.array([["a:y", "b:x"]])), "at g/edges: expected a seq"),
    ("Container tombstones array", lambda: Container("G", "g", tombstones=np.zeros(3)), "at g/tombstones: expected a"),
    ("Container inputs array", lambda: Container("G", "g", inputs=np.array([["x"]])), "a sequence of ports"),
    ("Container name array", lambda: Container("G", np.array("g")), "string name"),
    ("op attrs array", lambda: op("Relu", "r", ["X"], ["Y"], np.ones(3)), "at r: expected attrs as a mapping"),
    ("fuse attrs array", lambda: fuse(M, ["d1"], "F", "f", np.ones(3)), "expected attrs as a mapping"),
    ("Container.child None", lambda: M.child(None), "a child named one of"),
    ("Container.descendant float", lambda: M.descendant(3.5), "an existing descendant path"),
    ("Container.port None", lambda: M.port(None), "an output port among"),
    ("Container.port side", lambda: M.port("y", side=3), "'input' or 'output'"),
    ("Container.has_child unhashable", lambda: M.has_child([1]), "a child name"),
    ("Container.child_index unhashable", lambda: M.child_index({}), "a child name"),
    ("Container.evolve unknown field", lambda: M.evolve(foo=1), "fields among"),
    ("Container.evolve children int", lambda: M.evolve(children=3), "a sequence of children"),
    ("Container.with_attrs object", lambda: M.with_attrs(x=object()), "storable attribute values"),
    ("Container.without_attrs unhashable", lambda: M.without_attrs([1]), "an attribute name"),
    ("Container.with_name int", lambda: M.with_name(3), "string name"),
    ("Container >> int", lambda: M >> 3, "a Container"),
    ("Container() int", lambda: M(3), "a Container"),
    ("Container.sorted skip int", lambda: M.sorted(skip=3), "a function"),
    ("Port integer name", lambda: Port(3), "a port name"),
    ("Port attrs int", lambda: Port("x", attrs=3), "port attributes as a mapping"),
    ("Endpoint port None", lambda: Endpoint("a", None), "a port name or index"),
    ("Endpoint.parse bytes", lambda: Endpoint.parse(b"a:x"), "an endpoint string"),
    ("Endpoint.of bytes", lambda: Endpoint.of(b"a:x"), "an endpoint"),
    ("Edge bytes endpoint", lambda: Edge(b"a:x", "b:y"), "an endpoint"),
    ("Edge attrs int", lambda: Edge("a:x", "b:y", attrs=3), "edge attributes as a mapping"),
    ("Edge unhashable phase", lambda: Edge("a:x", "b:y", attrs={"phase": [1]}), "a phase name"),
    ("Edge.of int", lambda: Edge.of(3), "an Edge or"),
    ("chain nothing", lambda: chain(), "at least one container"),
    ("chain None", lambda: chain(None), "a Container"),
    ("chain inputs int", lambda: chain(M, inputs=3), "new port names"),
    ("chain inputs str", lambda: chain(M, inputs="x"), "new port names"),
    ("chain outputs int keys", lambda: chain(M, outputs={1: 2}), "a mapping of port names"),
    ("chain name int", lambda: chain(M, name=3), "string name"),
    ("named_merge None", lambda: named_merge(None, []), "a list of containers"),
    ("named_merge one container", lambda: named_merge(M, []), "a list of containers"),
    ("named_merge patches None", lambda: named_merge([M], None), "a list of .output, input. pairs"),
    ("named_merge patches str", lambda: named_merge([M], "ab"), "a list of .output, input. pairs"),
    ("named_merge integer endpoints", lambda: named_merge([M], [(3, 4)]), "an endpoint"),
    ("named_merge bytes endpoints", lambda: named_merge([M], [(b"m:y", b"m:x")]), "an endpoint"),
    ("named_merge inputs int", lambda: named_merge([M], [], inputs=3), "a mapping"),
    ("edit None", lambda: edit(None), "a Container"),
    ("Edit.add None", lambda: edit(M).add(None), "a Container"),
    ("Edit.connect ints", lambda: edit(M).connect(3, 4), "an endpoint"),
    ("Edit.connect bytes", lambda: edit(M).connect(b"m:y", "m:x"), "an endpoint"),
    ("Edit.connect attrs int", lambda: edit(M).connect("m/d1:y", "m/d2:x", attrs=3), "edge attributes"),
    ("Edit.remove_edge None", lambda: edit(M).remove_edge(None, None), "an endpoint"),
    ("Edit.build attrs int", lambda: edit(M).build(attrs=3), "a mapping of attributes"),
    ("consolidate None", lambda: consolidate(None), "a Container"),
    ("replace None container", lambda: replace(None, "d1", M), "a Container"),
    ("replace None target", lambda: replace(M, None, M), "a path, a list of paths or a Selection"),
    ("replace dict target", lambda: replace(M, {"a": 1}, M), "a path, a list of paths or a Selection"),
    ("replace int new", lambda: replace(M, "d1", 3), "a Container or a function"),
    ("replace new returns int", lambda: replace(M, "d1", lambda old: 3), "a Container"),
    ("with_attrs None container", lambda: amanda.with_attrs(None, "d1", k=1), "a Container"),
    ("with_attrs None target", lambda: amanda.with_attrs(M, None, k=1), "a path"),
    ("with_attrs object value", lambda: amanda.with_attrs(M, "d1", x=object()), "storable"),
    ("fuse None", lambda: fuse(None, ["d1"], "F"), "a Container"),
    ("fuse None paths", lambda: fuse(M, None, "F"), "a path"),
    ("fuse None type", lambda: fuse(M, ["d1"], None), "an op type"),
    ("fuse int name", lambda: fuse(M, ["d1"], "F", name=3), "a name"),
    ("unfuse None", lambda: unfuse(None, "d1"), "a Container"),
    ("unfuse two paths", lambda: unfuse(M, ["d1", "d2"]), "exactly one"),
    ("bind None", lambda: bind(None, "train"), "a Container"),
    ("bind unhashable phase", lambda: bind(M, [1]), "a phase name"),
    ("phases None", lambda: phases(None), "a Container"),
    ("walk None", lambda: list(walk(None)), "a Container"),
    ("walk int", lambda: list(walk(3)), "a Container"),
    ("iter_ops None", lambda: list(iter_ops(None)), "a Container"),
    ("sorted_ops None", lambda: list(sorted_ops(None)), "a Container"),
    ("effective_attrs None", lambda: effective_attrs(None), "a Container"),
    ("flatten None", lambda: flatten(None), "a Container"),
    ("save_weights None", lambda: save_weights(None, "w.npz"), "a Container"),
    ("save_weights path None", lambda: save_weights(M, None), "a file path"),
    ("load_weights None", lambda: load_weights(None, "w.npz"), "a Container"),
    ("load_weights path int", lambda: load_weights(M, 3), "a file path"),
    ("load_weights by int", lambda: load_weights(M, "w.npz", by=3), "one of"),
    ("load_weights add_missing str", lambda: load_weights(M, "w.npz", add_missing="yes"), "True or False"),
    ("validate None", lambda: amanda.validate(None), "a Container"),
]


@pytest.mark.parametrize("call, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_wrong_argument_raises_an_amanda_error_saying_what_was_expected(call, expected, tmp_path,
                                                                         monkeypatch):
    """Each wrong argument raises an AmandaError subclass whose message names what was expected."""
    monkeypatch.chdir(tmp_path)
    before = amanda.dumps(M)
    with pytest.raises(AmandaError) as info:
        call()
    assert type(info.value).__module__.startswith("amanda")
    assert "expected" in str(info.value)
    assert __import__("re").search(expected, str(info.value)), str(info.value)
    assert amanda.dumps(M) == before  # a refused call changed nothing


def test_argument_errors_stay_catchable_as_the_builtins_they_replace():
    """ArgumentError is also a TypeError and a ValueError, for callers that caught those."""
    from amanda.errors import ArgumentError

    with pytest.raises(TypeError):
        Port(3)
    with pytest.raises(ValueError):
        Endpoint.parse("no-port")
    assert issubclass(ArgumentError, AmandaError)
