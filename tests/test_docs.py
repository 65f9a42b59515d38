"""The docs run as written, and the repository stands alone.

Every Python block in docs/*.md runs, in order, in one namespace per page; every YAML and JSON
example in docs/format.md loads (and matches the result shown beside it); no file refers to
documents outside the repository.
"""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted(ROOT.joinpath("docs").glob("*.md"))


def blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.DOTALL)


def fenced(path: Path) -> list[tuple[str, str]]:
    """Every fenced block of the page as (language, text), in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", path.read_text(), re.DOTALL | re.MULTILINE)


FORMAT = ROOT / "docs" / "format.md"
DESIGN = ROOT / "docs" / "design.md"
# Pages whose YAML and JSON blocks are amanda documents (or namespace schemas), loaded as the
# page runs.
DOCUMENT_PAGES = {FORMAT, DESIGN}


def run_page(page: Path) -> dict:
    """Run the page's blocks in order in one namespace; documents are loaded into ``loaded``."""
    namespace: dict = {}
    for number, (language, code) in enumerate(fenced(page)):
        where = f"{page.name}[block {number}, {language}]"
        try:
            if language == "python":
                exec(compile(code, where, "exec"), namespace)  # noqa: S102 - our own docs
            elif language in ("yaml", "json") and page in DOCUMENT_PAGES:
                namespace["loaded"] = check_document(code, language)
        except Exception as exc:  # pragma: no cover - the message is the point
            raise AssertionError(f"{where} failed: {exc!r}") from exc
    return namespace


def check_document(text: str, language: str):
    """Load one documented example and check that it round-trips through YAML and JSON."""
    import amanda

    if text.startswith("namespace_schema:"):
        from amanda.namespaces import dump_namespace_schema, load_namespace_schema

        schema = load_namespace_schema(text)
        assert load_namespace_schema(dump_namespace_schema(schema)) == schema
        return schema
    item = amanda.loads(text, language)
    for fmt in ("yaml", "json"):
        again = amanda.loads(amanda.dumps(item, fmt), fmt)
        assert again == item, f"the example does not round-trip through {fmt}"
    return item


@pytest.mark.parametrize("page", [d for d in DOCS if blocks(d) or d in DOCUMENT_PAGES],
                         ids=lambda p: p.name)
def test_doc_snippets_run(page, tmp_path, monkeypatch):
    """Each snippet on the page runs (each document loads) without error after the ones before it."""
    monkeypatch.chdir(tmp_path)
    run_page(page)


def test_every_format_example_is_exercised():
    """docs/format.md shows documents only in yaml or json blocks, which the page test loads."""
    languages = [language for language, _ in fenced(FORMAT)]
    assert set(languages) <= {"python", "yaml", "json", "text"}, set(languages)
    assert languages.count("yaml") >= 10 and "json" in languages
    import amanda

    for language, code in fenced(FORMAT):
        if language == "text":  # the field overview: a schema, not a document
            with pytest.raises(amanda.FormatError):
                amanda.loads(code)


# -- the repository stands alone ----------------------------------------------------------------

# Written so that these patterns do not match their own source text.
OUTSIDE = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\.\./shar[e]d",
        r"shar[e]d/(?:DESIGN|seeds|STYLE)",
        r"(?-i:\bDESIG[N]\.md)",
        r"\bseed[s]/",
        r"\bsee[d]'s\b",
        r"\bsee[d]\s+0\d\d\b",
        r"\bsee[d]_(?:0\d\d|model|layers|queries|example|diagram|graph)",
        r"\bthe see[d]\b(?!\s*(?:=|\)|value|argument|attribute|is\b))",
        r"\bsee[d] (?:document|example|spec|format|namespace|challenge|graph)",
    )
]
SKIP_SUFFIXES = {".gz", ".npz", ".onnx", ".png", ".pb"}


