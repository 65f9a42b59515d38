"""Namespaces and their registry: lookup, hierarchy, fallback, lazy loading, errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from amanda.errors import AmandaError, SchemaError
from amanda.namespaces import (
    Namespace,
    OpSchema,
    known_namespaces,
    load_namespace_schema,
    namespace,
    register_namespace,
    unregister_namespace,
)


@pytest.fixture
def registered():
    """Register namespaces for one test and forget them afterwards."""
    names = []

    def register(ns, **kwargs):
        names.append(ns.name)
        return register_namespace(ns, **kwargs)

    yield register
    for name in names:
        unregister_namespace(name)


def _ns(name, *types, **kwargs):
    return Namespace(name, schemas=[OpSchema(t, inputs=["x"], outputs=["y"]) for t in types], **kwargs)


def test_hierarchy_fallback_only_where_allowed(registered):
    """A versioned namespace falls back to its parent only when its schema says so."""
    registered(_ns("test/tf", "MatMul", "Add"))
    lenient = registered(_ns("test/tf/1.13.1", "Conv2D", fallback=True))
    strict = registered(_ns("test/tf/1.14.0", "Conv2D"))
    assert lenient.parent == "test/tf" and strict.parent is None
    assert lenient.schema("MatMul") is namespace("test/tf").schema("MatMul")
    assert "Add" in lenient and "Add" not in strict
    with pytest.raises(SchemaError) as info:
        strict.schema("MatMul")
    assert "test/tf/1.14.0" in str(info.value) and "'MatMul'" in str(info.value)
    with pytest.raises(SchemaError, match="test/tf/1.13.1 -> test/tf"):
        lenient.schema("Relu")


def test_explicit_parent_and_cycles(registered):
    """An explicit parent is followed; a parent cycle is an error, not a hang."""
    registered(_ns("test/a", "A", parent="test/b", fallback=True))
    registered(_ns("test/b", "B", parent="test/a", fallback=True))
    assert namespace("test/a").schema("B").type == "B"
    with pytest.raises(SchemaError, match="acyclic"):
        namespace("test/a").schema("C")


def test_own_schema_overrides_parent(registered):
    """A namespace's own schema wins over its parent's."""
    registered(Namespace("test/p", schemas=[OpSchema("Op", since_version=1)]))
    child = registered(Namespace("test/p/2", schemas=[OpSchema("Op", since_version=2)], fallback=True))
    assert child.schema("Op").since_version == 2


def test_newest_version_for_enclosing_name(registered):
    """A name with versioned children means its newest version (numerically)."""
    for v in ("1.9.0", "1.13.1", "1.2"):
        registered(_ns(f"test/fw/{v}", "Op"))
    registered(_ns("test/fw/nightly", "Op"))
    assert namespace("test/fw").name == "test/fw/1.13.1"
    registered(_ns("test/fw", "Base"))
    assert namespace("test/fw").name == "test/fw"


def test_unknown_op_suggests_close_matches(registered):
    """An unknown op type names the namespace and suggests close matches."""
    ns = registered(_ns("test/s/1", "MatMul", "BatchMatMul", "Conv2D"))
    with pytest.raises(SchemaError) as info:
        ns.schema("Matmul")
    message = str(info.value)
    assert "test/s/1" in message and "'Matmul'" in message and "did you mean 'MatMul'" in message
    assert info.value.path == ("test/s/1", "Matmul")


def test_unknown_namespace_lists_known_ones(registered):
    """An unknown namespace is an AmandaError naming it and listing the known ones."""
    registered(_ns("test/known/1", "Op"))
    with pytest.raises(AmandaError) as info:
        namespace("test/knwon/1")
    message = str(info.value)
    assert "'test/knwon/1'" in message and "test/known/1" in message
    assert "amanda/onnx/{1.." in message and "did you mean 'test/known/1'" in message


def test_register_conflicts(registered):
    """Registering an equal namespace is a no-op; a different one needs replace=True."""
    first = registered(_ns("test/r/1", "A"))
    assert registered(_ns("test/r/1", "A")) == first
    with pytest.raises(SchemaError, match="replace=True"):
        registered(_ns("test/r/1", "B"))
    registered(_ns("test/r/1", "B"), replace=True)
    assert namespace("test/r/1").op_types == ("B",)
    with pytest.raises(SchemaError, match="replace=True"):
        register_namespace(_ns("amanda/onnx/13", "A"))


def test_loaded_yaml_registers_and_falls_back(registered):
    """A YAML schema with fallback: true looks up unknown ops in the enclosing namespace."""
    registered(_ns("test/y", "Identity"))
    ns = registered(load_namespace_schema(
        "namespace_schema:\n  namespace: test/y/2\n  fallback: true\n"
        "  op_schemas: [{type: Neg, input_ports: [x], output_ports: [y]}]\n"))
    assert namespace("test/y/2").schema("Identity").type == "Identity" and ns.parent == "test/y"


def test_namespace_fields_are_frozen():
    """Namespaces are immutable values with hashable schemas."""
    ns = _ns("test/f/1", "A")
    with pytest.raises(AttributeError):
        ns.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ns.schemas["B"] = OpSchema("B")  # type: ignore[index]
    assert hash(ns) == hash(_ns("test/f/1", "A")) and ns.version == "1"
    with pytest.raises(SchemaError):
        Namespace("top", fallback=True)
    with pytest.raises(SchemaError):
        Namespace("/bad/")


def test_known_namespaces_lists_shipped_ones():
    """Shipped ONNX opsets are listed without being built."""
    known = known_namespaces()
    assert "amanda/onnx/1" in known and "amanda/onnx-ml/1" in known
    assert known.index("amanda/onnx/2") < known.index("amanda/onnx/10")


def test_import_builds_nothing_and_lookup_builds_one():
    """Importing amanda.namespaces builds no opset (nor imports onnx); a lookup builds one."""
    code = textwrap.dedent("""
        import sys
        import amanda.namespaces as n
        reg = sys.modules['amanda.namespaces.namespace']
        assert 'onnx' not in sys.modules, 'onnx imported at import time'
        assert not reg._registered, reg._registered
        n.namespace('amanda/onnx/13')
        assert sorted(reg._registered) == ['amanda/onnx/13'], sorted(reg._registered)
        assert n.namespace('amanda/onnx/13') is n.namespace('amanda/onnx/13')
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
