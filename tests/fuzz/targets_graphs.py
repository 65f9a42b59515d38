"""Fuzz targets over models and the op builder, each checked against an oracle outside the code
under test: ``graph_check`` (validate and infer_types on models with cycles made by edits and
malformed declared types), ``builder`` (the op builder against onnx's strict type check, and
``Input``'s dtype names) and ``layer_chain`` (chained layers against their widths).

A case is plain data (model name, mutations; op, dtypes, shapes; layer specs), so it replays
from its index and describes itself for a crash record; ``run`` builds it.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

import amanda
from amanda import Container, Port
from amanda.errors import AmandaError, CycleError
from tests.fuzz import seeds
from tests.fuzz.harness import InvalidResult, Source, Target, check_unchanged, snapshot

# dtype words and dims, classified here (not by amanda): exact ONNX names are dtypes
GOOD_DTYPES = ["float32", "float64", "float16", "int64", "int32", "int8", "uint8", "bool", "string", "bfloat16"]
BAD_DTYPES = ["flaot32", "float", "int", "double", "f4", "", "Float32", "int46", 7, 2.5, ["float32"]]
GOOD_SHAPES = [[2, 3], ["batch", 8], [None, 4], [], [0], ["n"]]
BAD_SHAPES = [[-1], [2.5], [-3, 4], [True], "n", [[2]]]

# -- graph_check ----------------------------------------------------------------------------


@functools.cache
def _models() -> dict[str, Container]:
    return {k: v for k, v in seeds.onnx_containers().items() if k in ("mlp", "cnn", "attention", "control_flow")}


def _typed_port(src: Source) -> dict[str, Any]:
    """Port attributes: a good or bad dtype, with a good or bad shape."""
    attrs: dict[str, Any] = {"dtype": src.choice(BAD_DTYPES if src.boolean(0.4) else GOOD_DTYPES)}
    if src.boolean(0.7):
        attrs["shape"] = src.choice(BAD_SHAPES if src.boolean(0.3) else GOOD_SHAPES)
    return attrs


def _mutation(src: Source, ops: list[tuple[str, ...]]) -> dict[str, Any]:
    kind = src.choice(["cycle", "cycle", "control", "port", "port"])
    if kind == "port":
        where = src.choice(["input", "output", "op input", "op output"])
        return {"kind": kind, "where": where, "op": src.integer(0, len(ops) - 1), "attrs": _typed_port(src)}
    i, j = sorted((src.integer(0, len(ops) - 1), src.integer(0, len(ops) - 1)))
    spelling = src.choice(["prefixed", "prefixed", "prefixed", "bare", "misspelt"])
    return {"kind": kind, "early": i, "late": j, "spelling": spelling}


def generate_graph(src: Source) -> tuple[str, list[dict[str, Any]]]:
    """A fixture model's name and one to three mutations."""
    name = src.choice(sorted(_models()))
    ops = list(amanda.flatten(_models()[name]).topological_order())
    return name, [_mutation(src, ops) for _ in range(src.integer(1, 3))]


def _retyped(model: Container, mutation: dict[str, Any]) -> Container:
    attrs, where = mutation["attrs"], mutation["where"]
    if where in ("input", "output"):
        ports = model.inputs if where == "input" else model.outputs
        if not ports:
            return model
        changed = [Port(p.name, attrs=attrs) if k == 0 else p for k, p in enumerate(ports)]
        return model.evolve(**{f"{where}s": changed})
    try:
        order = list(amanda.flatten(model).topological_order())
    except CycleError:
        return model
    path = order[mutation["op"] % len(order)]
    if len(path) != 1:
        return model
    leaf = model.child(path[0])
    ports = leaf.inputs if where == "op input" else leaf.outputs
    if not ports:
        return model
    new = leaf.evolve(**{"inputs" if where == "op input" else "outputs":
                         [Port(p.name, attrs={**p.attrs, **attrs}) if k == 0 else p for k, p in enumerate(ports)]})
    return model.evolve(children=[new if c.name == leaf.name else c for c in model.children])


