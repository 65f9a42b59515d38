"""The whole registry: every ONNX op with a kernel has a vector-Jacobian rule or a reason it
has none, and each differentiable op's rule agrees with central finite differences in
float64 on the shapes and attributes of ONNX's own backend node test cases.

Each case's one-node model is widened to float64 where the op takes it (float32 otherwise,
with a wider step), given the loss ``sum(output * r)`` for a random ``r`` per float output,
imported, and differentiated with respect to every float input; the gradient's directional
derivatives along two random directions must match central differences of the loss."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import amanda  # noqa: E402
from amanda.autodiff.rules import WITHOUT_RULE, rule_for  # noqa: E402
from amanda.autodiff.rules_shape import NO_GRADIENT, no_gradient_vjp  # noqa: E402
from amanda.exec.kernels.registry import ONNX, entries  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402
from amanda.types import infer_types  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))
import onnx_cases  # noqa: E402

#: cases per op type (the first ones, by name)
PER_OP = 2
#: the loss's name (a case's own output may be called "loss")
LOSS = "checked_loss"
#: float inputs (by position) that are parameters of the op's geometry, not data: constants here
#: (RoiAlign's integer boxes put samples on pixels, where the boxes' gradient has a kink; the
#: boxes' gradient is checked in test_rules_sampling.py)
PARAMETERS = {"Resize": (1, 2), "Upsample": (1,), "OneHot": (1,), "RoiAlign": (1,)}
#: ops whose other outputs are statistics a loss may not read (the rule says so): output 0 only
FIRST_OUTPUT_ONLY = {"BatchNormalization", "LayerNormalization"}
#: cases whose data sit where the op is not differentiable, so differences disagree there
KINKED = {
    "test_acosh_example": "x = 1, where acosh's slope is infinite",
    "test_floor_example": "integers, where Floor jumps", "test_round": "halves, where Round jumps",
    "test_sign": "zero, where Sign jumps", "test_pow": "negative bases to fractional powers (NaN)",
    "test_castlike_BFLOAT16_to_FLOAT": "NaN and infinities in the data",
    "test_castlike_DOUBLE_to_FLOAT": "NaN and infinities in the data",
    "test_reduce_min_default_axes_keepdims_example": "tied minima (the rule shares their gradient)",
    "test_gridsample_aligncorners_true": "grid points on pixel centres, where bilinear sampling has a kink",
    **dict.fromkeys(["test_basic_deform_conv_with_padding", "test_basic_deform_conv_without_padding"],
                    "zero offsets put samples on pixels, where bilinear sampling has a kink"),
}
#: what the rules refuse on purpose (a SchemaError naming the op, as docs/training.md says)
REFUSED = {
    "test_averagepool_2d_ceil": "AveragePool's rule needs ceil_mode 0",
    **dict.fromkeys(["test_gather_elements_0", "test_gather_elements_1", "test_gathernd_example_float32",
                     "test_tile", "test_tile_precomputed"],
                    "before opset 16 ScatterElements cannot add at repeated positions"),
    **dict.fromkeys(["test_scatter_with_axis", "test_scatter_without_axis"], "opset 10 has no GatherElements"),
    "test_attention_23_fullymasked_qk_matmul_output_mode3_zero": "Attention's rule refuses a loss that reads "
                                                                  "qk_matmul_output",
    **dict.fromkeys(["test_sce_NCd1_mean_weight_negative_ii", "test_sce_NCd1_mean_weight_negative_ii_log_prob"],
                    "the class weights of the loss get no gradient (a SchemaError, not zeros)"),
    **dict.fromkeys(["test_loop11", "test_scan9_multi_state", "test_scan9_scalar"],
                    "a backward body holds Shape, which the opset tables cannot move below opset 15"),
}


def with_kernels() -> list[str]:
    return [e.op_type for e in entries(ONNX) if e.domain == "" and (e.kernels or e.session_kernels)]


def differentiable() -> list[str]:
    return [t for t in with_kernels() if _rule(t) is not None and _rule(t) is not no_gradient_vjp]


def _rule(op_type: str):
    return rule_for(ONNX, op_type)  # no_gradient_vjp for an op marked no_gradient


def test_every_op_with_a_kernel_has_a_rule_or_a_reason():
    """No op type with a kernel is left out: it has a rule, or NO_GRADIENT says why it has none,
    or WITHOUT_RULE says what its missing rule would take (and then it really has none)."""
    missing = [t for t in with_kernels() if _rule(t) is None and t not in WITHOUT_RULE]
    unexplained = [t for t in with_kernels() if _rule(t) is no_gradient_vjp and not NO_GRADIENT.get(t)]
    assert not missing, f"no rule and no reason: {missing}"
    assert not unexplained
    assert all(_rule(t) is None and WITHOUT_RULE[t] for t in WITHOUT_RULE)
    assert len(with_kernels()) == len(differentiable()) + len(NO_GRADIENT.keys() & set(with_kernels())) + len(WITHOUT_RULE)
    assert len(differentiable()) >= 140 and not WITHOUT_RULE


def coverage() -> dict[str, list[str]]:
    """docs/training.md's coverage table from the registry: gradient (a rule's module and name,
    ``none: <reason>``, or ``no rule yet: <what it would take>``) -> op types."""
    groups: dict[str, list[str]] = {}
    for op in with_kernels():
        rule = _rule(op)
        if rule is None:
            key = f"no rule yet: {WITHOUT_RULE[op]}"
        elif rule is no_gradient_vjp:
            key = f"none: {NO_GRADIENT[op]}"
        else:
            key = f"`{rule.__module__.rsplit('.', 1)[1]}.{rule.__name__}`"
        groups.setdefault(key, []).append(op)
    return groups


def coverage_markdown() -> str:
    """The table as docs/training.md holds it: rules first, then no gradient, then no rule yet."""
    rows = sorted(coverage().items(), key=lambda kv: (kv[0].startswith("none"), kv[0].startswith("no rule"), kv[0]))
    return "\n".join(["| op types | gradient |", "|---|---|"]
                     + [f"| {', '.join(sorted(ops_))} | {key} |" for key, ops_ in rows])


def test_the_docs_hold_the_coverage_table():
    """docs/training.md's coverage table is the registry's (regenerate it with
    ``python -c "from tests.autodiff.test_registry_gradients import coverage_markdown as c; print(c())"``)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text()
    assert coverage_markdown() in text


