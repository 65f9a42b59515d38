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


def test_errors_are_one_line_with_status_2(tmp_path, capsys):
    """A bad file gives exit status 2 and one error line on stderr, as bad usage does."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("graph: [")
    assert main(["info", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("amanda: error: info:") and err.count("\n") == 1
    with pytest.raises(SystemExit) as exit_info:
        main(["nonsense"])
    assert exit_info.value.code == 2


def bad_inputs(tmp_path):
    """A file per kind of bad input: an edge document, broken YAML and JSON, an absent file, a directory."""
    edge = tmp_path / "edge.yaml"
    edge.write_text("edge:\n  output_port: {op: m, port: y}\n  input_port: {op: z, port: x}\n")
    port = tmp_path / "port.yaml"
    port.write_text("input_port:\n  name: x\n")
    broken = tmp_path / "broken.json"
    broken.write_text("[1, 2")
    binary = tmp_path / "junk.onnx"
    binary.write_bytes(b"\x0a\xff\xff\xff\xff\x0f junk")
    return {"edge": edge, "port": port, "json": broken, "onnx": binary,
            "absent": tmp_path / "absent.yaml", "directory": tmp_path}


@pytest.mark.parametrize("command", ["info", "validate", "select", "convert"])
@pytest.mark.parametrize("kind", ["edge", "port", "json", "onnx", "absent", "directory"])
def test_every_command_reports_bad_input_in_one_line(tmp_path, capsys, command, kind):
    """Each subcommand given a bad document prints exactly one `amanda: error:` line and exits 2."""
    path = str(bad_inputs(tmp_path)[kind])
    extra = {"select": ["$..*"], "convert": [str(tmp_path / "out.json")]}.get(command, [])
    assert main([command, path, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"amanda: error: {command}: ") and err.count("\n") == 1, err
    if kind in ("edge", "port"):
        assert "expected a container" in err


def test_cli_in_a_subprocess_prints_no_traceback(tmp_path):
    """`python -m amanda.cli info` on an edge document exits 2 with one stderr line and no traceback."""
    import subprocess
    import sys

    edge = bad_inputs(tmp_path)["edge"]
    done = subprocess.run([sys.executable, "-m", "amanda.cli", "info", str(edge)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "expected a container" in done.stderr


def test_select_and_convert_report_their_own_errors(tmp_path, capsys):
    """A malformed selector, an unknown namespace and an unknown --outputs endpoint each give one line and status 2."""
    target = str(tmp_path / "out.onnx")
    runs = [
        (["select", TF_GRAPH, "$[?"], "closing this filter"),
        (["convert", TF_GRAPH, target, "--namespace", "no/such/space"], "no/such/space"),
        (["convert", TF_GRAPH, target, "--namespace", "amanda/onnx/17", "--outputs", "nope:x"], "nope:x"),
    ]
    for argv, expected in runs:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("amanda: error:") and err.count("\n") == 1 and expected in err, err


def test_convert_outputs_option_names_the_graph_outputs(tmp_path):
    """--outputs exposes the given endpoints (optionally renamed) as the ONNX model's outputs."""
    onnx = pytest.importorskip("onnx")
    target = tmp_path / "dense.onnx"
    argv = ["convert", TF_GRAPH, str(target), "--namespace", "amanda/onnx/17",
            "--outputs", "logits=dense/Relu:activations", "dense/MatMul:product"]
    assert main(argv) == 0
    model = onnx.load(str(target))
    onnx.checker.check_model(model, full_check=True)
    assert [o.name for o in model.graph.output] == ["logits", "dense/MatMul:product"]