def _endpoint(model: Container, path: tuple[str, ...], port: Any, spelling: str) -> tuple[str, str]:
    """The endpoint text for an edit of ``model`` and what its error must name if it fails."""
    name = model.name or "model"
    op = "/".join(path)
    if spelling == "bare":
        return f"{op}:{port}", f"{name}/{op}:{port}"
    if spelling == "misspelt":
        return f"{name}/{op}x:{port}", f"'{path[-1]}x'"
    return f"{name}/{op}:{port}", ""


def _looped(model: Container, mutation: dict[str, Any]) -> tuple[Container, str]:
    """An edit wrapper feeding an earlier op from a later one (data or control); the model as
    it is when an earlier mutation already closed a cycle (there is no order to pick from)."""
    try:
        flat = amanda.flatten(model)
    except CycleError:
        return model, ""
    order = list(flat.topological_order())
    early, late = order[mutation["early"] % len(order)], order[mutation["late"] % len(order)]
    spelling = mutation["spelling"]
    name = f"{model.name}_e"  # wrappers named apart from what they wrap: an unnamed one would be renamed
    if mutation["kind"] == "control":
        src, must = _endpoint(model, late, -1, spelling)
        return amanda.edit(model).connect(src, _endpoint(model, early, -1, "prefixed")[0]).build(name), must
    feeding = [e for e in flat.edges if e.dst.op == early and e.src.op != amanda.SELF and e.dst.port != -1]
    outs = flat.ops[late].outputs
    if not feeding or not outs or len(early) != 1 or len(feeding[0].src.op) != 1:
        return model, ""
    edge = feeding[0]
    src, must = _endpoint(model, late, outs[0].name, spelling)
    editing = amanda.edit(model).remove_edge(_endpoint(model, edge.src.op, edge.src.port, "prefixed")[0],
                                             _endpoint(model, early, edge.dst.port, "prefixed")[0])
    return editing.connect(src, _endpoint(model, early, edge.dst.port, "prefixed")[0]).build(name), must


def run_graph(case: tuple[str, list[dict[str, Any]]]) -> None:
    """validate and infer_types end well, agree, report a cycle exactly when flatten finds one
    and a malformed declared type whenever one was written; an edit refused for an endpoint
    names the missing op or the prefixed endpoint."""
    model = _models()[case[0]]
    malformed = False
    for mutation in case[1]:
        if mutation["kind"] == "port":
            before = model
            model = _retyped(model, mutation)
            attrs = mutation["attrs"]
            malformed = malformed or (model is not before and (
                attrs["dtype"] in BAD_DTYPES or attrs.get("shape") in BAD_SHAPES))
            continue
        try:
            model, _ = _looped(model, mutation)
        except AmandaError as error:  # flatten worked in _looped: it works here
            must = _expected_words(model, mutation)
            if must and must not in str(error):
                raise InvalidResult(f"an edit endpoint was refused without naming {must}: {error}") from None
            raise
    before = snapshot(model)
    problems = [str(p) for p in amanda.validate(model, unknown_namespace="report")]
    try:
        typed = [str(p) for p in amanda.infer_types(model).problems]
    except AmandaError as error:  # a model's content is reported, as validate reports it
        raise InvalidResult(f"infer_types raised instead of reporting a problem: {error}") from None
    check_unchanged(model, before, "the model validated")
    if not set(typed) <= set(problems):
        raise InvalidResult(f"infer_types reports {sorted(set(typed) - set(problems))[:2]}, validate does not")
    try:
        amanda.flatten(model)
        cyclic = False
    except CycleError:
        cyclic = True
    reported = any("an acyclic dataflow" in p for p in problems)
    if cyclic != reported:
        raise InvalidResult(f"flatten {'finds' if cyclic else 'finds no'} cycle, validate {'does' if reported else 'does not'} report one")
    if malformed and not problems:
        raise InvalidResult("a malformed declared type was written and validate reports nothing")


def _expected_words(model: Container, mutation: dict[str, Any]) -> str:
    """What an error refusing this edit's endpoint must contain (the fix or the missing name)."""
    order = list(amanda.flatten(model).topological_order())
    late = order[mutation["late"] % len(order)]
    ports = amanda.flatten(model).ops[late].outputs
    port = -1 if mutation["kind"] == "control" else (ports[0].name if ports else 0)
    return _endpoint(model, late, port, mutation["spelling"])[1]


