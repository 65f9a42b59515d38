"""TensorFlow -> ONNX opset 17: TensorFlow 2's functional control flow and tensor lists.

- ``While``/``StatelessWhile`` -> ``Loop``. TensorFlow tests ``cond`` before every run of
  ``body``; ONNX's Loop reads its ``cond`` input before the first iteration and the body's
  condition output before each later one. So the Loop's body is the converted ``body``
  followed by the converted ``cond`` of its results, and the first condition is the converted
  ``cond`` of the initial values, computed by an ``If`` whose condition is the constant true
  (both branches that graph): an op holding a graph, as the Loop does. Every loop variable is
  loop-carried (no trip count, no scan outputs).
- ``If``/``StatelessIf`` -> ``If`` whose branches are the converted functions, reading the
  op's inputs as captured values. A condition that is not boolean is cast to bool (a
  scalar's truth, as TensorFlow's).
- Tensor lists are ONNX sequences: ``TensorListReserve`` -> ``SequenceEmpty`` (the list holds
  the elements set so far), ``TensorListFromTensor`` -> ``SplitToSequence`` along axis 0,
  ``TensorListGetItem`` -> ``SequenceAt``, ``TensorListStack`` -> ``ConcatFromSequence`` on a
  new axis 0, ``TensorListSetItem(i)`` -> the element at ``i`` replaced, or appended where
  ``i`` is the list's length (an ``If`` erases position ``i`` when it exists, then
  ``SequenceInsert`` puts the item there). A list must be written in index order from 0, as
  TensorArrays in loops are (Keras's RNN layers, ``tf.while_loop``); a gap fails at run time.
- Reductions whose axes are computed from constants (Keras's ``Range(0, rank, 1)``) are folded
  to the ``axes`` attribute.

Bodies are converted with the shipped table (scopes kept, as for the graph), so an op no
rule maps inside a body is reported by path as for the graph's own ops.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from amanda.containers.container import Container, op
from amanda.containers.edge import SELF, Edge, Endpoint, Port
from amanda.containers.flatten import flatten
from amanda.errors import MappingError
from amanda.rewrite.mapping.functions import onnx_dtype
from amanda.rewrite.mapping.pattern import Pattern
from amanda.rewrite.mapping.rule import Match, NewOp, Replacement, Rule, Skip
from amanda.rewrite.mapping.tables.tensorflow_onnx import _REDUCE, SOURCE, TARGET

__all__ = ["control_rules", "function_body", "if_branch", "reduce_folded", "reserve", "set_item", "split", "while_loop"]

_BOOL = 9  # ONNX's TensorProto.BOOL
_INT64 = 7


def _shipped_table() -> Any:
    from amanda.rewrite.mapping.convert import registered_tables

    for entry in registered_tables():
        if entry.name == "tensorflow_to_onnx":
            return entry.table()
    from amanda.rewrite.mapping.tables.tensorflow_onnx_scopes import shipped_table

    return shipped_table()  # pragma: no cover - the registry always holds it


def _element_dtype(m: Match, var: str, port: str, function: Container | None, arg: int) -> str | None:
    """The element dtype of a tensor list fed to ``var.port``: the producer's ``element_dtype``,
    else that of an op in ``function`` reading its argument ``arg``."""
    fed = m.producer(var, port)
    if fed is not None and fed[0] is not None and "element_dtype" in fed[0].attrs:
        return str(fed[0].attrs["element_dtype"])
    if function is None or arg >= len(function.inputs):
        return None
    view = flatten(function)
    for point in view.inputs.get(function.inputs[arg].name, ()):
        reader = view.ops.get(point[0]) if point[0] is not SELF else None
        if reader is not None and "element_dtype" in reader.attrs:
            return str(reader.attrs["element_dtype"])
    return None


def _value_type(m: Match, var: str, port: str, dtype: Any, function: Container | None,
                arg: int) -> dict[str, Any] | Skip:
    """Port attributes giving the ONNX type of a TensorFlow value (a variant is a tensor list,
    an ONNX sequence of its elements)."""
    name = str(dtype)
    if name == "variant":
        element = _element_dtype(m, var, port, function, arg)
        if element is None:
            return Skip(f"the element type of the tensor list at {port} is not known")
        return {"type": {"sequence": {"tensor": {"dtype": element}}}}
    if name == "resource" or name.endswith("_ref"):
        return Skip(f"a {name} value at {port} (freeze the graph: ONNX has no variables)")
    return {"dtype": name}


def _edge(src: tuple[Any, str], dst: tuple[Any, str]) -> Edge:
    return Edge(Endpoint(src[0] if src[0] is SELF else (src[0],), src[1]),
                Endpoint(dst[0] if dst[0] is SELF else (dst[0],), dst[1]))


def function_body(name: str, functions: list[tuple[Container, list[tuple[Any, Any]]]],
                  inputs: list[Port], outputs: list[tuple[Port, tuple[Any, Any]]]) -> Container:
    """A TensorFlow container holding ``functions`` (each with the source of every argument:
    ``(SELF, port)`` or ``(function name, result index)``), converted to ONNX; ``outputs``
    are ``(port, source)`` pairs in the same form."""
    by_name = {str(f.name): f for f, _ in functions}
    taken = {p.name for p in inputs}

    def source(where: tuple[Any, Any]) -> tuple[Any, str]:
        if where[0] is SELF and where[1] in taken:
            return where
        fn = by_name.get(where[0])
        if fn is None or not 0 <= int(where[1]) < len(fn.outputs):
            raise MappingError.at((name, str(where[0])), "(SELF, an input port) or (a function's name, one of "
                                  "its result indices)", repr(where),
                                  f"functions: {', '.join(sorted(by_name))}; inputs: {', '.join(sorted(taken))}")
        return where[0], fn.outputs[int(where[1])].name

    edges = [_edge(source(src), (f.name, port.name))
             for f, sources in functions for port, src in zip(f.inputs, sources)]
    edges += [_edge(source(src), (SELF, port.name)) for port, src in outputs]
    wrapper = Container(None, name, inputs=inputs, outputs=[p for p, _ in outputs],
                        children=[f for f, _ in functions], edges=edges, attrs={"namespace": SOURCE})
    converted = _shipped_table().apply(wrapper, on_unmatched="error")
    return converted  # type: ignore[no-any-return]


def _functions(op_: Container, *keys: str) -> list[Container] | Skip:
    found = [op_.attrs.get(key) for key in keys]
    if not all(isinstance(f, Container) for f in found):
        return Skip(f"{' or '.join(keys)} is not a function container")
    if len({f.name for f in found}) != len(found):  # type: ignore[union-attr]
        return Skip(f"{' and '.join(keys)} are one function")
    return found  # type: ignore[return-value]


def _with_shape(attrs: dict[str, Any], shape: Any) -> dict[str, Any]:
    """Tensor port attributes with a TensorFlow shape (None dims stay unknown) added."""
    if "dtype" not in attrs or shape is None:
        return attrs
    return {**attrs, "shape": tuple(None if d is None or int(d) < 0 else int(d) for d in shape)}


def _types(m: Match, var: str, ports: list[str], dtypes: Any, function: Container | None,
           shapes: Any = None) -> list[dict] | Skip:
    """The ONNX port attributes of each TensorFlow value read at ``ports`` (with ``shapes``,
    TensorFlow's ``output_shapes``, where given)."""
    types: list[dict] = []
    shapes = tuple(shapes or ())
    for i, (port, dtype) in enumerate(zip(ports, dtypes)):
        found = _value_type(m, var, port, dtype, function, i)
        if isinstance(found, Skip):
            return found
        types.append(_with_shape(found, shapes[i] if i < len(shapes) else None))
    return types


def while_loop(m: Match) -> Replacement | Skip:
    """While / StatelessWhile -> Loop (body: TensorFlow's body then its cond), its first
    condition from an If(true) holding the converted cond."""
    old = m["w"]
    found = _functions(old, "body", "cond")
    if isinstance(found, Skip):
        return found
    body, cond = found
    dtypes = tuple(old.attrs.get("T", ()))
    count = len(dtypes)
    if not (len(body.inputs) == len(body.outputs) == len(cond.inputs) == count and len(cond.outputs) == 1):
        return Skip(f"body and cond do not take and give its {count} loop variables")
    types = _types(m, "w", [f"input_{i}" for i in range(count)], dtypes, body, old.attrs.get("output_shapes"))
    if isinstance(types, Skip):
        return types
    values = [Port(f"v_{i}", attrs=t) for i, t in enumerate(types)]
    flag = {"dtype": "bool", "shape": ()}
    loop_body = function_body(
        "loop_body", [(body, [(SELF, f"v_{i}") for i in range(count)]),
                      (cond, [(body.name, i) for i in range(count)])],
        [Port("iteration", attrs={"dtype": "int64", "shape": ()}), Port("condition", attrs=flag), *values],
        [(Port("condition_out", attrs=flag), (cond.name, 0)),
         *((Port(f"v_out_{i}", attrs=t), (body.name, i)) for i, t in enumerate(types))])
    captured = [Port(p.name, attrs={**p.attrs, "captured": True}) for p in values]
    first = function_body("first_condition", [(cond, [(SELF, p.name) for p in captured])], captured,
                          [(Port("condition", attrs=flag), (cond.name, 0))])
    ops = {"yes": NewOp("Constant", attrs={"value": np.array(True)}),
           "first": NewOp("If", inputs=["cond", *(Port(p.name, attrs={"captured": True}) for p in values)],
                          outputs=["outputs_0"], attrs={"then_branch": first, "else_branch": first}),
           "w": NewOp("Loop", inputs=["M", "cond", *(f"v_initial_{i}" for i in range(count))],
                      outputs=[f"v_final_and_scan_outputs_{i}" for i in range(count)], attrs={"body": loop_body})}
    ports: dict[str, Any] = {f"w.input_{i}": [f"first.v_{i}", f"w.v_initial_{i}"] for i in range(count)}
    ports.update({f"w.{p}": f"w.v_final_and_scan_outputs_{p.rsplit('_', 1)[1]}" for p in old.output_names})
    return Replacement(ops, ["yes.output -> first.cond", "first.outputs_0 -> w.cond"], ports)


def if_branch(m: Match) -> Replacement | Skip:
    """If / StatelessIf -> If with the converted then/else functions, reading the op's inputs
    as captured values."""
    old = m["i"]
    found = _functions(old, "then_branch", "else_branch")
    if isinstance(found, Skip):
        return found
    values = sorted((p for p in old.input_names if p.startswith("input_")), key=lambda p: int(p.rsplit("_", 1)[1]))
    results = tuple(old.attrs.get("Tout", ()))
    types = _types(m, "i", values, old.attrs.get("Tin", ()), found[0])
    if isinstance(types, Skip):
        return types
    if any(len(f.inputs) != len(values) or len(f.outputs) != len(results) for f in found):
        return Skip(f"a branch does not take its {len(values)} inputs and give its {len(results)} results")
    captured = [Port(f"v_{i}", attrs={**t, "captured": True}) for i, t in enumerate(types)]
    shapes = tuple(old.attrs.get("output_shapes") or ())
    outs = [Port(f"out_{k}", attrs=_with_shape({"dtype": str(t)}, shapes[k] if k < len(shapes) else None))
            for k, t in enumerate(results)]
    branches = [function_body(f"{key}_branch", [(f, [(SELF, p.name) for p in captured])], captured,
                              [(port, (f.name, k)) for k, port in enumerate(outs)])
                for key, f in zip(("then", "else"), found)]
    ops = {"i": NewOp("If", inputs=["cond", *(Port(p.name, attrs={"captured": True}) for p in captured)],
                      outputs=[f"outputs_{k}" for k in range(len(results))],
                      attrs={"then_branch": branches[0], "else_branch": branches[1]})}
    ports: dict[str, Any] = {f"i.{v}": f"i.v_{k}" for k, v in enumerate(values)}
    ports.update({f"i.{p}": f"i.outputs_{p.rsplit('_', 1)[1]}" for p in old.output_names})
    edges: list[str] = []
    if str(old.attrs.get("Tcond", "bool")) != "bool":
        ops["truth"] = NewOp("Cast", attrs={"to": _BOOL})
        edges.append("truth.output -> i.cond")
        ports["i.cond"] = "truth.input"
    return Replacement(ops, edges, ports)


def _sequence_op(onnx_type: str, inputs: list[str], output: str, ports: dict[str, Any],
                 attrs: dict[str, Any] | None = None) -> Any:
    """A rule replacing one tensor-list op by one sequence op of ``inputs`` and ``output``;
    ``ports`` maps the old op's ports to the new one's (None: dropped)."""
    def rule(m: Match) -> Replacement:
        return Replacement({"t": NewOp(onnx_type, inputs=inputs, outputs=[output], attrs=attrs or {})}, (), ports)
    return rule


def reserve(m: Match) -> Replacement:
    """TensorListReserve -> SequenceEmpty of its element type (the elements set so far)."""
    dtype = onnx_dtype(m["t"].attrs.get("element_dtype", "float32"))
    return Replacement({"t": NewOp("SequenceEmpty", inputs=[], outputs=["output"], attrs={"dtype": dtype})}, (),
                       {"t.element_shape": None, "t.num_elements": None, "t.handle": "t.output"})


def _branch(name: str, op_type: str, inputs: list[str], output: str) -> Container:
    """An ONNX If branch of one op reading the captured ``sequence`` (and ``position``)."""
    ports = [Port("sequence", attrs={"captured": True}), Port("position", attrs={"captured": True})]
    node = op(op_type, name, inputs, [output])
    edges = [_edge((SELF, outer), (name, inner)) for outer, inner in zip(("sequence", "position"), inputs)]
    return Container(None, f"{name}_branch", inputs=ports, outputs=["output"], children=[node],
                     edges=[*edges, _edge((name, output), (SELF, "output"))], attrs={"namespace": TARGET})


def set_item(m: Match) -> Replacement:
    """TensorListSetItem(list, i, item) -> SequenceInsert at i of the list less its element i
    (erased by an If when i < length; appended when i is the length)."""
    erase = _branch("erase", "SequenceErase", ["input_sequence", "position"], "output_sequence")
    keep = _branch("keep", "Identity", ["input"], "output")
    ops = {"index": NewOp("Cast", attrs={"to": _INT64}), "length": NewOp("SequenceLength"),
           "inside": NewOp("Less"),
           "drop": NewOp("If", inputs=["cond", Port("sequence", attrs={"captured": True}),
                                       Port("position", attrs={"captured": True})],
                         outputs=["outputs_0"], attrs={"then_branch": erase, "else_branch": keep}),
           "t": NewOp("SequenceInsert", inputs=["input_sequence", "tensor", "position"], outputs=["output_sequence"])}
    edges = ["index.output -> inside.A", "length.length -> inside.B", "inside.C -> drop.cond",
             "index.output -> drop.position", "drop.outputs_0 -> t.input_sequence", "index.output -> t.position"]
    ports = {"t.input_handle": ["length.input_sequence", "drop.sequence"], "t.index": "index.input",
             "t.item": "t.tensor", "t.output_handle": "t.output_sequence"}
    return Replacement(ops, edges, ports)


def _fold_range(op_: Any, arrays: dict[str, Any]) -> Any:
    return np.arange(np.asarray(arrays["start"]).item(), np.asarray(arrays["limit"]).item(),
                     np.asarray(arrays["delta"]).item())


def reduce_folded(m: Match) -> Replacement | Skip:
    """Mean / Max / Min / Prod whose axes are computed from constants (a Range of Consts) ->
    Reduce* with them as the attribute; no axes reduce nothing (an Identity)."""
    axes = m.constant_input("r", "reduction_indices", fold={"Range": _fold_range})
    if axes is None:
        return Skip("reduction_indices is not computed from constants (ONNX 17 wants it as an attribute)")
    listed = np.asarray(axes).reshape(-1).astype(int).tolist()
    if not listed:
        return Replacement({"r": NewOp("Identity", inputs=["input"], outputs=["output"])}, (),
                           {"r.input": "r.input", "r.reduction_indices": None, "r.output": "r.output"})
    keep = int(bool(m["r"].attrs.get("keep_dims", False)))
    reduced = NewOp(_REDUCE[str(m["r"].type)], inputs=["data"], outputs=["reduced"],
                    attrs={"axes": listed, "keepdims": keep})
    return Replacement({"r": reduced}, (), {"r.input": "r.data", "r.reduction_indices": None, "r.output": "r.reduced"})


def split(m: Match) -> Replacement | Skip:
    """Split into ``num_split`` equal parts along a constant ``split_dim`` -> Split with every
    part an output (ONNX 17 divides equally among its outputs)."""
    axis = m.constant_input("s", "split_dim")
    if axis is None:
        return Skip("split_dim is not a constant (ONNX's axis is an attribute)")
    parts = int(m["s"].attrs.get("num_split", len(m["s"].output_names)))
    ops = {"s": NewOp("Split", inputs=["input"], outputs=[f"outputs_{k}" for k in range(parts)],
                      attrs={"axis": int(np.asarray(axis).reshape(-1)[0])})}
    ports: dict[str, Any] = {"s.value": "s.input", "s.split_dim": None}
    ports.update({f"s.{p}": f"s.outputs_{p.rsplit('_', 1)[1]}" for p in m["s"].output_names})
    return Replacement(ops, (), ports)


def _logical(onnx_type: str, arity: int) -> Any:
    """LogicalAnd / LogicalOr (x, y -> z) and LogicalNot (x -> y) -> And / Or / Not."""
    def rule(m: Match) -> Replacement:
        ins = ["A", "B"][:arity] if arity == 2 else ["X"]
        outs = ["C"] if arity == 2 else ["Y"]
        ports = dict(zip((f"o.{p}" for p in ("x", "y")[:arity]), (f"o.{p}" for p in ins)))
        ports[f"o.{m['o'].output_names[0]}"] = f"o.{outs[0]}"
        return Replacement({"o": NewOp(onnx_type, inputs=ins, outputs=outs)}, (), ports)
    return rule


def control_rules() -> list[Rule]:
    """The rules of this module, in the order the table tries them."""
    while_types = ("While", "StatelessWhile")
    if_types = ("If", "StatelessIf")
    return [
        Rule("while_loop", Pattern({"w": while_types}), while_loop),
        Rule("if_branch", Pattern({"i": if_types}), if_branch),
        Rule("tensor_list_reserve", Pattern({"t": "TensorListReserve"}), reserve),
        Rule("tensor_list_from_tensor", Pattern({"t": "TensorListFromTensor"}), _sequence_op(
            "SplitToSequence", ["input"], "output_sequence",
            {"t.tensor": "t.input", "t.element_shape": None, "t.output_handle": "t.output_sequence"},
            {"axis": 0, "keepdims": 0})),
        Rule("tensor_list_get_item", Pattern({"t": "TensorListGetItem"}), _sequence_op(
            "SequenceAt", ["input_sequence", "position"], "tensor",
            {"t.input_handle": "t.input_sequence", "t.index": "t.position", "t.element_shape": None,
             "t.item": "t.tensor"})),
        Rule("tensor_list_set_item", Pattern({"t": "TensorListSetItem"}), set_item),
        Rule("tensor_list_stack", Pattern({"t": "TensorListStack"}), _sequence_op(
            "ConcatFromSequence", ["input_sequence"], "concat_result",
            {"t.input_handle": "t.input_sequence", "t.element_shape": None, "t.tensor": "t.concat_result"},
            {"axis": 0, "new_axis": 1})),
        Rule("reduce_folded", Pattern({"r": tuple(_REDUCE)}), reduce_folded),
        Rule("split", Pattern({"s": "Split"}), split),
        Rule("logical_and", Pattern({"o": "LogicalAnd"}), _logical("And", 2)),
        Rule("logical_or", Pattern({"o": "LogicalOr"}), _logical("Or", 2)),
        Rule("logical_not", Pattern({"o": "LogicalNot"}), _logical("Not", 1)),
    ]
