"""No literal list of op-type names outside amanda/ops/: every fact about an op is a field of
its registry entry, and code asks the registry instead of keeping a list of its own.

What counts: a set, list or tuple literal holding three or more distinct op-type names, and a
dict literal keyed by three or more op types whose values are plain constants (a property
table in disguise). What does not: ``__all__``, and tables from op types to the functions
that implement them (``{"Neg": np.negative}``, ``dict.fromkeys([...], select_vjp)``): those
are registrations, read once to fill the registry.
"""

from __future__ import annotations

import ast
from pathlib import Path

import amanda
from amanda.namespaces import namespace
from amanda.ops.registry import entries

PACKAGE = Path(amanda.__file__).parent
# the registry itself, and tables about conversion between vocabularies (which name ops of the
# source and target namespaces as data)
EXEMPT = ("ops/", "rewrite/mapping/tables/")


def op_names() -> frozenset[str]:
    """Every op type amanda knows: the registry's and those of the shipped vocabularies."""
    names = {e.op_type for e in entries()}
    for family in ("amanda/onnx", "amanda/onnx-ml", "amanda/core", "amanda/tensorflow", "amanda/train"):
        names |= set(namespace(family).op_types)
    return frozenset(names)


def _names_in(elements: list, known: frozenset[str]) -> set[str]:
    return {e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in known}


def _registrations(tree: ast.AST) -> set[int]:
    """ids of literals that are the keys of ``dict.fromkeys(keys, implementation)`` or the
    value of ``__all__``."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "fromkeys"
                and len(node.args) == 2 and not isinstance(node.args[1], ast.Constant)):
            skip.add(id(node.args[0]))
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            skip.add(id(node.value))
    return skip


def literal_op_lists(source: str, known: frozenset[str]) -> list[tuple[int, list[str]]]:
    """(line, names) of each literal collection of three or more op-type names in ``source``."""
    tree = ast.parse(source)
    skip = _registrations(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, (ast.Set, ast.List, ast.Tuple)):
            names = _names_in(node.elts, known)
        elif isinstance(node, ast.Dict) and all(isinstance(v, ast.Constant) for v in node.values):
            names = _names_in([k for k in node.keys if k is not None], known)
        else:
            continue
        if len(names) >= 3:
            found.append((node.lineno, sorted(names)))
    return found


def test_the_scan_finds_the_kinds_of_list_it_forbids() -> None:
    """The scan flags sets, lists, tuples and constant-valued dicts of op names, and leaves
    registration tables, __all__ and short or non-op lists alone."""
    known = op_names()
    source = '''
EFFECTFUL = frozenset({"RandomNormal", "Assign", "If"})
for t in ("Add", "Sub", "Mul"): pass
REF = {"Assign": 0, "AssignAdd": 0, "AssignSub": 0}
KERNELS = {"Neg": neg, "Abs": abs_, "Exp": exp}
SHARED = dict.fromkeys(["Slice", "Gather", "Tile"], select)
WHY = dict.fromkeys(["Equal", "Less", "Greater"], "a comparison")
__all__ = ["Conv", "Dropout", "Flatten"]
TWO = ("Relu", "Tanh")
WORDS = ["apple", "pear", "plum"]
'''
    assert sorted(line for line, _ in literal_op_lists(source, known)) == [2, 3, 4, 7]


def test_no_literal_list_of_op_names_outside_amanda_ops() -> None:
    """The figure of issue 29: zero literal collections of 3+ op-type names in amanda/ outside
    amanda/ops/ and the conversion tables."""
    known = op_names()
    assert len(known) > 250
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(EXEMPT):
            continue
        found += [f"amanda/{relative}:{line} {names}" for line, names in literal_op_lists(path.read_text(), known)]
    assert found == []
