"""YAML and JSON: the example documents, lossless round trips, and located errors."""

import copy
import glob
import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import amanda
from amanda import AmandaError, Container, Edge, FormatError, Port, op
from amanda.io import from_document, to_document
from tests.strategies import containers

DOCUMENT_FIXTURES = sorted(glob.glob("tests/fixtures/documents/*.yaml"))


@pytest.mark.parametrize("path", DOCUMENT_FIXTURES, ids=lambda p: p.rsplit("/", 1)[-1])
def test_every_example_document_loads_as_written(path):
    """Each example document of docs/format.md loads and round-trips through YAML and JSON."""
    item = amanda.load(path)
    assert isinstance(item, (Container, Edge, Port))
    if isinstance(item, Container):
        assert amanda.loads(amanda.dumps(item)) == item
        assert amanda.loads(amanda.dumps(item, "json"), "json") == item


def test_tensorflow_graph_fields():
    """The example TensorFlow graph keeps its namespace, attributes and port attributes."""
    g = amanda.load("tests/fixtures/documents/tensorflow_dense_graph.yaml")
    assert g.namespace == "amanda/tensorflow/1.13.1"
    assert g.attrs["versions"]["producer"] == 27
    kernel = g.child("dense/kernel")
    assert kernel.outputs[0].attrs["is_ref"] is True
    assert kernel.attrs["shape"] == (784, 10)
    assert [str(e.dst) for e in amanda.flatten(g).edges] == ["dense/MatMul:a", "dense/MatMul:b", "dense/Relu:features"]


def test_subgraph_addresses_its_own_ports_by_name():
    """In the fc subgraph `{op: fc, port: input}` is the subgraph's own port."""
    fc = amanda.load("tests/fixtures/documents/subgraph_fc.yaml")
    assert str(amanda.flatten(fc).inputs["input"][0]) == "dense/MatMul:a"
    assert fc.attrs == {"units": 10, "activation": "tf.nn.relu", "use_bias": False}


def test_op_named_through_attrs():
    """The document `op: attrs: name: g` names the op g; a field given beside it wins."""
    g = amanda.load("tests/fixtures/documents/op_attrs_name_g.yaml")
    assert g.name == "g" and dict(g.attrs) == {}
    both = amanda.loads("op: {name: f, type: Optional, attrs: {type: seq, name: n}}")
    assert (both.name, both.type, dict(both.attrs)) == ("f", "Optional", {"type": "seq", "name": "n"})


def test_attributes_named_like_fields_round_trip():
    """An op with attributes called `name` and `type` but no type field round-trips exactly."""
    c = Container(name=None, attrs={"type": "x", "name": "y"})
    for fmt in ("yaml", "json"):
        assert amanda.loads(amanda.dumps(c, fmt), fmt) == c


def test_index_and_control_endpoints_load():
    """Endpoints by index and control edges (port -1) load as docs/format.md specifies."""
    g = amanda.loads(
        """
graph:
  ops:
    - {name: f, input_ports: [{name: x}], output_ports: [{name: m}, {name: n}]}
    - {name: g, input_ports: [{name: z}], output_ports: [{name: k}]}
  edges:
    - output_port: {op: 0, port: 1}
    - input_port: {op: 1, port: 0}
"""
        .replace("    - input_port", "      input_port")
        + """    - output_port: {op: f, port: -1}
      input_port: {op: g, port: -1}
"""
    )
    assert [(str(e.src), str(e.dst)) for e in g.edges] == [("f:n", "g:z"), ("f:-1", "g:-1")]


@given(containers())
def test_yaml_and_json_round_trips_are_lossless(c):
    """dumps then loads gives an equal container, uids included, in both formats."""
    for fmt in ("yaml", "json"):
        again = amanda.loads(amanda.dumps(c, fmt), fmt)
        assert again == c
        assert [x.uid for x in again] == [x.uid for x in c]


def test_arrays_round_trip_exactly():
    """ndarray attributes keep dtype, shape and every bit of their values."""
    values = {
        "f32": np.array([[1.5, np.nan], [-0.0, np.inf]], dtype=np.float32),
        "i8": np.arange(-3, 3, dtype=np.int8).reshape(2, 3),
        "b": np.array([True, False]),
        "scalar": np.float16(0.1),
        "empty": np.zeros((0, 4), dtype=np.int64),
        "big_endian": np.arange(3, dtype=">i4"),
    }
    c = op("Const", "c", attrs=values)
    for fmt in ("yaml", "json"):
        back = amanda.loads(amanda.dumps(c, fmt), fmt).attrs
        for key, value in values.items():
            value = np.asarray(value)
            assert back[key].dtype == value.dtype and back[key].shape == value.shape
            assert back[key].tobytes() == value.tobytes()
            assert not back[key].flags.writeable


def test_python_object_tags_are_refused():
    """YAML tags that would construct Python objects raise FormatError."""
    for text in ("op: !!python/object/apply:os.system ['true']", "op: {name: !!python/name:os.system }"):
        with pytest.raises(FormatError):
            amanda.loads(text)


