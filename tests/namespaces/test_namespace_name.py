"""One reading of namespace names (NamespaceName.parse), shared by the executor, the gradients,
type inference, the passes and the ONNX exporter."""

from __future__ import annotations

import pytest

import amanda
from amanda.autodiff.rules import family, rule_for
from amanda.exec.dispatch import parse_namespace
from amanda.io.onnx.ports import domain_of_namespace
from amanda.namespaces.name import NamespaceName

CASES = [
    ("amanda/onnx/17", "amanda/onnx", "", "17", 17),
    ("amanda/onnx", "amanda/onnx", "", None, None),
    ("amanda/onnx/com.example/2", "amanda/onnx", "com.example", "2", 2),
    ("amanda/onnx-ml/3", "amanda/onnx", "ai.onnx.ml", "3", 3),
    ("amanda/tensorflow/1.13.1", "amanda/tensorflow", "", "1.13.1", None),
    ("amanda/core", "amanda/core", "", None, None),
    ("mylib/ops/4", "mylib/ops", "", "4", 4),
]


@pytest.mark.parametrize(("name", "fam", "domain", "version", "opset"), CASES)
def test_parse(name: str, fam: str, domain: str, version: str | None, opset: int | None) -> None:
    """Family, domain, version and opset of each kind of name."""
    parsed = NamespaceName.parse(name)
    assert (parsed.family, parsed.domain, parsed.version, parsed.opset) == (fam, domain, version, opset)
    assert parsed.is_onnx == (fam == "amanda/onnx" and not domain)


@pytest.mark.parametrize(("name", "fam", "domain", "version", "opset"), CASES)
def test_every_reader_agrees(name: str, fam: str, domain: str, version: str | None, opset: int | None) -> None:
    """autodiff.family and the executor's parse_namespace give the same family (issue 29:
    ``family("amanda/onnx/com.example/2")`` used to say ``onnx``)."""
    assert family(name) == parse_namespace(name)[0] == fam
    assert parse_namespace(name) == (fam, domain, opset)


def test_gradients_and_export_read_custom_domains() -> None:
    """A custom ONNX domain's gradient rules are found under (amanda/onnx, domain); the exporter
    writes the same domain and version."""
    from amanda.ops.registry import declare

    def rule(n):  # noqa: ANN001, ANN202
        return [n.grad()]

    declare("Passes", family="amanda/onnx", domain="com.names-test", vjp=rule)
    assert rule_for("amanda/onnx/com.names-test/2", "Passes") is rule
    assert rule_for("amanda/onnx/2", "Passes") is None
    assert domain_of_namespace("amanda/onnx/com.names-test/2") == ("com.names-test", 2)


@pytest.mark.parametrize("bad", ["", None, 3])
def test_not_a_name(bad: object) -> None:
    """Anything but a non-empty string is an ArgumentError naming the namespace."""
    with pytest.raises(amanda.ArgumentError, match="namespace"):
        NamespaceName.parse(bad)  # type: ignore[arg-type]
