"""Every script in examples/ runs to completion."""

import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted(Path(__file__).resolve().parent.parent.joinpath("examples").glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(script, tmp_path, monkeypatch, capsys):
    """The example runs without error and prints something."""
    if script.name == "train_digits.py":
        pytest.importorskip("sklearn")  # the `examples` extra
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(script)])
    runpy.run_path(str(script), run_name="__main__")
    assert capsys.readouterr().out.strip()