def repository_files() -> list[Path]:
    """The tracked files (every file under the root when git is not at hand)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
        ).stdout.decode("utf-8")
        return [ROOT / name for name in listed.split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        hidden = {".git", ".venv", "venv", "__pycache__", ".hypothesis", ".pytest_cache",
                  ".mypy_cache", ".ruff_cache", "build", "dist"}
        return [p for p in ROOT.rglob("*") if p.is_file()
                and not hidden.intersection(p.relative_to(ROOT).parts)
                and not any(part.endswith(".egg-info") for part in p.parts)]


def outside_references(text: str) -> list[str]:
    """The lines of ``text`` that refer to documents outside the repository."""
    return [line.strip() for line in text.splitlines() if any(p.search(line) for p in OUTSIDE)]


def test_the_reference_patterns_catch_what_they_should():
    """The patterns flag references to outside documents and leave random seeds alone."""
    words = {"s": "se" + "ed", "d": "DES" + "IGN", "sh": "sha" + "red"}
    flagged = [t.format(**words) for t in (
        "see ../{sh}/{d}.md", "the {s}'s format", "{s} 003's C1", "tests/fixtures/{s}_000/x.yaml",
        "as the {s} specifies", "{d}.md addressing", "the {s} documents", "{sh}/{s}s/000.txt")]
    allowed = ["np.random.seed(0)", "Dropout with a seed attribute", "the seed = 3",
               "torch.manual_seed(0)", "seeded results match", "docs/design.md", "seed: int = 0"]
    assert [t for t in flagged if not outside_references(t)] == []
    assert [t for t in allowed if outside_references(t)] == []


def test_no_file_refers_outside_the_repository():
    """No tracked file mentions the design notes or documents that a clone does not have."""
    found = []
    for path in repository_files():
        if path.suffix in SKIP_SUFFIXES or not path.is_file():
            continue
        raw = path.read_bytes()
        if b"\0" in raw:
            continue
        for line in outside_references(raw.decode("utf-8", errors="replace")):
            found.append(f"{path.relative_to(ROOT)}: {line[:120]}")
    assert found == [], "references to files outside the repository:\n" + "\n".join(found)


def test_package_ships_its_type_marker():
    """amanda/py.typed exists and pyproject.toml lists it as package data."""
    assert ROOT.joinpath("amanda", "py.typed").is_file()
    text = ROOT.joinpath("pyproject.toml").read_text()
    section = text.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    assert re.search(r'^"?amanda"?\s*=\s*\[[^\]]*"py\.typed"', section, re.MULTILINE)


def test_design_page_names_the_modules_that_exist():
    """Every package and module docs/design.md names under amanda/ exists, and none of the rooms
    it marks as planned does yet."""
    text = DESIGN.read_text()
    namespaces = ("amanda/core", "amanda/onnx", "amanda/tensorflow")  # vocabularies, not files
    named = {n for n in re.findall(r"`(amanda/[a-z_/*]+(?:\.py)?)`", text) if not n.startswith(namespaces)}
    planned = set()
    for language, block in fenced(DESIGN):
        if language == "text":
            rows = re.findall(r"^  ([a-z_]+(?:/[a-z_]+)?(?:\.py)?)/?\s+(\S*)", block, re.MULTILINE)
            for entry, first_word in rows:
                (planned if first_word == "planned:" else named).add(f"amanda/{entry}")
    assert len(named) > 15
    missing = [n for n in sorted(named) if not any(ROOT.glob(n))]
    assert missing == []
    assert [p for p in planned if ROOT.joinpath(p).exists()] == [], "a planned room exists"


# What each package of amanda may import (docs/design.md, "Layers"): nothing below imports
# from above, not even when called: a lower layer calls an upper one through an engine the upper
# one installs (amanda/engines.py).
BASE = {"errors", "parse_guards", "safe_load", "version", "keywords", "engines"}  # modules that import nothing above errors
LAYERS = {
    "errors": set(),
    "jmespath_nesting": set(),
    "parse_guards": {"errors"},
    "safe_load": {"errors", "parse_guards"},
    "progress": set(),
    "version": set(),
    "keywords": {"errors"},
    "engines": {"errors"},
    "ops": BASE,  # the op registry: facts only, so that every layer above can read them
    "containers": BASE,
    "plain_reader": BASE | {"containers"},
    "query": BASE | {"containers", "jmespath_nesting"},
    "namespaces": BASE | {"ops", "containers", "plain_reader", "jmespath_nesting", "progress"},
    "io": BASE | {"ops", "containers", "plain_reader", "namespaces", "types", "progress"},
    "exec": BASE | {"ops", "containers", "namespaces", "progress", "rewrite"},
    "viz": BASE | {"containers", "types"},
    "types": BASE | {"ops", "containers", "namespaces", "exec"},
    "build": BASE | {"ops", "containers", "namespaces", "io", "types"},
    "layers": BASE | {"ops", "containers", "namespaces", "io", "types", "build"},
    "autodiff": BASE | {"ops", "containers", "namespaces", "io", "types", "build", "layers", "exec", "rewrite"},
    "opset": BASE | {"ops", "containers", "namespaces", "io", "types", "build", "layers", "exec", "rewrite", "autodiff"},
    "optim": BASE | {"ops", "containers", "namespaces", "io", "exec", "types", "build", "layers", "autodiff", "progress"},
    "dask": BASE | {"containers", "exec", "io"},
    "rewrite": BASE | {"ops", "containers", "plain_reader", "namespaces", "jmespath_nesting", "progress"},
    "passes": BASE | {"ops", "containers", "namespaces", "io", "types", "exec", "progress", "rewrite"},
}
UPWARD_EXCEPTIONS: set[tuple[str, str]] = set()  # none: upper layers install engines (amanda/engines.py)


def amanda_imports(path: Path, inside: str | None = None) -> set[str]:
    """The amanda packages a module imports, at any level of the module: ``import amanda.x``,
    ``from amanda.x import y``, ``from amanda import x``, relative imports, and
    ``importlib.import_module("amanda.x")`` with a literal name. ``inside``: the module's package
    (by default, where it lies under amanda/)."""
    import ast

    package = inside.split(".") if inside else ["amanda", *path.relative_to(ROOT / "amanda").parent.parts]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            names = [module] if module != "amanda" else [f"amanda.{alias.name}" for alias in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in
              ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant)):
            names = [str(node.args[0].value)]
        found |= {n.split(".")[1] for n in names if n.startswith("amanda.")}
    return found


def test_layers_import_only_downward():
    """No module of a lower layer imports a higher one, as docs/design.md states."""
    package = ROOT / "amanda"
    wrong = []
    for module in sorted(package.rglob("*.py")):
        relative = module.relative_to(package).as_posix()
        layer = relative.split("/")[0].removesuffix(".py")
        if layer not in LAYERS:
            continue  # cli.py and __init__.py sit on top
        for imported in amanda_imports(module) - LAYERS[layer] - {layer}:
            if (relative, imported) not in UPWARD_EXCEPTIONS:
                wrong.append(f"amanda/{relative} imports amanda.{imported}")
    assert wrong == []
    # the scan sees imports inside functions too: Container.select imports the engines when called
    assert "engines" in amanda_imports(package / "containers" / "container.py")


def test_the_import_scan_sees_every_form_of_import(tmp_path) -> None:
    """Relative imports, ``from amanda import x`` and import_module with a literal name count as
    imports of the package they name, so no form of import hides an upward one."""
    module = tmp_path / "probe.py"
    module.write_text("from ..query import select\nfrom amanda import viz\nimport importlib\n"
                      "def f():\n    from . import edge\n    return importlib.import_module('amanda.build')\n")
    assert amanda_imports(module, inside="amanda.containers") == {"query", "viz", "containers", "build"}


def test_every_engine_is_installed_by_the_package_it_names() -> None:
    """Once amanda is imported, each engine a lower layer may call is installed, by a module of
    the upper package that amanda/engines.py names for it."""
    import amanda  # noqa: F401
    from amanda.engines import ENGINES, engine

    for name, (package, _) in ENGINES.items():
        assert engine(name).__module__.startswith(package), name
