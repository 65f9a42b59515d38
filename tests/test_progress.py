"""Progress bars: shown on a terminal after a delay, silent otherwise or when asked."""

from __future__ import annotations

import io
import sys

import pytest

from amanda.progress import progress, progress_enabled


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def run(steps: int, delay: float, quiet: bool | None = None) -> str:
    with progress(steps, "loading", quiet=quiet, delay=delay) as bar:
        for _ in range(steps):
            bar.update()
    return sys.stderr.getvalue()  # type: ignore[attr-defined]


def test_a_terminal_shows_a_bar_with_the_description(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal, with no delay, the bar prints its description and count."""
    monkeypatch.delenv("AMANDA_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", Terminal())
    text = run(5, delay=0)
    assert "loading" in text and "/5" in text


def test_short_operations_quiet_runs_and_files_stay_silent(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run shorter than the delay, quiet=True, AMANDA_PROGRESS=0, or a stderr that is no
    terminal print nothing."""
    monkeypatch.delenv("AMANDA_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert run(5, delay=30) == ""
    assert run(5, delay=0, quiet=True) == ""
    monkeypatch.setenv("AMANDA_PROGRESS", "0")
    assert run(5, delay=0) == ""
    monkeypatch.delenv("AMANDA_PROGRESS")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not progress_enabled() and run(5, delay=0) == ""


def test_the_environment_can_force_bars_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """AMANDA_PROGRESS=1 shows bars even when stderr is not a terminal."""
    monkeypatch.setenv("AMANDA_PROGRESS", "1")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert "loading" in run(3, delay=0)


def test_loading_importing_and_converting_show_bars(monkeypatch: pytest.MonkeyPatch) -> None:
    """loads, ONNX import and convert drive a bar (forced on, with no delay)."""
    import amanda
    import amanda.progress as progress_module

    monkeypatch.setenv("AMANDA_PROGRESS", "1")
    monkeypatch.setattr(progress_module, "DELAY_SECONDS", 0.0)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    shown: list[str] = []
    real = progress_module.progress

    def spy(total, description, quiet=None, delay=0.0):  # type: ignore[no-untyped-def]
        if not quiet:
            shown.append(description)
        return real(total, description, quiet, 0.0)

    import importlib

    for name in ("amanda.io.document", "amanda.io.onnx.read_graph", "amanda.rewrite.mapping.convert"):
        monkeypatch.setattr(importlib.import_module(name), "progress", spy)
    g = amanda.chain(amanda.op("Relu", "r", ["x"], ["y"]), inputs=["x"], outputs=["y"], name="g")
    amanda.loads(amanda.dumps(g))
    pytest.importorskip("onnx")
    from amanda.io.onnx.importer import from_onnx
    from tests.fixtures.onnx import onnx_models as models

    amanda.convert(from_onnx(models.mlp()), "amanda/onnx/16")
    assert shown[0] == "loading" and "importing ONNX" in shown and "converting to amanda/onnx/16" in shown
    assert "loading" in sys.stderr.getvalue()  # type: ignore[attr-defined]