def test_convert_outputs_without_a_namespace_change(tmp_path):
    """--outputs alone (no --namespace) adds the named values to a graph's outputs before writing."""
    onnx = pytest.importorskip("onnx")
    relu = amanda.op("Relu", "relu", inputs=["X"], outputs=["Y"])
    neg = amanda.op("Neg", "neg", inputs=["X"], outputs=["Y"])
    typed = {"dtype": "float32", "shape": (2,)}
    graph = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs=typed)], outputs=[amanda.Port("y", attrs=typed)],
                             children=[relu, neg], attrs={"namespace": "amanda/onnx/17"},
                             edges=[("g:x", "relu:X"), ("relu:Y", "neg:X"), ("neg:Y", "g:y")])
    source, target = tmp_path / "g.yaml", tmp_path / "g.onnx"
    amanda.dump(graph, source)
    assert main(["convert", str(source), str(target), "--outputs", "hidden=relu:Y"]) == 0
    assert [o.name for o in onnx.load(str(target)).graph.output] == ["y", "hidden"]


def _mlp_file(tmp_path):
    """The MLP fixture as an ONNX file, and a batch for it."""
    import numpy as np

    from tests.fixtures.onnx import onnx_models as models

    pytest.importorskip("onnx")
    import onnx

    path = tmp_path / "mlp.onnx"
    onnx.save(models.mlp(), path)
    batch = tmp_path / "x.npy"
    np.save(batch, models.feeds("mlp")["x"])
    return path, batch


def test_run_computes_the_outputs_onnxruntime_computes(tmp_path, capsys):
    """run feeds .npy inputs, saves the fetched arrays to .npz (equal to onnxruntime's) and times it."""
    import numpy as np

    from tests.fixtures.onnx import onnx_models as models

    path, batch = _mlp_file(tmp_path)
    out = tmp_path / "out.npz"
    assert main(["run", str(path), "--input", f"x={batch}", "--output", str(out), "--repeat", "3"]) == 0
    captured = capsys.readouterr()
    assert "median of 3" in captured.err
    (expected,) = models.run(models.mlp(), {"x": np.load(batch)})
    with np.load(out) as saved:
        np.testing.assert_allclose(saved[saved.files[0]], expected, rtol=1e-5, atol=1e-6)


def test_run_refuses_inputs_it_cannot_read(tmp_path, capsys):
    """A malformed NAME=FILE, a file that is not .npy, or a missing feed is one error line, status 2."""
    path, batch = _mlp_file(tmp_path)
    junk = tmp_path / "junk.npy"
    junk.write_bytes(b"not numpy")
    for argv in (["run", str(path), "--input", "x"], ["run", str(path), "--input", f"x={junk}"],
                 ["run", str(path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("amanda: error: run:")


def test_summary_and_render(tmp_path, capsys):
    """summary prints the layer table; render writes a picture whose suffix picks its format."""
    import shutil

    path, _ = _mlp_file(tmp_path)
    assert main(["summary", str(path)]) == 0
    assert "total parameters:" in capsys.readouterr().out
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    target = tmp_path / "mlp.svg"
    assert main(["render", str(path), str(target), "--highlight", "$..[?type=='Gemm']"]) == 0
    assert "<svg" in target.read_text()
    assert main(["render", str(path), str(tmp_path / "no.svg"), "--max-nodes", "1"]) == 2
    assert "past the drawing budget of max_nodes=1" in capsys.readouterr().err


def test_diff_exit_status_says_whether_models_differ(tmp_path, capsys):
    """diff prints changes by path and exits 1 when there are any, 0 when there are none."""
    a = amanda.chain(amanda.op("Relu", "r", ["x"], ["y"]), inputs=["x"], outputs=["y"], name="m")
    b = amanda.with_attrs(a, "r", debug=True)
    pa, pb = tmp_path / "a.yaml", tmp_path / "b.yaml"
    amanda.dump(a, pa)
    amanda.dump(b, pb)
    assert main(["diff", str(pa), str(pa)]) == 0
    assert "(no differences)" in capsys.readouterr().out
    assert main(["diff", str(pa), str(pb)]) == 1
    assert capsys.readouterr().out.strip() == "~ r: attribute debug: (absent) -> True"