def test_bad_field_is_reported_with_line_column_and_path():
    """A bad field names its document path and the line and column where it stands."""
    text = "graph:\n  ops:\n    - name: f\n      input_ports: [{name: x}]\n    - name: g\n      colour: red\n"
    with pytest.raises(FormatError) as info:
        amanda.loads(text)
    err = info.value
    assert err.path == ("graph", "ops", 1, "colour")
    assert (err.line, err.column) == (6, 7)
    assert "graph.ops[1].colour" in str(err)


def test_a_bad_field_is_located_without_composing_the_yaml_again(monkeypatch):
    """The line of a bad field comes from the node tree the first reading composed: a YAML
    document is composed once however it fails (JSON, whose reader keeps no marks, once to
    locate), so rejecting a large document costs about what loading it does."""
    import amanda.io.text as text_module
    import amanda.safe_load as safe_load

    calls = []
    real = safe_load.compose_yaml

    def counted(text):
        calls.append(len(text))
        return real(text)

    monkeypatch.setattr(safe_load, "compose_yaml", counted)
    monkeypatch.setattr(text_module, "compose_yaml", counted)
    yaml_text = "graph:\n  ops:\n    - name: f\n      input_ports: [{name: x}]\n    - name: [1, 2]\n"
    json_text = '{"graph": {"ops": [{"name": "f"},\n {"name": [1, 2]}]}}'
    for text, format, where in ((yaml_text, "yaml", (5, 7)), (json_text, "json", (2, 3))):
        calls.clear()
        with pytest.raises(FormatError) as info:
            amanda.loads(text, format)
        assert info.value.path == ("graph", "ops", 1, "name")
        assert (info.value.line, info.value.column) == where
        assert len(calls) == 1, format


def test_invariant_errors_carry_document_position():
    """An edge to a missing port is reported at the container's place in the document."""
    text = "graph:\n  ops:\n    - {name: f, output_ports: [{name: m}]}\n  edges:\n    - output_port: {op: f, port: q}\n      input_port: {op: f, port: -1}\n"
    with pytest.raises(FormatError, match="'q'") as info:
        amanda.loads(text)
    assert info.value.line is not None


def test_syntax_errors_have_line_numbers():
    """Malformed YAML and JSON report where the parser stopped."""
    with pytest.raises(FormatError) as info:
        amanda.loads("graph:\n  ops: [\n")
    assert info.value.line is not None
    with pytest.raises(FormatError) as info:
        amanda.loads('{"graph": {"ops": [}}', "json")
    assert info.value.line == 1


def test_deep_nesting_gives_a_result_or_an_amanda_error():
    """Arbitrarily deep documents never raise RecursionError."""
    for depth in (50, 5000):
        text = '{"name": "leaf"}'
        for level in range(depth):
            text = f'{{"name": "s{level}", "ops": [{text}]}}'
        text = f'{{"subgraph": {text}}}'
        try:
            result = amanda.loads(text, "json")
        except AmandaError:
            continue
        assert isinstance(result, Container)
    with pytest.raises(AmandaError):
        amanda.loads("[" * 100000, "json")
    with pytest.raises(AmandaError):
        amanda.loads("a: " + "[" * 100000)


def test_load_and_dump_by_suffix(tmp_path):
    """load/dump pick YAML or JSON by suffix and refuse unknown suffixes."""
    g = amanda.load("tests/fixtures/documents/graph_f_g.yaml")
    for name in ("g.yaml", "g.yml", "g.json"):
        amanda.dump(g, tmp_path / name)
        assert amanda.load(tmp_path / name) == g
    with pytest.raises(FormatError, match="suffix"):
        amanda.dump(g, tmp_path / "g.txt")
    with pytest.raises(FormatError, match="cannot read"):
        amanda.load(tmp_path / "missing.yaml")


def _corruptions(doc: dict) -> list:
    """Ways to break a valid graph document, each guaranteed invalid."""
    body = doc["subgraph"]
    out = []

    def mutate(fn):
        broken = copy.deepcopy(doc)
        fn(broken["subgraph"])
        out.append(broken)

    mutate(lambda b: b.__setitem__("colour", "red"))
    mutate(lambda b: b.__setitem__("type", 5))
    mutate(lambda b: b.__setitem__("ops", {"not": "a list"}))
    if body.get("ops"):
        mutate(lambda b: b["ops"][0].__setitem__("input_ports", [{"attrs": {}}]))
        mutate(lambda b: b["ops"][0].__setitem__("name", ""))
        mutate(lambda b: b["ops"][0].__setitem__("attrs", [1, 2]))
        if len(body["ops"]) > 1:
            mutate(lambda b: b["ops"][1].__setitem__("name", b["ops"][0]["name"]))
    if body.get("edges"):
        mutate(lambda b: b["edges"][0]["output_port"].__setitem__("port", "zz_missing"))
        mutate(lambda b: b["edges"][0]["input_port"].__setitem__("op", 10_000))
        mutate(lambda b: b["edges"][0].pop("input_port"))
        mutate(lambda b: b["edges"][0]["output_port"].__setitem__("port", -7))
        mutate(lambda b: b["edges"][0]["output_port"].__setitem__("port", True))
    return out


