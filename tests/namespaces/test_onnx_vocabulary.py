"""The shipped ONNX vocabularies: accurate per opset, equal from onnx.defs and from the file."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from amanda.errors import SchemaError
from amanda.namespaces import PortSchema, namespace, onnx_vocab
from amanda.namespaces.onnx_vocab import (
    DATA_FILE,
    onnx_opset,
    onnx_vocabulary,
    vocabulary_from_file,
    vocabulary_from_onnx,
)

onnx_defs = pytest.importorskip("onnx.defs")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def from_onnx():
    return vocabulary_from_onnx()


@pytest.fixture(scope="module")
def from_file(from_onnx):
    vocabulary = vocabulary_from_file(DATA_FILE)
    if vocabulary.onnx_version != from_onnx.onnx_version:
        pytest.skip(f"shipped file is from onnx {vocabulary.onnx_version}, installed is "
                    f"{from_onnx.onnx_version}: run tools/gen_onnx_vocabulary.py")
    return vocabulary


def test_reduce_sum_axes_moves_from_attribute_to_input():
    """ReduceSum takes axes as an attribute in opset 11 and as an optional input in 13."""
    r11 = namespace("amanda/onnx/11").schema("ReduceSum")
    assert "axes" in r11.attrs and r11.input_names == ("data",)
    r13 = namespace("amanda/onnx/13").schema("ReduceSum")
    assert r13.input_names == ("data", "axes") and "axes" not in r13.attrs
    assert r13.port("axes").optional and not r13.port("data").optional
    assert r13.port("axes").allowed_types == ("tensor(int64)",)
    assert r13.attr("keepdims").default == 1 and r13.since_version == 13


@pytest.mark.parametrize("op", ["Squeeze", "Unsqueeze"])
def test_squeeze_unsqueeze(op):
    """Squeeze/Unsqueeze move axes from an attribute (<= 12) to an input (>= 13)."""
    old, new = namespace("amanda/onnx/12").schema(op), namespace("amanda/onnx/13").schema(op)
    assert old.input_names == ("data",) and "axes" in old.attrs
    assert new.input_names == ("data", "axes") and "axes" not in new.attrs
    assert old.attr("axes").required == (op == "Unsqueeze")
    assert new.port("axes").optional == (op == "Squeeze")


def test_split_versions():
    """Split: split is an attribute to 12, an optional input from 13; num_outputs from 18."""
    s11, s13, s18 = (namespace(f"amanda/onnx/{v}").schema("Split") for v in (11, 13, 18))
    assert s11.input_names == ("input",) and "split" in s11.attrs
    assert s13.input_names == ("input", "split") and s13.port("split").optional
    assert "num_outputs" not in s13.attrs and "num_outputs" in s18.attrs
    assert s18.outputs == (PortSchema("outputs", variadic=True, type_constraint="T",
                                      allowed_types=s18.type_constraints["T"],
                                      homogeneous=True, min_arity=1),)


def test_slice_versions():
    """Slice takes starts/ends as attributes in opset 1-9 and as inputs from 10."""
    s9, s10 = namespace("amanda/onnx/9").schema("Slice"), namespace("amanda/onnx/10").schema(
        "Slice")
    assert s9.input_names == ("data",) and s9.required_attrs == ("ends", "starts")
    assert s10.input_names == ("data", "starts", "ends", "axes", "steps") and not s10.attrs
    assert [p.optional for p in s10.inputs] == [False, False, False, True, True]


def test_pad_versions():
    """Pad: paddings (1), pads attribute (2), pads input (11), axes input (18), modes."""
    p1, p2, p11, p18 = (namespace(f"amanda/onnx/{v}").schema("Pad") for v in (1, 2, 11, 18))
    assert "paddings" in p1.attrs and "pads" in p2.attrs and p2.attr("value").default == 0.0
    assert p11.input_names == ("data", "pads", "constant_value") and "pads" not in p11.attrs
    assert p18.input_names[-1] == "axes" and p18.attr("mode").default == "constant"


def test_deprecated_ops_are_retired():
    """Ops deprecated at an opset are absent from it, with the reason in the error."""
    assert "Upsample" in namespace("amanda/onnx/9")
    assert "Upsample" not in namespace("amanda/onnx/10")
    assert "Scatter" in namespace("amanda/onnx/10") and "Scatter" not in namespace("amanda/onnx/11")
    with pytest.raises(SchemaError, match="deprecated since opset 10"):
        namespace("amanda/onnx/17").schema("Upsample")


def test_ports_options_and_attr_types():
    """Variadic/optional options, homogeneity, min_arity and attribute types follow ONNX."""
    ns = namespace("amanda/onnx/21")
    concat = ns.schema("Concat")
    assert concat.inputs[0].variadic and concat.inputs[0].homogeneous
    loop = ns.schema("Loop")
    assert [(p.name, p.optional, p.variadic, p.min_arity, p.homogeneous) for p in loop.inputs] == [
        ("M", True, False, 1, True), ("cond", True, False, 1, True),
        ("v_initial", False, True, 0, False)]
    assert loop.attr("body").type == "graph" and loop.attr("body").required
    assert ns.schema("Cast").attr("to").type == "int"
    rnn = ns.schema("RNN")
    assert rnn.attr("activations").type == "strings"
    assert rnn.attr("activations").default == ("Tanh", "Tanh")
    assert ns.schema("Conv").attr("auto_pad").default == "NOTSET"
    assert ns.schema("MeanVarianceNormalization").attr("axes").default == (0, 2, 3)


def test_opsets_match_onnx_defs():
    """Every op of every opset is onnx_defs.get_schema(op, N)'s version, and nothing more."""
    for version in (1, 7, 13, onnx_defs.onnx_opset_version()):
        ns = namespace(f"amanda/onnx/{version}")
        for op_type, schema in ns.schemas.items():
            expected = onnx_defs.get_schema(op_type, version, "")
            assert schema.since_version == expected.since_version and not expected.deprecated
            assert schema.input_names == tuple(p.name for p in expected.inputs)
            assert set(schema.attrs) == set(expected.attributes)
        for op_type in {s.name for s in onnx_defs.get_all_schemas_with_history() if not s.domain}:
            try:
                expected = onnx_defs.get_schema(op_type, version, "")
            except onnx_defs.SchemaError:
                continue
            assert (op_type in ns.schemas) == (not expected.deprecated), op_type


