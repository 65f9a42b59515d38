"""The CI script leaves in its log what is needed to diagnose a dependency's change."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_prints_the_resolved_versions_after_installing():
    """`.ci/run` runs `pip freeze` after its install command and before the tests, so the versions
    pip resolved on that day are in the log of every CI run."""
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    install = next(i for i, line in enumerate(lines) if "pip install" in line and "-e " in line)
    freeze = next(i for i, line in enumerate(lines) if line == "python -m pip freeze")
    tests = next(i for i, line in enumerate(lines) if line.startswith("python -m pytest"))
    assert install < freeze < tests
