"""Guard rails on the shape of the code: small modules and functions of bounded complexity.

The limits are the team's: a module stays within 450 lines, and a function's cyclomatic
complexity (one plus its decision points: branches, loops, handlers, context managers, asserts,
comprehensions and extra boolean operands) within 20, with no exceptions: a function past it is
split by concept (a named helper per step), not into arbitrary chunks. ``LEGACY`` stays empty; it
exists only so that a temporary exception would have to be written down with its complexity.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "amanda"
MAX_LINES = 450
MAX_COMPLEXITY = 20
# function -> its complexity when the limit was set: it may shrink, never grow
LEGACY: dict[str, int] = {}

_DECISIONS = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.With, ast.AsyncWith,
              ast.IfExp, ast.Assert, ast.comprehension, ast.match_case)


def complexity(function: ast.AST) -> int:
    """Cyclomatic complexity of one function, nested functions and classes not counted."""
    count = 1
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, _DECISIONS):
            count += 1
            if isinstance(node, ast.comprehension):
                count += len(node.ifs)
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        stack.extend(ast.iter_child_nodes(node))
    return count


def functions(tree: ast.AST):  # type: ignore[no-untyped-def]
    """Every function in a module, nested ones included, with its qualified name."""
    stack = [("", tree)]
    while stack:
        prefix, node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{prefix}{child.name}", child
                stack.append((f"{prefix}{child.name}.", child))
            elif isinstance(child, ast.ClassDef):
                stack.append((f"{prefix}{child.name}.", child))
            else:
                stack.append((prefix, child))


def test_modules_stay_small() -> None:
    """No module of amanda passes 450 lines."""
    long = [f"{p.relative_to(ROOT)}: {n} lines" for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert long == [], "split these modules:\n" + "\n".join(long)


def test_functions_stay_simple() -> None:
    """No function of amanda passes the complexity limit (any listed in ``LEGACY`` may not grow)."""
    complex_ = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for name, node in functions(ast.parse(path.read_text())):
            key = f"{path.relative_to(ROOT).as_posix()} {name}"
            if (c := complexity(node)) > LEGACY.get(key, MAX_COMPLEXITY):
                complex_.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}: {c}")
    assert complex_ == [], "simplify these functions:\n" + "\n".join(complex_)


def test_the_complexity_count_matches_its_definition() -> None:
    """The counter gives 1 for straight code and adds one per branch, loop, handler and
    extra boolean operand (the check above is only as good as this count)."""
    source = '''
def f(a, b):
    if a and b or a:
        for x in b:
            while x:
                x -= 1
    try:
        pass
    except ValueError:
        pass
    return [y for y in b if y] if a else None
'''
    (node,) = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]
    # 1 + if + (and, or) + for + while + except + comprehension + its if + conditional expression
    assert complexity(node) == 1 + 1 + 2 + 1 + 1 + 1 + 1 + 1 + 1
    assert complexity(ast.parse("def g():\n    return 1\n").body[0]) == 1