def test_an_op_without_a_rule_is_an_error_naming_it():
    """grad through an op of a family with no rules (a fused MatMulAdd, as a plan-time pass
    makes) is a SchemaError naming the op."""
    x = amanda.Port("x", attrs={"dtype": "float32", "shape": [2, 3]})
    w = amanda.op("Constant", "w", outputs=["output"], attrs={"value": np.ones((3, 4), np.float32)})
    fused = amanda.op("MatMulAdd", "fused", inputs=["A", "B", "C"], outputs=["Y"], attrs={"namespace": "amanda/fused/1"})
    net = amanda.Container("Model", "net", inputs=[x], outputs=["loss"], children=[w, fused],
                           edges=[("net:x", "fused:A"), ("w:output", "fused:B"), ("w:output", "fused:C"),
                                  ("fused:Y", "net:loss")], attrs={"namespace": "amanda/onnx/17"})
    with pytest.raises(amanda.SchemaError, match="fused"):
        amanda.grad(net, "loss", ["x"])


def _widened(model: onnx.ModelProto, inputs: tuple) -> onnx.ModelProto:
    """The model with its float32 inputs and outputs made float64."""
    wide = copy.deepcopy(model)
    graphs = [wide.graph]
    while graphs:  # the bodies of If, Loop and Scan too
        graph = graphs.pop()
        for vi in [*graph.input, *graph.output, *graph.value_info]:
            if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
                vi.type.tensor_type.elem_type = TensorProto.DOUBLE
        graphs += [a.g for node in graph.node for a in node.attribute if a.type == onnx.AttributeProto.GRAPH]
    return wide


def _with_loss(model: onnx.ModelProto, outputs: tuple, rng: np.random.Generator) -> onnx.ModelProto:
    """The model with one output, ``loss = sum_i sum(output_i * r_i)`` over its float outputs."""
    graph = model.graph
    terms = []
    first_only = model.graph.node[0].op_type in FIRST_OUTPUT_ONLY
    for j, (out, value) in enumerate(zip(list(graph.output), outputs)):
        value = np.asarray(value) if isinstance(value, np.generic) else value  # a 0-d result
        if first_only and j:
            continue
        elem = out.type.tensor_type.elem_type
        if elem not in (TensorProto.FLOAT, TensorProto.DOUBLE) or not isinstance(value, np.ndarray):
            continue
        dtype = np.float64 if elem == TensorProto.DOUBLE else np.float32
        r = numpy_helper.from_array(rng.standard_normal(value.shape).astype(dtype), f"r_{j}")
        graph.initializer.append(r)
        graph.initializer.append(numpy_helper.from_array(np.zeros(0, np.int64), f"scalar_{j}"))
        graph.initializer.append(numpy_helper.from_array(np.array(value.shape, np.int64), f"shape_{j}"))
        graph.node.extend([helper.make_node("Reshape", [out.name, f"shape_{j}"], [f"o_{j}"]),  # a known shape
                           helper.make_node("Mul", [f"o_{j}", f"r_{j}"], [f"m_{j}"]),
                           helper.make_node("ReduceSum", [f"m_{j}"], [f"s_{j}"], keepdims=0),
                           helper.make_node("Reshape", [f"s_{j}", f"scalar_{j}"], [f"l_{j}"])])  # rank 0, known
        terms.append(f"l_{j}")
    if not terms:
        return model
    graph.node.append(helper.make_node("Sum", terms, [LOSS]))
    kind = graph.output[0].type.tensor_type.elem_type if len(terms) else TensorProto.DOUBLE
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info(LOSS, kind, []))
    return model


