"""The front door works as written: every Python block of README.md runs as pasted, the README
says what rendering needs next to its install command, `python -m amanda` is the command line,
and every --help is plain text.

README blocks: each ```python block runs alone, in a fresh interpreter in an empty temporary
directory (a reader pastes one section, not the whole page), with DeprecationWarnings raised by
its own lines made errors. A block that is only a summary and cannot run alone is marked by the
line `<!-- fragment -->` right above its fence (invisible in the rendered page, so the prose
around it must say so); it is not run. A block that calls `amanda.render` runs only where
Graphviz's `dot` is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from amanda.cli import _parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FRAGMENT = "<!-- fragment -->"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def readme_blocks() -> list[tuple[int, str, bool]]:
    """(line, code, is_fragment) for each Python block of README.md."""
    text = README.read_text()
    found = []
    for match in BLOCK.finditer(text):
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        found.append((text[:match.start()].count("\n") + 1, match.group(1), before.strip() == FRAGMENT))
    return found


def _env() -> dict[str, str]:
    """The environment of a pasted block: this checkout's amanda first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("AMANDA_PROGRESS", "0")
    return env


BLOCKS = readme_blocks()


def test_the_readme_has_blocks_and_few_fragments() -> None:
    """The README shows runnable code, and only a minority of its blocks are marked fragments."""
    assert len(BLOCKS) >= 5
    assert sum(fragment for _, _, fragment in BLOCKS) <= len(BLOCKS) // 3


@pytest.mark.parametrize("line, code", [(line, code) for line, code, fragment in BLOCKS if not fragment],
                         ids=[f"line{line}" for line, _, fragment in BLOCKS if not fragment])
def test_each_readme_python_block_runs_as_pasted(line: int, code: str, tmp_path: Path) -> None:
    """The block runs alone in a fresh interpreter in an empty directory and exits 0."""
    if "amanda.render(" in code and shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning:__main__", "-c", code],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"README.md line {line}:\n{done.stderr[-3000:]}"


def test_a_fragment_marker_is_seen_and_skips_its_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The marker right above a fence makes that block a fragment; a marker further up does not."""
    page = tmp_path / "README.md"
    page.write_text(f"{FRAGMENT}\n```python\nundefined_name\n```\n\n{FRAGMENT}\n\ntext\n```python\nx = 1\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "README", page)
    assert [(code, fragment) for _, code, fragment in readme_blocks()] == [("undefined_name\n", True),
                                                                           ("x = 1\n", False)]


def test_the_install_command_says_rendering_needs_dot() -> None:
    """Right after the install command (before the first section), the README says that
    rendering needs Graphviz's `dot` program; the first two commands are the documented ones."""
    text = README.read_text()
    head = text.split("\n## ", 1)[0]
    commands = re.search(r"```bash\n(.*?)```", head, re.DOTALL)
    assert commands is not None
    assert commands.group(1).splitlines() == [
        'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test,onnx,examples,dask]" '
        "&& python examples/quickstart.py",
        "python -m pytest",
    ]
    assert "Graphviz" in head and "`dot`" in head and "apt-get install graphviz" in head


def test_python_dash_m_amanda_runs_the_command_line(tmp_path: Path) -> None:
    """`python -m amanda` is the same command: usage errors exit 2, `info` summarises a model."""
    model = ROOT / "tests" / "fixtures" / "documents" / "tensorflow_dense_graph.yaml"
    done = subprocess.run([sys.executable, "-m", "amanda", "info", str(model)], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "ops: 4" in done.stdout and "MatMul" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "amanda", "nonsense"], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2 and "amanda: error:" in bad.stderr
    usage = subprocess.run([sys.executable, "-m", "amanda", "--help"], cwd=tmp_path, env=_env(),
                           capture_output=True, text=True, timeout=120, check=False)
    assert usage.returncode == 0 and usage.stdout.startswith("usage: amanda")


# reStructuredText a --help must not show: roles, literals, links, emphasis, directives
MARKUP = re.compile(r"``|:[a-z]+:`|`_\b|`__|\*\*|^\s*\.\. [a-z]+::", re.MULTILINE)


def _helps() -> dict[str, str]:
    parser = _parser()
    texts = {"amanda": parser.format_help()}
    actions = next(a for a in parser._actions if a.choices)  # noqa: SLF001 - the subcommands
    for name, command in actions.choices.items():
        texts[f"amanda {name}"] = command.format_help()
    return texts


def test_every_help_is_plain_text() -> None:
    """The command's --help and every subcommand's --help are plain text (no RST markup), and
    each subcommand's help says what it does and what each positional argument is."""
    helps = _helps()
    assert len(helps) >= 10
    for name, text in helps.items():
        assert not MARKUP.search(text), f"{name} --help shows markup: {MARKUP.search(text).group()!r}"
        if name != "amanda":
            description = text.split("\n\n")[1]
            assert description.strip().endswith("."), name
            positional = text.split("positional arguments:\n", 1)[-1].split("\n\n")[0]
            for row in positional.splitlines():
                if row.startswith("  ") and not row.startswith("   "):
                    assert len(row.split()) > 1, f"{name}: argument without help: {row.strip()}"
    assert "python -m amanda" in helps["amanda"]
    assert MARKUP.search(":func:`amanda.load` and ``x``") is not None  # the pattern itself catches markup
