"""The optimiser's fusions are rewrite rules, each written in at most ten lines (issue 29's
figure): the ``Rule(...)`` statement, pattern included, counted in the module source; for the
four fusions of amanda/passes/fuse.py, with the helpers only that rule uses (its marked block).
The rule language's general features (amanda/rewrite/: ``const``, ``real``, the match context)
are not counted."""

from __future__ import annotations

import ast
import inspect

import pytest

from amanda.passes import cleanup, fuse, reorder
from amanda.rewrite import Rule

RULES = [(fuse, "CONV_BATCHNORM"), (fuse, "MATMUL_ADD"), (fuse, "GELU"), (fuse, "SWISH"),
         (reorder, "POOL_BEFORE_RELU"), (cleanup, "IDENTITIES")]


@pytest.mark.parametrize(("module", "name"), RULES, ids=[name for _, name in RULES])
def test_each_fusion_is_a_rule_of_at_most_ten_lines(module: object, name: str) -> None:
    """The module-level statement defining the rule (or rule tuple) spans at most ten lines and
    builds Rules whose patterns pass the schema check (deferred at import, which builds no
    namespace)."""
    value = getattr(module, name)
    rules = value if isinstance(value, tuple) else (value,)
    assert rules and all(isinstance(r, Rule) for r in rules)
    assert all(r.checked() is r for r in rules)  # op types and attributes as the ONNX schemas have them
    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    (statement,) = [n for n in tree.body if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]
    assert statement.end_lineno is not None
    assert statement.end_lineno - statement.lineno + 1 <= 10


FUSIONS = {"conv_batchnorm": "CONV_BATCHNORM", "matmul_add": "MATMUL_ADD", "gelu": "GELU", "swish": "SWISH"}


def rule_blocks(source: str) -> dict[str, list[tuple[int, str]]]:
    """The ``# rule: name.`` blocks of a module: numbered lines from the marker to the next blank line."""
    blocks: dict[str, list[tuple[int, str]]] = {}
    current: list[tuple[int, str]] | None = None
    for number, line in enumerate(source.splitlines(), 1):
        if line.startswith("# rule: "):
            current = blocks.setdefault(line[len("# rule: "):].split(".")[0], [])
        elif not line.strip():
            current = None
        if current is not None:
            current.append((number, line))
    return blocks


@pytest.mark.parametrize("rule", FUSIONS)
def test_each_fusion_with_its_own_helpers_is_at_most_ten_lines(rule: str) -> None:
    """Issue 29's figure, held with the helpers counted: the block of each fusion (its comment,
    the rule's statement, and every function or value of fuse.py it uses) is at most ten lines.
    The only names of fuse.py a block may use from outside it are the rule language's
    (imported from amanda.rewrite) and other imports."""
    source = inspect.getsource(fuse)
    tree = ast.parse(source)
    block = rule_blocks(source)[rule]
    assert 1 <= len(block) <= 10, (rule, len(block))
    first, last = block[0][0], block[-1][0]
    defined = {}  # module-level definitions of fuse.py (not imports): name -> (first line, last line)
    for node in tree.body:
        names = [node.name] if isinstance(node, ast.FunctionDef) else [
            t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        for name in names:
            defined[name] = (node.lineno, node.end_lineno)
    start, end = defined[FUSIONS[rule]]
    assert first <= start and end <= last  # the statement making the rule lies in its block
    statement = next(n for n in tree.body if getattr(n, "lineno", 0) == start)
    used = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)}
    for name in sorted(used & set(defined)):
        lo, hi = defined[name]
        assert first <= lo and hi <= last, f"{rule} uses {name}, defined outside its block"
    made = getattr(fuse, FUSIONS[rule])
    for r in made if isinstance(made, tuple) else (made,):
        assert r.name == rule


def test_the_block_reader_counts_helpers_and_stops_at_a_blank_line() -> None:
    """The counting itself: a block runs from its marker to the first blank line."""
    text = "x = 1\n# rule: a. one\ndef _h(): pass\nA = _h\n\n# rule: b. two\nB = 2\n"
    assert {k: [n for n, _ in v] for k, v in rule_blocks(text).items()} == {"a": [2, 3, 4], "b": [6, 7]}


def _conv_bn(bn_attrs: dict, bias: str | None = None, scale_input: bool = False) -> object:
    """x -> Conv(w[, b]) -> BatchNormalization(s, b2, m, v): constants unless ``bias="input"``
    (the Conv's bias a graph input) or ``scale_input`` (the scale a graph input)."""
    import numpy as np

    from amanda import Container, op

    def c(name: str, value: object) -> Container:
        return op("Constant", name, [], ["output"], {"value": np.asarray(value, np.float32)})

    children = [c("w", np.full((2, 1, 1, 1), 3.0)), c("cb", [1.0, -1.0]), c("s", [2.0, 0.5]), c("b2", [1.0, 0.0]),
                c("m", [0.5, 1.0]), c("v", [4.0, 1.0]), op("Conv", "conv", ["X", "W", "B"], ["Y"]),
                op("BatchNormalization", "bn", ["X", "scale", "B", "input_mean", "input_var"], ["Y"], bn_attrs)]
    edges = [("g:x", "conv:X"), ("w:output", "conv:W"), ("conv:Y", "bn:X"), ("b2:output", "bn:B"),
             ("m:output", "bn:input_mean"), ("v:output", "bn:input_var"), ("bn:Y", "g:y"),
             ("g:s" if scale_input else "s:output", "bn:scale")]
    edges += [] if bias is None else [("g:cb" if bias == "input" else "cb:output", "conv:B")]
    return Container(None, "g", inputs=["x", "s", "cb"], outputs=["y"], children=children, edges=edges,
                     attrs={"namespace": "amanda/onnx/17"})


@pytest.mark.parametrize(("attrs", "bias", "scale_input", "folded"), [
    ({"epsilon": 0.0}, None, False, True), ({"epsilon": 0.0}, "constant", False, True),
    ({}, "constant", False, True), ({"training_mode": 0, "epsilon": 1e-3}, "constant", False, True),
    ({"training_mode": 1}, None, False, False), ({"training_mode": None}, None, False, False),
    ({"epsilon": None}, None, False, False), ({"epsilon": [1e-5, 1e-5]}, None, False, False),
    ({}, "input", False, False), ({}, None, True, False)])
def test_conv_batchnorm_folds_only_constant_weights_in_inference_mode(attrs: dict, bias: str | None,
                                                                       scale_input: bool, folded: bool) -> None:
    """The rule's declarations (constant inputs, ``training_mode`` 0 or absent, a real
    ``epsilon``) decide; a fold computes what numpy computes for the two ops."""
    import numpy as np

    from amanda import Session

    model = _conv_bn(attrs, bias, scale_input)
    out, report = fuse.fuse_conv_batchnorm(model)
    assert (report.replaced == ("conv", "bn")) is folded and (out is model) is not folded
    if folded:
        x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 4)
        eps = float(attrs.get("epsilon", 1e-5))
        conv = 3.0 * x + (np.float32([1.0, -1.0]) if bias else np.zeros(2, np.float32)).reshape(1, 2, 1, 1)
        s, b2, m, v = (np.float32(a).reshape(1, 2, 1, 1) for a in ([2.0, 0.5], [1.0, 0.0], [0.5, 1.0], [4.0, 1.0]))
        expected = (conv - m) / np.sqrt(v + eps) * s + b2
        found = Session(out).run(["y"], {"x": x})[0]
        np.testing.assert_allclose(found, expected, rtol=1e-5)