def test_namespace_names_and_newest():
    """amanda/onnx means the newest opset; other domains get their own names."""
    newest = onnx_defs.onnx_opset_version()
    assert namespace("amanda/onnx").name == f"amanda/onnx/{newest}"
    assert namespace("amanda/onnx").version == newest
    ml = namespace("amanda/onnx-ml/3")
    assert "LinearClassifier" in ml and all(s.domain == "ai.onnx.ml" for s in ml.schemas.values())
    assert namespace("amanda/onnx-preview-training/1").schema("Adagrad").domain == \
        "ai.onnx.preview.training"
    assert "Conv" not in ml and "LinearClassifier" not in namespace("amanda/onnx/17")
    with pytest.raises(SchemaError, match="the newest is amanda/onnx/"):
        namespace(f"amanda/onnx/{newest + 1}")
    with pytest.raises(SchemaError, match="from 1 to"):
        onnx_opset(0)


def test_shipped_file_equals_onnx_defs(from_onnx, from_file):
    """The shipped file and onnx.defs give identical OpSchema objects and opset namespaces."""
    assert from_file.schemas == from_onnx.schemas
    assert dict(from_file.domains) == dict(from_onnx.domains)
    assert len(from_file.schemas) == len(onnx_defs.get_all_schemas_with_history())
    for domain, (lo, hi) in from_onnx.domains.items():
        for version in range(lo, hi + 1):
            a, b = onnx_opset(version, domain, from_file), onnx_opset(version, domain, from_onnx)
            assert a.schemas == b.schemas and a.retired == b.retired and a.name == b.name


def test_forced_file_path_is_used(from_file):
    """Passing the file path reads the file, not onnx_defs."""
    assert onnx_vocabulary(DATA_FILE).source.startswith("onnx_schemas.json.gz")
    ns = onnx_opset(13, vocabulary=onnx_vocabulary(DATA_FILE))
    assert ns.schema("ReduceSum").input_names == ("data", "axes")


def test_default_falls_back_to_file_without_onnx(monkeypatch, from_file):
    """When onnx cannot be imported, the default vocabulary is the shipped file."""
    def no_onnx():
        raise ImportError("onnx is not installed")

    monkeypatch.setattr(onnx_vocab, "vocabulary_from_onnx", no_onnx)
    monkeypatch.setattr(onnx_vocab, "_cache", {})
    assert onnx_vocabulary().source == from_file.source


def test_shipped_file_is_up_to_date(tmp_path, from_file):
    """Regenerating the file with the installed onnx gives the same bytes."""
    spec = importlib.util.spec_from_file_location("gen", ROOT / "tools" / "gen_onnx_vocabulary.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    out = tmp_path / "v.json.gz"
    assert gen.main(["--output", str(out)]) == 0
    assert out.read_bytes() == DATA_FILE.read_bytes()
    assert gen.main(["--check"]) == 0


def test_bad_vocabulary_file(tmp_path):
    """A file that is not a vocabulary is a SchemaError naming it."""
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(SchemaError, match="bad.json.gz"):
        vocabulary_from_file(bad)


@pytest.mark.parametrize("name", ["amanda/onnx/1", "amanda/onnx/13", "amanda/onnx",
                                  "amanda/onnx-ml/5"])
def test_onnx_opsets_round_trip_through_yaml(name):
    """A whole shipped opset dumps to YAML and loads back equal."""
    from amanda.namespaces import dump_namespace_schema, load_namespace_schema

    ns = namespace(name)
    assert load_namespace_schema(dump_namespace_schema(ns)) == ns


def test_an_opset_read_straight_from_onnx_equals_the_one_from_the_whole_vocabulary():
    """A model's first load builds its opset from onnx.defs directly (the newest schema of each
    op type, converted alone); it must equal the opset picked from the whole history."""
    from amanda.namespaces.onnx_vocab import onnx_domains, onnx_opset, onnx_vocabulary

    vocabulary = onnx_vocabulary()
    assert dict(onnx_domains()) == dict(vocabulary.domains)
    for domain, (lo, hi) in onnx_domains().items():
        for version in range(lo, hi + 1):
            direct, picked = onnx_opset(version, domain), onnx_opset(version, domain, vocabulary)
            assert dict(direct.schemas) == dict(picked.schemas), (domain, version)
            assert dict(direct.retired) == dict(picked.retired), (domain, version)
