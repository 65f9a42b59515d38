"""The command line refuses counts that mean nothing (``--repeat 0``, ``--top -5``) as bad usage,
with exit status 2 and a message saying what was expected, instead of running anyway."""

import pytest

from amanda.cli import main

TF_GRAPH = "tests/fixtures/documents/tensorflow_dense_graph.yaml"


@pytest.mark.parametrize("argv, option, minimum", [
    (["run", TF_GRAPH, "--repeat", "0"], "--repeat", 1),
    (["run", TF_GRAPH, "--repeat", "-1"], "--repeat", 1),
    (["run", TF_GRAPH, "--repeat", "two"], "--repeat", 1),
    (["info", TF_GRAPH, "--top", "-5"], "--top", 0),
    (["summary", TF_GRAPH, "--depth", "-1"], "--depth", 0),
    (["render", TF_GRAPH, "x.svg", "--depth", "-2"], "--depth", 0),
])
def test_meaningless_counts_are_usage_errors(argv, option, minimum, capsys):
    """Each count below its minimum, or not a number, exits 2 naming the option and the bound."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: expected a whole number >= {minimum}, found {argv[-1]!r}" in err


def test_counts_at_their_minimum_are_accepted(capsys):
    """``--top 0`` lists no op types, and ``info`` still succeeds."""
    assert main(["info", TF_GRAPH, "--top", "0"]) == 0
    assert "MatMul" not in capsys.readouterr().out