@given(containers(), st.data())
def test_random_corruptions_are_rejected(c, data):
    """Every corruption of a valid document raises an AmandaError (never another error)."""
    doc = to_document(c)
    broken = data.draw(st.sampled_from(_corruptions(doc)))
    with pytest.raises(AmandaError):
        from_document(broken)
    with pytest.raises(AmandaError):
        amanda.loads(json.dumps(broken), "json")


@given(containers(max_ops=4), st.data())
def test_random_text_damage_gives_a_result_or_an_amanda_error(c, data):
    """Deleting or replacing a slice of a valid YAML text never raises anything but AmandaError."""
    text = amanda.dumps(c)
    start = data.draw(st.integers(0, len(text) - 1))
    stop = data.draw(st.integers(start, min(len(text), start + 20)))
    filler = data.draw(st.sampled_from(["", "[", "{", ":", "-1", "!!python/none", "\n  - ", "'"]))
    try:
        amanda.loads(text[:start] + filler + text[stop:])
    except AmandaError:
        pass


@given(containers())
def test_loading_and_dumping_never_mutate(c):
    """dumps and flatten leave the container exactly as it was."""
    before = to_document(c)
    amanda.dumps(c)
    amanda.flatten(c)
    assert to_document(c) == before


def _array_doc(dtype, shape, data):
    spec = {"dtype": dtype, "shape": shape, "data": data}
    return json.dumps({"op": {"name": "c", "attrs": {"v": {"__ndarray__": spec}}}})


@pytest.mark.parametrize("dtype, shape, data, expected", [
    ("|O", [1], "AAAAAAAAAAA=", "dtype"),
    ("V0", [1], "", "size"),
    ("(2,)<f4", [1], "AAAAAAAAAAA=", "sub-arrays"),
    ("[('a', '<f4')]", [1], "AAAAAA==", "dtype"),
    ({"names": ["a"], "formats": ["<f4"]}, [1], "AAAAAA==", "dtype"),
    ("<f4", [2**40, 2**40, 2**40], "AAAAAA==", "numpy can hold"),
    ("<f4", [2**20, 2**20], "AAAAAA==", "bytes for shape"),
    ("<f4", [2**64], "", "numpy can hold"),
    ("<f4", [0, 2**62], "", "numpy can hold"),
    ("<f4", [1] * 65, "AAAAAA==", "at most 64"),
    ("<f4", [-1], "AAAAAA==", "numpy can hold"),
    ("<f4", [True], "AAAAAA==", "numpy can hold"),
    ("<f4", [2], "AAAAAA==", "8 bytes"),
    ("<f4", [1], "AAA*AA==", "base64"),
    ("<f4", [1], 12, "base64"),
])
def test_bad_arrays_are_format_errors(dtype, shape, data, expected):
    """Object, zero-size, sub-array and record dtypes, bad or overflowing shapes and bad data
    are FormatErrors naming the field, never numpy's own errors."""
    with pytest.raises(FormatError, match=expected) as info:
        amanda.loads(_array_doc(dtype, shape, data), "json")
    assert info.value.path[:5] == ("op", "attrs", "v", "__ndarray__", info.value.path[4])


def test_large_arrays_are_written_in_short_lines_and_old_long_lines_still_load():
    """YAML folds array and bytes payloads into lines of at most 76 characters; a document
    with the payload on one long line (as written before) loads to the same values."""
    values = {"w": np.arange(3000, dtype=np.float32).reshape(30, 100), "b": bytes(range(256)) * 4}
    c = op("Const", "c", attrs=values)
    text = amanda.dumps(c)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert amanda.loads(text) == c
    import base64

    old = (
        "op:\n  name: c\n  type: Const\n  attrs:\n    w:\n      __ndarray__:\n        dtype: <f4\n"
        "        shape: [30, 100]\n        data: " + base64.b64encode(values["w"].tobytes()).decode()
        + "\n    b: {__bytes__: " + base64.b64encode(values["b"]).decode() + "}\n"
    )
    back = amanda.loads(old)
    assert back.attrs["w"].tobytes() == values["w"].tobytes() and back.attrs["b"] == values["b"]


def test_many_duplicate_edges_give_a_short_error_quickly():
    """2,000 copies of one edge are reported once per extra edge, in a message of bounded size."""
    import time

    edge = "    - {output_port: {op: f, port: m}, input_port: {op: g, port: x}}\n"
    text = ("graph:\n  ops:\n    - {name: f, output_ports: [{name: m}]}\n"
            "    - {name: g, input_ports: [{name: x}]}\n  edges:\n" + edge * 2000)
    start = time.perf_counter()
    with pytest.raises(FormatError, match="1999 invariant violations") as info:
        amanda.loads(text)
    assert time.perf_counter() - start < 5
    assert len(str(info.value)) < 5000 and "and 1979 more" in str(info.value)
