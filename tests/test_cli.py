"""The amanda command line."""

import pytest

import amanda
from amanda.cli import main

TF_GRAPH = "tests/fixtures/documents/tensorflow_dense_graph.yaml"


def test_info_summarises_a_model(capsys):
    """info prints the namespace, ports and op counts."""
    assert main(["info", TF_GRAPH]) == 0
    out = capsys.readouterr().out
    assert "amanda/tensorflow/1.13.1" in out and "ops: 4" in out and "MatMul" in out


def test_select_prints_selected_paths(capsys):
    """select prints one path per selected node."""
    assert main(["select", TF_GRAPH, "$[?type=='MatMul']"]) == 0
    assert capsys.readouterr().out.strip().split("\t")[0] == "dense/MatMul"


def test_convert_between_formats(tmp_path, capsys):
    """convert rewrites by suffix and the result loads equal."""
    target = tmp_path / "graph.json"
    assert main(["convert", TF_GRAPH, str(target)]) == 0
    assert amanda.load(target) == amanda.load(TF_GRAPH)


def test_validate_reports_problems_and_exit_status(tmp_path, capsys):
    """validate exits 1 and prints each problem for an op that does not fit its namespace."""
    bad = amanda.Container(children=[amanda.op("NoSuchOp", "x")], attrs={"namespace": "amanda/onnx/17"})
    path = tmp_path / "bad.yaml"
    amanda.dump(bad, path)
    assert main(["validate", str(path)]) == 1
    assert "NoSuchOp" in capsys.readouterr().out


def test_errors_are_one_line_with_status_1(tmp_path, capsys):
    """A bad file gives exit status 1 and the error on stderr; bad usage exits 2."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("graph: [")
    assert main(["info", str(broken)]) == 1
    assert "amanda info:" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["nonsense"])
    assert exit_info.value.code == 2
