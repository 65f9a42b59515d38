"""The optimiser's fusions are rewrite rules, each written in at most ten lines (issue 29's
figure): the ``Rule(...)`` statement, pattern included, counted in the module source."""

from __future__ import annotations

import ast
import inspect

import pytest

from amanda.passes import cleanup, fuse, reorder
from amanda.rewrite import Rule

RULES = [(fuse, "CONV_BATCHNORM"), (fuse, "MATMUL_ADD"), (fuse, "GELU"), (fuse, "SWISH"),
         (reorder, "POOL_BEFORE_RELU"), (cleanup, "IDENTITIES")]


@pytest.mark.parametrize(("module", "name"), RULES, ids=[name for _, name in RULES])
def test_each_fusion_is_a_rule_of_at_most_ten_lines(module: object, name: str) -> None:
    """The module-level statement defining the rule (or rule tuple) spans at most ten lines and
    builds Rules whose patterns pass the schema check (deferred at import, which builds no
    namespace)."""
    value = getattr(module, name)
    rules = value if isinstance(value, tuple) else (value,)
    assert rules and all(isinstance(r, Rule) for r in rules)
    assert all(r.checked() is r for r in rules)  # op types and attributes as the ONNX schemas have them
    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    (statement,) = [n for n in tree.body if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]
    assert statement.end_lineno is not None
    assert statement.end_lineno - statement.lineno + 1 <= 10
