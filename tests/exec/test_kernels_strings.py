"""String kernels against onnxruntime on generated text: concatenation with broadcasting,
splitting with and without a delimiter, normalising, and full regex matches."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import amanda  # noqa: E402
from amanda.io.onnx_import import from_onnx  # noqa: E402

WORDS = st.lists(st.text(alphabet="ab ,xY", max_size=8), min_size=1, max_size=6)


def compare(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int = 20) -> None:
    """amanda's outputs equal onnxruntime's for a one-node model over string inputs."""
    inputs = [helper.make_tensor_value_info(k, TensorProto.STRING, v.shape) for k, v in feeds.items()]
    outputs = [onnx.ValueInfoProto(name=n) for n in node.output]
    model = helper.make_model(helper.make_graph([node], "s", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", opset)], ir_version=9)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    with amanda.Session(from_onnx(model), threads=1) as s:
        got = s.run(list(node.output), feeds)
    for a, b in zip(got, want):
        assert np.asarray(a).shape == np.asarray(b).shape
        assert np.asarray(a).tolist() == np.asarray(b).tolist()


@settings(max_examples=30, deadline=None)
@given(words=WORDS, suffix=st.text(alphabet="z!", max_size=3))
def test_string_concat(words: list[str], suffix: str) -> None:
    """A column of strings joined with a broadcast suffix."""
    compare(helper.make_node("StringConcat", ["x", "y"], ["z"]),
            {"x": np.array(words, dtype=object), "y": np.array([suffix], dtype=object)})


@settings(max_examples=30, deadline=None)
@given(words=WORDS, delimiter=st.sampled_from([None, ",", "ab"]), maxsplit=st.sampled_from([None, 1, 2]))
def test_string_split(words: list[str], delimiter: str | None, maxsplit: int | None) -> None:
    """Substrings (padded with '') and counts, with a delimiter or on whitespace."""
    attrs = {k: v for k, v in (("delimiter", delimiter), ("maxsplit", maxsplit)) if v is not None}
    compare(helper.make_node("StringSplit", ["x"], ["parts", "count"], **attrs),
            {"x": np.array(words, dtype=object)})


@settings(max_examples=30, deadline=None)
@given(words=WORDS, action=st.sampled_from(["NONE", "LOWER", "UPPER"]), sensitive=st.booleans())
def test_string_normalizer(words: list[str], action: str, sensitive: bool) -> None:
    """Stop words dropped (case-sensitively or not), then case changed."""
    node = helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action=action,
                            is_case_sensitive=int(sensitive), stopwords=["ab", "Y"], locale="C")
    compare(node, {"x": np.array([words], dtype=object)}, opset=10)


@settings(max_examples=30, deadline=None)
@given(words=WORDS, pattern=st.sampled_from(["a+b*", "[ab ]*", "x|Y", ".*,.*"]))
def test_regex_full_match(words: list[str], pattern: str) -> None:
    """Whole-string regex matches agree with onnxruntime's RE2."""
    compare(helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=pattern),
            {"x": np.array(words, dtype=object)})
