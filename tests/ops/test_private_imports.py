"""A helper that op families share has a public, documented home: no module of amanda/opset
imports a private (``_underscored``) name from another module, and no module imports one from
amanda/opset. The shared helpers live, public, in the layer they belong to (the control-flow
gradient machinery in ``autodiff.rules_control``, body running in ``exec.control_flow``, type
helpers in ``types.rules``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "amanda"


def module_name(path: Path) -> str:
    """``amanda/opset/onnx/scan.py`` -> ``amanda.opset.onnx.scan`` (a package by its own name)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def private_imports(source: str, module: str, is_package: bool = False) -> list[tuple[str, str]]:
    """(module imported from, name) for each private name ``source`` imports from another amanda
    module, at any level of the file, absolute or relative, one line or several."""
    found = []
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = package[: len(package) - node.level + 1] if node.level else []
        origin = ".".join([*base, node.module] if node.module else base)
        if not origin.startswith("amanda") or origin == module:
            continue
        found += [(origin, a.name) for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def offenders(where: str | None = None, source_in: str | None = None) -> list[str]:
    """Private imports of modules under ``where`` (None: all), from modules under ``source_in``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        if where is not None and not module.startswith(where):
            continue
        for origin, name in private_imports(path.read_text(), module, path.name == "__init__.py"):
            if source_in is None or origin.startswith(source_in):
                found.append(f"{module} imports {name} from {origin}")
    return found


def test_no_op_family_imports_a_private_name() -> None:
    assert offenders(where="amanda.opset") == []


def test_no_module_imports_a_private_name_of_the_op_families() -> None:
    assert offenders(source_in="amanda.opset") == []


def test_the_scan_sees_every_form_of_private_import() -> None:
    """Relative, multi-line and function-level imports count; dunders and public names do not."""
    source = ("from ..rules import _a, b\nfrom amanda.x import (\n    c,\n    _d,\n)\nfrom . import _e\n"
              "def f():\n    from amanda.y import _g, __version__\n")
    assert private_imports(source, "amanda.opset.onnx.m") == [
        ("amanda.opset.rules", "_a"), ("amanda.x", "_d"), ("amanda.opset.onnx", "_e"), ("amanda.y", "_g")]
    assert private_imports("from amanda.opset import _h\n", "amanda.opset", is_package=True) == []  # its own
    assert private_imports("from .scan import _h\n", "amanda.opset.onnx", is_package=True) == [
        ("amanda.opset.onnx.scan", "_h")]