# -- builder --------------------------------------------------------------------------------

# ops built from graph inputs alone (no attribute required), with their input count
BUILDER_OPS = {
    "Relu": 1, "Abs": 1, "Neg": 1, "Sigmoid": 1, "Exp": 1, "Sqrt": 1, "Not": 1, "Floor": 1, "Sign": 1,
    "Identity": 1, "IsNaN": 1, "Reciprocal": 1, "Softmax": 1, "Transpose": 1, "Size": 1, "Shape": 1,
    "Add": 2, "Mul": 2, "Sub": 2, "Div": 2, "And": 2, "Or": 2, "Xor": 2, "Max": 2, "Min": 2, "Equal": 2,
    "Less": 2, "Greater": 2, "MatMul": 2, "Pow": 2, "PRelu": 2, "Reshape": 2, "Expand": 2, "Where": 3,
}
BUILDER_DTYPES = ["float32", "float64", "float16", "int32", "int64", "int8", "uint8", "bool", "string",
                  "complex64", "bfloat16"]
_ONNX_TYPES = {"float32": 1, "uint8": 2, "int8": 3, "int32": 6, "int64": 7, "string": 8, "bool": 9, "float16": 10,
               "float64": 11, "complex64": 14, "bfloat16": 16}  # TensorProto numbers, written out here
INPUT_DTYPES = [*GOOD_DTYPES, *BAD_DTYPES[:8], np.float32, np.int64]


def generate_builder(src: Source) -> tuple[str, Any, tuple]:
    """``("op", type, [(dtype, shape) ...])`` or ``("input", dtype, shape)``."""
    if src.boolean(0.25):
        return "input", src.choice(INPUT_DTYPES), (2, 3)
    op_type = src.choice(sorted(BUILDER_OPS))
    shape = tuple(src.integer(1, 3) for _ in range(src.integer(0, 3)))
    inputs = []
    for _ in range(BUILDER_OPS[op_type]):
        dtype = src.choice(BUILDER_DTYPES) if src.boolean(0.5) or not inputs else inputs[0][0]
        here = shape if src.boolean(0.8) else tuple(src.integer(1, 3) for _ in range(src.integer(0, 3)))
        inputs.append((dtype, here))
    return "op", op_type, tuple(inputs)


