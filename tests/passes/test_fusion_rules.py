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


FUSIONS = {"conv_batchnorm": "CONV_BATCHNORM", "matmul_add": "MATMUL_ADD", "gelu": "GELU", "swish": "SWISH"}


def rule_blocks(source: str) -> dict[str, list[tuple[int, str]]]:
    """The ``# rule: name.`` blocks of a module: numbered lines from the marker to the next blank line."""
    blocks: dict[str, list[tuple[int, str]]] = {}
    current: list[tuple[int, str]] | None = None
    for number, line in enumerate(source.splitlines(), 1):
        if line.startswith("# rule: "):
            current = blocks.setdefault(line[len("# rule: "):].split(".")[0], [])
        elif not line.strip():
            current = None
        if current is not None:
            current.append((number, line))
    return blocks


@pytest.mark.parametrize("rule", FUSIONS)
def test_each_fusion_with_its_own_helpers_is_at_most_ten_lines(rule: str) -> None:
    """Issue 29's figure, held with the helpers counted: the block of each fusion (its comment,
    the rule's statement, and every function or value of fuse.py it uses) is at most ten lines.
    The only names of fuse.py a block may use from outside it are the rule language's
    (imported from amanda.rewrite) and other imports."""
    source = inspect.getsource(fuse)
    tree = ast.parse(source)
    block = rule_blocks(source)[rule]
    assert 1 <= len(block) <= 10, (rule, len(block))
    first, last = block[0][0], block[-1][0]
    defined = {}  # module-level definitions of fuse.py (not imports): name -> (first line, last line)
    for node in tree.body:
        names = [node.name] if isinstance(node, ast.FunctionDef) else [
            t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        for name in names:
            defined[name] = (node.lineno, node.end_lineno)
    start, end = defined[FUSIONS[rule]]
    assert first <= start and end <= last  # the statement making the rule lies in its block
    statement = next(n for n in tree.body if getattr(n, "lineno", 0) == start)
    used = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)}
    for name in sorted(used & set(defined)):
        lo, hi = defined[name]
        assert first <= lo and hi <= last, f"{rule} uses {name}, defined outside its block"
    made = getattr(fuse, FUSIONS[rule])
    for r in made if isinstance(made, tuple) else (made,):
        assert r.name == rule


def test_the_block_reader_counts_helpers_and_stops_at_a_blank_line() -> None:
    """The counting itself: a block runs from its marker to the first blank line."""
    text = "x = 1\n# rule: a. one\ndef _h(): pass\nA = _h\n\n# rule: b. two\nB = 2\n"
    assert {k: [n for n, _ in v] for k, v in rule_blocks(text).items()} == {"a": [2, 3, 4], "b": [6, 7]}
