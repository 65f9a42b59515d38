"""Rules for the ONNX ops whose signature changed between opsets 1 and 6 (see ``onnx_legacy_late``
for 7 to 11); ``LEGACY[v]`` has the shape of ``onnx_changes.CHANGES[v]``.

- 2: GlobalLpPool/LpPool ``p`` float -> int; Pad ``paddings`` -> ``pads``; Split's ``split``
  input goes (a Constant becomes the attribute), outputs ``outputs...`` -> ``outputs``.
- 3: GRU's default ``direction`` was spelled ``foward``.
- 4: Concat's ``axis`` (default 1) became required.
- 5: Reshape's ``shape`` attribute became an input.
- 6: ``consumed_inputs`` dropped (``DROPPED``); Cast ``to`` a type name -> a type code; Tile
  ``(input, tiles, axis)`` -> ``(input, repeats)``; BatchNormalization-1 needs consumed_inputs.

>>> from amanda.rewrite.mapping.tables.onnx_opsets import adapter
>>> adapter(4, 5).rule_names, adapter(6, 5).rule_names[:3]
(['reshape_shape_to_input', 'compatible'], ['cast_to_name', 'tile_repeats_to_tiles', 'tile_repeats_to_tiles_capturing_none'])
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from amanda.namespaces.attr_types import ONNX_DTYPES
from amanda.namespaces.name import NamespaceName
from amanda.ops.registry import ONNX as ONNX_FAMILY
from amanda.ops.registry import entry
from amanda.rewrite.mapping.pattern import Pattern
from amanda.rewrite.mapping.rule import RELABEL, Match, NewOp, Replacement, Skip
from amanda.rewrite.mapping.tables.onnx_changes import Rule, _named, _one

__all__ = ["DROPPED", "LEGACY", "Move", "attrs_to_inputs", "constant", "dtype_of", "inputs_to_attrs", "shape_of",
           "with_constants"]

LEGACY_ATTR = "consumed_inputs"  # an in-place hint with no meaning for the result

#: opset v -> {attribute: op types (None: every op)} that going up to v drops whatever its value
DROPPED: dict[int, dict[str, frozenset[str] | None]] = {
    6: {LEGACY_ATTR: None},
}

#: ONNX TensorProto data types by name (Cast-1 names them; Cast-6 numbers them); Cast-1 knew the
#: first 15
TYPE_CODES = {name: code for code, name in ONNX_DTYPES.items()}
CAST_1_CODES = range(1, 16)


def _version(namespace: str) -> int:
    version = NamespaceName.parse(namespace).opset
    assert version is not None, f"a versioned ONNX namespace, not {namespace!r}"  # the tables name versions
    return version


def _same_dtype(op_type: str) -> bool:
    """Whether the op's first output has the dtype of its first input (its registry entry's
    ``dtype_rule``; not through TopK's Indices nor Dropout's mask)."""
    found = entry(ONNX_FAMILY, op_type)
    return found is not None and found.dtype_rule == "same"


def constant(value: Any, name: str, dtype: Any = None) -> NewOp:
    """A new Constant holding ``value``, written as an initializer: Constant nodes before opset 9
    hold floats only, and these hold int64 shapes and counts too."""
    return NewOp("Constant", attrs={"value": np.asarray(value, dtype=dtype), "initializer": True}, name=name)


def dtype_of(m: Match, var: str, port: str) -> str | None:
    """The dtype of the value feeding ``port`` of ``var``: from the port attributes of what
    produces it, a Constant's value, or upstream through ops that keep their input's dtype;
    None when unknown."""
    name, port_name = m.names[var], port
    for _ in range(1000):
        fed = m.feed(name, port_name)
        if fed is None:
            return None
        op, out, attrs = fed
        if attrs.get("dtype"):
            return str(attrs["dtype"])
        if op is None or not op.inputs and op.type not in ("Constant", "Const"):
            return None
        if op.type in ("Constant", "Const"):
            value = next((op.attrs[k] for k in ("value", "value_float", "value_floats") if k in op.attrs), None)
            return None if value is None else str(np.asarray(value).dtype)
        if not _same_dtype(str(op.type)) or out != op.output_names[0]:  # TopK's Indices are int64
            return None
        name, port_name = str(op.name), op.input_names[0]
    return None


def with_constants(types: Sequence[str], ports: Sequence[str], function: Callable[[Match], Any],
                   name: str) -> list[Rule]:
    """Rules running ``function`` on ops of ``types`` whose patterns also capture, as
    ``c_<port>``, each Constant that feeds one of ``ports`` and nothing else: a rule that drops
    those inputs then removes their Constants too (largest sets first; the last captures none
    and takes every op left)."""
    def sole(m: Match, port: str) -> bool:
        fed = m.feed(m.names["op"], port)
        return fed is not None and fed[0] is not None and fed[0].type == "Constant" \
            and m.consumers_of(str(fed[0].name), fed[1]) == 1

    rules: list[Rule] = []
    for size in range(len(ports), -1, -1):
        for subset in itertools.combinations(ports, size):
            def exactly(m: Match, subset: tuple[str, ...] = subset) -> bool:
                # one pattern per op: the one capturing exactly the Constants only it reads
                return all(sole(m, p) == (p in subset) for p in ports)

            # the last catches what an earlier rule's edit left (a shared Constant now read once)
            pattern = Pattern({"op": tuple(types), **{f"c_{p}": "Constant" for p in subset}},
                              [f"c_{p}.output -> op.{p}" for p in subset], exactly if subset else None)
            suffix = "" if size == len(ports) else "_capturing_" + ("_".join(subset) or "none")

            def variant(m: Match) -> Any:
                return function(m)

            rules.append((pattern, _named(variant, name + suffix)))
    return rules


def shape_of(m: Match, var: str, port: str) -> tuple[int, ...] | None:
    """The shape of the value feeding ``port`` of ``var`` when fully known (port attributes or a
    Constant's value), else None."""
    shape = m.input_attrs(var, port).get("shape")
    if shape is None and (value := m.constant(var, port)) is not None:
        shape = np.asarray(value).shape
    if shape is None or any(not isinstance(d, (int, np.integer)) for d in shape):
        return None
    return tuple(int(d) for d in shape)


# -- attributes become inputs, and back ----------------------------------------------------------

#: (attribute, input port, dtype (None: the dtype of the op's first input), value -> array)
Move = tuple[str, str, "str | None", Callable[[Any], Any]]


def attrs_to_inputs(types: Sequence[str], moves: Sequence[Move], order: Sequence[str], name: str,
                    drop: Sequence[str] = (LEGACY_ATTR,)) -> list[Rule]:
    """Up: each set attribute of ``moves`` becomes its input, fed by a new Constant; ``order``
    is the target schema's input order; an unset attribute leaves its input unfed."""

    def rule(m: Match) -> Any:
        op = m["op"]
        ops: dict[str, NewOp] = {}
        edges = []
        fed = list(op.input_names)
        for attr, port, dtype, convert in moves:
            value = op.attrs.get(attr)
            if value is None:
                continue
            kind = dtype or dtype_of(m, "op", op.input_names[0])
            if kind is None:
                return Skip(f"the dtype of its input {op.input_names[0]!r} is unknown, and the new "
                            f"{port!r} input must have it (annotate the ports' dtype, for example "
                            f"with onnx.shape_inference before importing)")
            ops[f"new_{port}"] = constant(convert(value), f"{op.name}/{port}", kind)
            edges.append(f"new_{port}.output -> op.{port}")
            fed.append(port)
        # an unfed input before a fed one stays as a port: inputs are positional in ONNX
        last = max((i for i, p in enumerate(order) if p in fed), default=-1)
        inputs = [*order[:last + 1], *(p for p in fed if p not in order)]
        ops["op"] = NewOp(inputs=inputs, drop_attrs=[*(a for a, *_ in moves), *drop])
        return Replacement(ops, edges)

    return _one(types, rule, name)


#: (input port, attribute, array -> attribute value (raise ValueError to refuse))
Back = tuple[str, str, Callable[[np.ndarray], Any]]


def inputs_to_attrs(types: Sequence[str], backs: Sequence[Back], name: str) -> list[Rule]:
    """Down: each input of ``backs`` fed by a Constant becomes its attribute; an unfed one stays
    unset; one computed at run time (or a value ``convert`` refuses) leaves the op unmatched."""

    def rule(m: Match) -> Any:
        op = m["op"]
        found: dict[str, Any] = {}
        for port, attr, convert in backs:
            if m.producer("op", port) is None:
                continue
            value = m.constant("op", port)
            if value is None:
                return Skip(f"its {port!r} input is computed at run time; opset "
                            f"{_version(m.target)} wants the attribute {attr!r}")
            try:
                converted = convert(np.asarray(value))
            except ValueError as exc:
                return Skip(f"its {port!r} input {np.asarray(value).tolist()} {exc}")
            if converted is not None:
                found[attr] = converted
        dropped = {p for p, _, _ in backs}
        inputs = [p for p in op.input_names if p not in dropped]
        return Replacement({"op": NewOp(inputs=inputs, attrs=found)},
                           ports={f"op.{p}": None for p in dropped if p in op.input_names})

    return with_constants(types, [p for p, _, _ in backs], rule, name)


def ints(value: np.ndarray) -> list[int]:
    """A constant as a list of ints."""
    return [int(v) for v in value.reshape(-1)]


def floats(value: np.ndarray) -> list[float]:
    """A constant as a list of floats."""
    return [float(v) for v in value.reshape(-1)]


def scalar(value: np.ndarray) -> float:
    """A one-element constant as a float."""
    if value.size != 1:
        raise ValueError("is not one number")
    return float(value.reshape(-1)[0])


def drop_rule(types: Sequence[str], attrs: Sequence[str], name: str,
              set_attrs: Callable[[Match], Mapping[str, Any]] | None = None) -> list[Rule]:
    """Remove ``attrs`` (and set ``set_attrs(m)``), keeping everything else."""

    def rule(m: Match) -> Any:
        present = [a for a in (*attrs, LEGACY_ATTR) if a in m["op"].attrs]
        extra = dict(set_attrs(m)) if set_attrs is not None else {}
        if not present and not extra:
            return RELABEL
        return Replacement({"op": NewOp(attrs=extra, drop_attrs=present)})

    return _one(types, rule, name)


def _relabel(m: Match) -> Any:
    return RELABEL


# -- 2 ------------------------------------------------------------------------------------------

def _p_int(m: Match) -> Any:
    p = m["op"].attrs.get("p")
    if p is None:
        return RELABEL
    if float(p) != int(p):
        return Skip(f"p={p} is not a whole number; from opset 2 p is an int")
    return Replacement({"op": NewOp(attrs={"p": int(p)})})


def _p_float(m: Match) -> Any:
    p = m["op"].attrs.get("p")
    return RELABEL if p is None else Replacement({"op": NewOp(attrs={"p": float(p)})})


def _rename_attr(old: str, new: str) -> Callable[[Match], Any]:
    def rule(m: Match) -> Any:
        value = m["op"].attrs.get(old)
        if value is None:
            return RELABEL
        return Replacement({"op": NewOp(attrs={new: value}, drop_attrs=[old])})

    return _named(rule, f"{old}_to_{new}")


def _split_up(m: Match) -> Any:
    """Split-1's optional ``split`` input becomes the attribute; outputs are renamed."""
    op = m["op"]
    attrs: dict[str, Any] = {}
    if m.producer("op", "split") is not None:
        value = m.constant("op", "split")
        if value is None:
            return Skip("its 'split' input is computed at run time; opset 2 wants the attribute")
        attrs["split"] = ints(np.asarray(value))
    outputs = [f"outputs_{i}" for i in range(len(op.outputs))]
    return Replacement({"op": NewOp(inputs=["input"], outputs=outputs, attrs=attrs)},
                       ports={"op.split": None})


def _split_down(m: Match) -> Any:
    outputs = [f"outputs..._{i}" for i in range(len(m["op"].outputs))]
    return Replacement({"op": NewOp(outputs=outputs)})


# -- 3, 4 -------------------------------------------------------------------------------------------

def _gru_direction(m: Match) -> Any:
    if m["op"].attrs.get("direction") == "foward":  # GRU-1's misspelled default
        return Replacement({"op": NewOp(attrs={"direction": "forward"})})
    return RELABEL


def _gru_down(m: Match) -> Any:
    if "Y_h" not in m["op"].output_names:
        return Skip("GRU before opset 3 must output Y_h")
    return RELABEL


def _concat_axis(m: Match) -> Any:
    return RELABEL if "axis" in m["op"].attrs else Replacement({"op": NewOp(attrs={"axis": 1})})


# -- 6 ----------------------------------------------------------------------------------------------

def _cast_up(m: Match) -> Any:
    to = m["op"].attrs.get("to")
    code = TYPE_CODES.get(str(to).upper())
    if code is None:
        return Skip(f"to={to!r} is not an ONNX data type name ({', '.join(list(TYPE_CODES)[:15])} …)")
    return Replacement({"op": NewOp(attrs={"to": code})})


def _cast_down(m: Match) -> Any:
    to = m["op"].attrs.get("to")
    if not isinstance(to, (int, np.integer)) or int(to) not in CAST_1_CODES:
        return Skip(f"to={to!r} is not a data type Cast-1 can name")
    return Replacement({"op": NewOp(attrs={"to": ONNX_DTYPES[int(to)]})})


def _tile_up(m: Match) -> Any:
    """Tile-1 repeats along one axis: ``repeats`` is 1 everywhere but ``tiles`` at ``axis``."""
    tiles, axis = m.constant("op", "tiles"), m.constant("op", "axis")
    rank = m.input_rank("op", "input")
    if tiles is None or axis is None or rank is None:
        return Skip("Tile-6 needs its repeats as a constant: tiles and axis must be Constants "
                    "and the input's rank known")
    where = int(np.asarray(axis).reshape(-1)[0])
    if not -rank <= where < rank:
        return Skip(f"axis {where} is outside the input's rank {rank}")
    repeats = np.ones(rank, dtype=np.int64)
    repeats[where] = int(np.asarray(tiles).reshape(-1)[0])
    ops = {"repeats": constant(repeats, f"{m['op'].name}/repeats"),
           "op": NewOp(inputs=["input", "repeats"], drop_attrs=[LEGACY_ATTR])}
    return Replacement(ops, ["repeats.output -> op.repeats"], {"op.tiles": None, "op.axis": None})


def _tile_down(m: Match) -> Any:
    repeats = m.constant("op", "repeats")
    if repeats is None:
        return Skip("its repeats are computed at run time; Tile-1 takes a constant count and axis")
    repeats = np.asarray(repeats).reshape(-1)
    axes = [i for i, r in enumerate(repeats) if r != 1] or [0]
    if len(axes) > 1:
        return Skip(f"repeats {repeats.tolist()} tile more than one axis; Tile-1 tiles one")
    op = m["op"]
    kind = dtype_of(m, "op", "input")  # Tile-1's counts have the input's (float) type
    if kind is None:
        return Skip("Tile-1's tiles and axis have the input's dtype, which is unknown")
    ops = {"tiles": constant(repeats[axes[0]], f"{op.name}/tiles", kind),
           "axis": constant(axes[0], f"{op.name}/axis", kind),
           "op": NewOp(inputs=["input", "tiles", "axis"])}
    return Replacement(ops, ["tiles.output -> op.tiles", "axis.output -> op.axis"], {"op.repeats": None})


def _batchnorm_consumed(m: Match) -> Mapping[str, Any]:
    return {LEGACY_ATTR: [0] * len(m["op"].inputs)}  # required before 6; zeros: nothing in place


#: opset v -> [(op types, up rules (v-1 -> v), down rules (v -> v-1))]
LEGACY: dict[int, list[tuple[tuple[str, ...], list[Rule], list[Rule]]]] = {
    2: [(("GlobalLpPool", "LpPool"), _one(("GlobalLpPool", "LpPool"), _p_int, "p_to_int"),
         _one(("GlobalLpPool", "LpPool"), _p_float, "p_to_float")),
        (("Pad",), _one(("Pad",), _rename_attr("paddings", "pads"), "paddings_to_pads"),
         _one(("Pad",), _rename_attr("pads", "paddings"), "pads_to_paddings")),
        (("Split",), with_constants(("Split",), ["split"], _split_up, "split_input_to_attr"),
         _one(("Split",), _split_down, "split_outputs"))],
    3: [(("GRU",), _one(("GRU",), _gru_direction, "direction_spelling"), _one(("GRU",), _gru_down, "y_h"))],
    4: [(("Concat",), _one(("Concat",), _concat_axis, "default_axis"), _one(("Concat",), _relabel, "axis"))],
    5: [(("Reshape",), attrs_to_inputs(("Reshape",), [("shape", "shape", "int64", list)], ("data", "shape"),
                                       "shape_to_input"),
         inputs_to_attrs(("Reshape",), [("shape", "shape", ints)], "shape_to_attr"))],
    6: [(("Cast",), _one(("Cast",), _cast_up, "to_code"), _one(("Cast",), _cast_down, "to_name")),
        (("Tile",), with_constants(("Tile",), ["tiles", "axis"], _tile_up, "tiles_to_repeats"),
         with_constants(("Tile",), ["repeats"], _tile_down, "repeats_to_tiles")),
        (("BatchNormalization",), drop_rule(("BatchNormalization",), (), "consumed_inputs"),
         drop_rule(("BatchNormalization",), (), "consumed_inputs", _batchnorm_consumed))],
}