def _onnx_model(op_type: str, inputs: tuple) -> Any:
    """The one-node model, written with onnx.helper (not amanda)."""
    import onnx
    from onnx import helper

    names = [f"x{i}" for i in range(len(inputs))]
    values = [helper.make_tensor_value_info(n, _ONNX_TYPES[d], list(s)) for n, (d, s) in zip(names, inputs)]
    graph = helper.make_graph([helper.make_node(op_type, names, ["y"])], "g", values, [onnx.ValueInfoProto(name="y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _onnx_accepts(op_type: str, inputs: tuple) -> bool:
    """Whether onnx's strict type and shape inference accepts the one-node model."""
    import onnx

    try:
        onnx.shape_inference.infer_shapes(_onnx_model(op_type, inputs), check_type=True, strict_mode=True)
    except onnx.shape_inference.InferenceError:
        return False
    return True


def _onnxruntime_runs(op_type: str, inputs: tuple) -> bool:
    """Whether onnxruntime loads and runs the one-node model on arrays of ones (onnx's shape
    inference does not check every constraint, PRelu's broadcast for one)."""
    import onnxruntime as ort

    feeds = {}
    for i, (dtype, shape) in enumerate(inputs):
        if dtype == "bfloat16":
            return False  # numpy has no bfloat16 to feed
        feeds[f"x{i}"] = np.full(shape, "a", object) if dtype == "string" else np.ones(shape, np.dtype(dtype))
    try:
        session = ort.InferenceSession(_onnx_model(op_type, inputs).SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        session.run(None, feeds)
    except Exception:  # noqa: BLE001 - any refusal of onnxruntime's
        return False
    return True


def run_builder(case: tuple[str, Any, tuple]) -> None:
    """An op the builder accepts is one onnx accepts, and one it refuses onnx refuses; ``Input``
    takes exactly the ONNX dtype names (and numpy dtypes), never guessing ``'float'``'s width."""
    kind, what, detail = case
    if kind == "input":
        value = amanda.Input("x", what, detail)  # refusing raises an AmandaError: fine
        expected = np.dtype(what).name if not isinstance(what, str) else what
        if value.type.dtype != expected or (isinstance(what, str) and what not in GOOD_DTYPES):
            raise InvalidResult(f"Input({what!r}) became {value.type.dtype}")
        return
    values = [amanda.Input(f"x{i}", d, s) for i, (d, s) in enumerate(detail)]
    try:
        getattr(amanda.ops, what)(*values)
        accepted = True
    except AmandaError:
        accepted = False
    agrees = accepted == _onnx_accepts(what, detail) or (not accepted and not _onnxruntime_runs(what, detail))
    if not agrees:
        raise InvalidResult(f"the builder {'accepts' if accepted else 'refuses'} {what}{detail}, onnx does not")
    if not accepted:
        getattr(amanda.ops, what)(*values)  # the refusal itself is the case's AmandaError


# -- layer_chain ----------------------------------------------------------------------------

_WIDTHS = [0, 2, 3, 4]


def generate_chain(src: Source) -> list[tuple]:
    """Two to four layer specs: Dense, LayerNorm, an activation or Dropout, with random widths."""
    specs: list[tuple] = []
    for _ in range(src.integer(2, 4)):
        kind = src.choice(["dense", "dense", "norm", "relu", "dropout"])
        if kind == "dense":
            specs.append(("dense", src.choice(_WIDTHS), src.choice(_WIDTHS[1:])))
        elif kind == "norm":
            specs.append(("norm", src.choice(_WIDTHS[1:])))
        else:
            specs.append((kind,))
    return specs


def _layer(spec: tuple, k: int) -> Container:
    from amanda import layers

    name = f"l{k}"
    if spec[0] == "dense":
        return layers.Dense(spec[1], spec[2], name=name)
    if spec[0] == "norm":
        return layers.LayerNorm(spec[1], name=name)
    return layers.relu(name=name) if spec[0] == "relu" else layers.Dropout(0.5, name=name)


def _first_mismatch(specs: list[tuple]) -> tuple[int, int] | None:
    """The layers (previous width-giver, taker) whose widths differ, by the numbers."""
    width, giver = None, None
    for k, spec in enumerate(specs):
        needs = spec[1] if spec[0] in ("dense", "norm") else None
        if needs is not None and width is not None and needs != width:
            return giver, k  # type: ignore[return-value]
        if spec[0] == "dense":
            width, giver = spec[2], k
        elif spec[0] == "norm" and width is None:
            width, giver = spec[1], k
    return None


def run_chain(specs: list[tuple]) -> None:
    """A chain is refused exactly when two widths differ, naming the user's layers (never an
    internal fused op); an accepted chain runs to the width of its last layer."""
    stack = [_layer(spec, k) for k, spec in enumerate(specs)]  # a width of 0 is an ArgumentError
    mismatch = _first_mismatch(specs)
    try:
        net = amanda.chain(*stack, name="net")
    except AmandaError as error:
        if mismatch is None:
            raise InvalidResult(f"a chain whose widths fit was refused: {error}") from None
        if f"'l{mismatch[1]}'" not in str(error) or "fused" in str(error):
            raise InvalidResult(f"the refusal does not name layer l{mismatch[1]}: {error}") from None
        raise
    if mismatch is not None:
        raise InvalidResult(f"layers l{mismatch[0]} and l{mismatch[1]} of different widths were chained")
    first = next((s for s in specs if s[0] in ("dense", "norm")), None)
    width_in = first[1] if first else 3
    with amanda.Session(net, threads=1) as session:
        out = session.run(["y"], {"x": np.ones((2, width_in), np.float32)}, phase="inference")[0]
    widths = [s[2] if s[0] == "dense" else s[1] for s in specs if s[0] in ("dense", "norm")]
    if out.shape != (2, widths[-1] if widths else width_in):
        raise InvalidResult(f"the chain gave {out.shape}")


TARGETS = (
    Target("graph_check", generate_graph, run_graph),
    Target("builder", generate_builder, run_builder),
    Target("layer_chain", generate_chain, run_chain),
)
