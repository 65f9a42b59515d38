"""String kernels against onnxruntime on generated text: concatenation with broadcasting,
splitting with and without a delimiter, normalising, and full regex matches."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from tests.exec.onnx_oracle import both  # noqa: E402

WORDS = st.lists(st.text(alphabet="ab ,xY", max_size=8), min_size=1, max_size=6)


def compare(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int = 20) -> None:
    """amanda's outputs equal onnxruntime's for a one-node model over string inputs."""
    want, got = both(node, feeds, opset)
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


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), mode=st.sampled_from(["TF", "IDF", "TFIDF"]), skips=st.integers(0, 2),
       low=st.integers(1, 2))
def test_tfidf_vectorizer(seed: int, mode: str, skips: int, low: int) -> None:
    """n-gram counts with skips and weights over int64 tokens match onnxruntime."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, (3, 9)).astype(np.int64)
    node = helper.make_node(
        "TfIdfVectorizer", ["x"], ["y"], mode=mode, min_gram_length=low, max_gram_length=2,
        max_skip_count=skips, ngram_counts=[0, 3], ngram_indexes=[0, 1, 2, 3, 4, 5],
        pool_int64s=[1, 2, 3, 0, 1, 2, 2, 3, 3], weights=[0.5, 1.0, 2.0, 1.5, 0.25, 3.0],
    )
    (want,), (got,) = both(node, {"x": x}, 9)
    np.testing.assert_allclose(got, want, rtol=1e-6)