def _cases():
    groups = onnx_cases.cases_by_op()
    for op_type in differentiable():
        for case in sorted(groups.get(op_type, []), key=lambda c: c.name)[:PER_OP]:
            yield pytest.param(case, id=case.name)


def _prepared(case):
    """(model, feeds, float input names, step): float64 where the op takes it."""
    rng = np.random.default_rng(0)
    inputs = [np.asarray(v) if isinstance(v, np.generic) else v for v in case.inputs]  # 0-d inputs as arrays
    names = [i.name for i in case.model.graph.input if i.name not in {t.name for t in case.model.graph.initializer}]
    params = PARAMETERS.get(case.op_type, ())
    floats = [n for j, (n, v) in enumerate(zip(names, inputs))
              if isinstance(v, np.ndarray) and v.dtype == np.float32 and j not in params]
    for wide in (True, False):
        proto = _widened(case.model, inputs) if wide else copy.deepcopy(case.model)
        fixed = [(n, v) for n, v in zip(names, inputs) if n not in floats and isinstance(v, np.ndarray)]
        for n, v in fixed:  # axes, shapes, indices: constants, as in a real model
            proto.graph.initializer.append(numpy_helper.from_array(v, n))
        kept = [i for i in proto.graph.input if i.name not in {n for n, _ in fixed}]
        del proto.graph.input[:]
        proto.graph.input.extend(kept)
        feeds = {n: (v.astype(np.float64) if wide else v) for n, v in zip(names, inputs) if n in floats}
        outputs = tuple(o.astype(np.float64) if wide and isinstance(o, np.ndarray) and o.dtype == np.float32 else o
                        for o in case.outputs)
        try:
            net = from_onnx(_with_loss(proto, outputs, rng))
            if infer_types(net).problems:  # the op (or a body) does not take float64
                continue
            with amanda.Session(net, threads=1) as s:
                s.run([LOSS], feeds)
        except amanda.AmandaError:
            continue
        return net, feeds, floats, (1e-6 if wide else 1e-3)
    pytest.skip("no float32 data to widen (float16, bfloat16, integer, boolean, optional or sequence data)")


@pytest.mark.parametrize("case", list(_cases()))
def test_rule_agrees_with_differences_on_onnx_cases(case):
    """Directional derivatives of ``amanda.grad`` match central differences of the loss."""
    if case.name in KINKED:
        pytest.skip(KINKED[case.name])
    net, feeds, floats, eps = _prepared(case)
    if not floats or LOSS not in net.output_names:
        pytest.skip("no float input or output")
    if case.name in REFUSED:
        with pytest.raises(amanda.SchemaError):
            amanda.grad(net, LOSS, floats)
        return
    g = amanda.grad(net, LOSS, floats)
    with amanda.Session(g, threads=1) as s:
        grads = s.run([f"grad/{n}" for n in floats], feeds)
    rng = np.random.default_rng(1)
    with amanda.Session(net, threads=1) as s:
        for name, got in zip(floats, grads):
            base = feeds[name]
            assert got.shape == base.shape
            for _ in range(2):
                v = rng.standard_normal(base.shape).astype(base.dtype)
                up = float(s.run([LOSS], {**feeds, name: base + eps * v})[0])
                down = float(s.run([LOSS], {**feeds, name: base - eps * v})[0])
                numeric = (up - down) / (2 * eps)
                analytic = float(np.sum(got.astype(np.float64) * v))
                scale = float(np.sqrt(np.sum(got.astype(np.float64) ** 2) * np.sum(v.astype(np.float64) ** 2)))
                tol = (1e-6 if eps < 1e-4 else 2e-2) * (1 + scale)
                assert abs(numeric - analytic) <= tol, (name, numeric, analytic)
