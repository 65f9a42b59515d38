"""Every Python block in docs/*.md runs, in order, in one namespace per page."""

import re
from pathlib import Path

import pytest

DOCS = sorted(Path(__file__).resolve().parent.parent.joinpath("docs").glob("*.md"))


def blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.DOTALL)


@pytest.mark.parametrize("page", [d for d in DOCS if blocks(d)], ids=lambda p: p.name)
def test_doc_snippets_run(page, tmp_path, monkeypatch):
    """Each snippet on the page runs without error after the ones before it."""
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for number, code in enumerate(blocks(page)):
        try:
            exec(compile(code, f"{page.name}[block {number}]", "exec"), namespace)  # noqa: S102 - our own docs
        except Exception as exc:  # pragma: no cover - the message is the point
            raise AssertionError(f"{page.name} block {number} failed: {exc!r}") from exc
