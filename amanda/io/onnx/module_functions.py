"""Repeated modules written as ONNX model-local functions: ``dump(m, path, functions="modules")``.

The export of a module tree (``amanda.io.onnx.hierarchy_export``) marks every node with the
modules it sits in (``pkg.torch.onnx.name_scopes`` and ``class_hierarchy``). :func:`fold_modules`
reads those marks back from the exported ``ModelProto`` and groups the modules of one class whose
nodes are the same computation: the same ops, attributes and wiring, up to the names of their
values, nodes and weights. Each group of two or more modules of two or more nodes becomes one
``FunctionProto`` (domain ``amanda.modules``, named by the class's short name: ``GPT2Block``,
``GPT2Block_1`` for a second body of that class), and each instance one call node in its place,
its inputs the values and weights the module reads (weights stay initializers, passed as
inputs), its outputs the values read outside it. Where a folded module holds repeated modules, they are in its body: the
outermost repeated modules are folded.

A module is left inline where it is not one run of consecutive nodes, or where a node holds a
subgraph (If/Loop/Scan bodies may read outer values by name, which a function cannot). A model
without module containers has nothing to fold.

Each call keeps what is its own (node names, value names, metadata) in its metadata entry
``amanda.module_instance``, so :func:`inline_modules`, which ``amanda.load`` runs first, puts
every node back as the unfolded export wrote it, and the import rebuilds the same tree.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from amanda.io.onnx.hierarchy import CLASS_HIERARCHY, NAME_SCOPES
from amanda.io.scope_names import parse_scope_list, scope_list_text

__all__ = [
    "DOMAIN", "FUNCTION_MODES", "INSTANCE_KEY", "MODULE_KEY", "check_functions", "fold_modules", "inline_modules",
]

DOMAIN = "amanda.modules"
MODULE_KEY = "amanda.module"  # function metadata: the module's class path
INSTANCE_KEY = "amanda.module_instance"  # call metadata: the instance's own names, node by node
FUNCTION_MODES = (None, "modules")
_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")


def check_functions(functions: Any) -> Any:
    """``functions`` if it is one of :data:`FUNCTION_MODES`, else ArgumentError.

    >>> check_functions("modules")
    'modules'
    >>> check_functions("module")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    amanda.errors.ArgumentError: at functions: expected one of None, 'modules', found 'module' (did you mean 'modules'?)
    """
    if functions is None or (type(functions) is str and functions in FUNCTION_MODES):
        return functions
    from amanda.errors import ArgumentError
    from amanda.namespaces.schema import suggest

    hint = suggest(functions, ["modules"]) if isinstance(functions, str) else ""
    raise ArgumentError.at("functions", "one of " + ", ".join(map(repr, FUNCTION_MODES)), repr(functions), hint)


class _Module(NamedTuple):
    key: tuple[str, ...]  # the qualified names from the root down to the module
    cls: str
    first: int  # its nodes: graph.node[first:last + 1]
    last: int


def _scopes(node: Any) -> tuple[list[str], list[str]] | None:
    names = classes = None
    for entry in node.metadata_props:
        if entry.key == NAME_SCOPES:
            names = parse_scope_list(entry.value)
        elif entry.key == CLASS_HIERARCHY:
            classes = parse_scope_list(entry.value)
    if names is None or classes is None or len(names) != len(classes):
        return None
    return names, classes


def _modules(nodes: list[Any]) -> list[_Module]:
    """Every module whose nodes are one run of consecutive nodes, in preorder."""
    spans: dict[tuple[str, ...], list[Any]] = {}  # key -> [class, first, last, count]
    for index, node in enumerate(nodes):
        found = _scopes(node)
        if found is None:
            continue
        names, classes = found
        for depth in range(1, len(names) - 1):
            span = spans.get(tuple(names[: depth + 1]))
            if span is None:
                spans[tuple(names[: depth + 1])] = [classes[depth], index, index, 1]
            else:
                span[2], span[3] = index, span[3] + 1
    found_modules = [_Module(k, s[0], s[1], s[2]) for k, s in spans.items() if s[3] == s[2] - s[1] + 1]
    return sorted(found_modules, key=lambda m: (m.first, len(m.key)))


def _graph_names(graph: Any, into: set[str]) -> set[str]:
    """Every value name a subgraph's nodes read (outer values among them)."""
    for node in graph.node:
        into.update(node.input)
        for attr in node.attribute:
            for g in [attr.g] if attr.HasField("g") else attr.graphs:
                _graph_names(g, into)
    return into


def _has_subgraph(node: Any) -> bool:
    return any(attr.HasField("g") or len(attr.graphs) for attr in node.attribute)


def _readers(graph: Any) -> dict[str, list[int]]:
    """Value name -> indices of the nodes reading it (a subgraph's reads count as its node's);
    graph outputs are read by index -1."""
    readers: dict[str, list[int]] = {}
    for index, node in enumerate(graph.node):
        names = set(node.input)
        if _has_subgraph(node):
            for attr in node.attribute:
                for g in [attr.g] if attr.HasField("g") else attr.graphs:
                    _graph_names(g, names)
        for name in names:
            readers.setdefault(name, []).append(index)
    for output in graph.output:
        readers.setdefault(output.name, []).append(-1)
    return readers


class _Body(NamedTuple):
    signature: tuple
    inputs: list[str]  # the values it reads from outside, in order of first use
    outputs: list[str]  # the values read outside it, in order of production


def _body(nodes: list[Any], first: int, last: int, readers: dict[str, list[int]]) -> _Body | None:
    """What makes the nodes ``first..last`` one computation up to names, or None if they hold
    a subgraph."""
    made: dict[str, tuple[int, int]] = {}
    inputs: dict[str, int] = {}
    outputs: list[str] = []
    shape = []
    for j in range(first, last + 1):
        node = nodes[j]
        if _has_subgraph(node):
            return None
        wiring: list[Any] = []
        for name in node.input:
            if not name:
                wiring.append(None)
            elif name in made:
                wiring.append(made[name])
            else:
                wiring.append(("in", inputs.setdefault(name, len(inputs))))
        for k, name in enumerate(node.output):
            if name:
                made[name] = (j - first, k)
                if any(r < first or r > last for r in readers.get(name, ())):
                    outputs.append(name)
        attrs = tuple(a.SerializeToString(deterministic=True) for a in node.attribute)
        shape.append((node.domain, node.op_type, node.overload, attrs, tuple(wiring),
                       tuple(bool(o) for o in node.output)))
    signature = (tuple(shape), tuple(made[o] for o in outputs))
    return _Body(signature, list(inputs), outputs)


def _select(modules: list[_Module], groups: dict[tuple, list[int]], group_of: dict[int, tuple]) -> set[int]:
    """The modules to fold: the outermost members of groups with two or more of them."""
    candidates = {key for key, members in groups.items() if len(members) > 1 and len(key[1][0]) > 1}
    while True:
        folded: set[int] = set()
        end = -1
        for index, module in enumerate(modules):  # preorder: an enclosing module comes first
            if module.first <= end:
                continue
            if group_of.get(index) in candidates:
                folded.add(index)
                end = module.last
        lonely = {g for g in candidates if sum(1 for i in groups[g] if i in folded) < 2}
        if not lonely:
            return folded
        candidates -= lonely


def _instance(nodes: list[Any], body: list[Any]) -> str:
    """What the call keeps of one instance: each node's name, outputs, doc string and
    metadata, a metadata entry equal to the body node's written as its index there."""
    record = []
    for node, model in zip(nodes, body):
        shared = {(e.key, e.value): k for k, e in enumerate(model.metadata_props)}
        meta = [shared.get((e.key, e.value), [e.key, e.value]) for e in node.metadata_props]
        record.append([node.name, list(node.output), node.doc_string, meta])
    return json.dumps(record, separators=(",", ":"))


def _function_name(module: _Module, taken: set[str]) -> str:
    """The class's short name; for a module without a class, its name's last non-numeric part."""
    if module.cls:
        base = module.cls.rsplit(".", 1)[-1]
    else:
        atoms = [a for a in re.split(r"[./]", module.key[-1]) if a and not a.isdigit()]
        base = atoms[-1] if atoms else "Module"
    return _numbered(_NOT_IDENTIFIER.sub("_", base), taken)


def _call_name(module: _Module, node: Any, taken: set[str]) -> str:
    parts = node.name.split("/")
    depth = len(module.key) - 1
    name = "/".join(parts[: depth + 1]) if node.name.startswith("/") and len(parts) > depth + 1 else module.key[-1]
    return _numbered(name, taken)


def _numbered(base: str, taken: set[str]) -> str:
    """``base``, or ``base_1``, ``base_2`` … the first not in ``taken``; added to ``taken``."""
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def fold_modules(model: Any) -> int:
    """Write the repeated modules of the exported ``model`` (a ``ModelProto``, changed in place)
    as model-local functions, as the module docstring says; the number of calls made.

    >>> import amanda
    >>> from amanda.io.onnx.export import to_onnx
    >>> typed = {"dtype": "float32", "shape": (2,)}
    >>> g = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs=typed)], outputs=[amanda.Port("y", attrs=typed)],
    ...     children=[amanda.op("Relu", "relu", ["X"], ["Y"])], edges=[("g:x", "relu:X"), ("relu:Y", "g:y")],
    ...     attrs={"namespace": "amanda/onnx/17"})
    >>> fold_modules(to_onnx(g))  # no module containers: nothing to fold
    0
    """
    import onnx

    graph = model.graph
    nodes = list(graph.node)
    modules = _modules(nodes)
    if not modules:
        return 0
    readers = _readers(graph)
    bodies: dict[int, _Body] = {}
    groups: dict[tuple, list[int]] = {}
    group_of: dict[int, tuple] = {}
    for index, module in enumerate(modules):
        body = _body(nodes, module.first, module.last, readers)
        if body is None:
            continue
        bodies[index] = body
        group = (module.cls, body.signature)
        groups.setdefault(group, []).append(index)
        group_of[index] = group
    folded = _select(modules, groups, group_of)
    if not folded:
        return 0
    versions = {e.domain: e.version for e in model.opset_import}
    names: dict[tuple, str] = {}
    bodies_of: dict[tuple, list[Any]] = {}
    taken = {f.name for f in model.functions if f.domain == DOMAIN}
    node_names = {n.name for n in nodes}
    starts = {modules[i].first: i for i in folded}
    kept: list[Any] = []
    j = 0
    while j < len(nodes):
        if j not in starts:
            kept.append(nodes[j])
            j += 1
            continue
        module, body = modules[starts[j]], bodies[starts[j]]
        group = (module.cls, body.signature)
        own = nodes[module.first: module.last + 1]
        if group not in names:
            names[group] = _function_name(module, taken)
            _write_function(model.functions.add(), names[group], module, body, own, versions)
            bodies_of[group] = own
        call = onnx.NodeProto(op_type=names[group], domain=DOMAIN, name=_call_name(module, own[0], node_names),
                              input=body.inputs, output=body.outputs)
        scopes = _scopes(own[0])
        if scopes is not None:
            depth = len(module.key)
            call.metadata_props.add(key=NAME_SCOPES, value=scope_list_text(list(module.key)))
            call.metadata_props.add(key=CLASS_HIERARCHY, value=scope_list_text(scopes[1][:depth]))
        call.metadata_props.add(key=INSTANCE_KEY, value=_instance(own, bodies_of[group]))
        kept.append(call)
        j = module.last + 1
    del graph.node[:]
    graph.node.extend(kept)
    if DOMAIN not in versions:
        model.opset_import.add(domain=DOMAIN, version=1)
    return len(folded)


def _write_function(target: Any, name: str, module: _Module, body: _Body, own: list[Any],
                    versions: dict[str, int]) -> None:
    target.name, target.domain = name, DOMAIN
    target.input.extend(body.inputs)
    target.output.extend(body.outputs)
    target.node.extend(own)
    used = {n.domain for n in own}
    for domain in sorted(used):
        if domain in versions:
            target.opset_import.add(domain=domain, version=versions[domain])
    target.metadata_props.add(key=MODULE_KEY, value=module.cls)


def _module_functions(model: Any) -> dict[str, Any]:
    return {f.name: f for f in model.functions
            if f.domain == DOMAIN and any(e.key == MODULE_KEY for e in f.metadata_props)}


def _instance_of(call: Any, function: Any, prefix: str) -> list[Any]:
    """The record :func:`fold_modules` kept on ``call``, checked against ``function``'s body."""
    from amanda.errors import FormatError

    text = next((e.value for e in call.metadata_props if e.key == INSTANCE_KEY), None)
    try:
        record = json.loads(text) if text is not None else None
    except ValueError:
        record = None
    fits = (isinstance(record, list) and len(record) == len(function.node) and len(call.input) == len(function.input)
            and len(call.output) == len(function.output) and all(map(_entry_ok, record, function.node)))
    if not fits:
        raise FormatError(
            f"{prefix}call {call.name!r} of module function {DOMAIN}:{call.op_type} has no usable {INSTANCE_KEY} "
            "metadata (the names of its instance's nodes), so its module cannot be put back",
            path=call.name, expected=f"a JSON list of {len(function.node)} [name, outputs, doc, metadata] entries",
            found=(text or "none")[:80])
    return record  # type: ignore[return-value]


def _entry_ok(entry: Any, body: Any) -> bool:
    """Whether one node's record is ``[name, outputs, doc, metadata]`` as :func:`_instance` writes it."""
    if not (isinstance(entry, list) and len(entry) == 4 and type(entry[0]) is str and type(entry[2]) is str):
        return False
    outputs, metadata = entry[1], entry[3]
    if not (isinstance(outputs, list) and len(outputs) == len(body.output) and all(type(o) is str for o in outputs)):
        return False
    shared = len(body.metadata_props)
    return isinstance(metadata, list) and all(
        (type(m) is int and 0 <= m < shared) or (isinstance(m, list) and len(m) == 2 and all(type(t) is str for t in m))
        for m in metadata)


def _expand(call: Any, function: Any, record: list[Any], into: list[Any]) -> None:
    import onnx

    names = dict(zip(function.input, call.input))
    for body, (name, outputs, doc, metadata) in zip(function.node, record):
        shared = body.metadata_props
        node = onnx.NodeProto()
        node.CopyFrom(body)
        names.update(zip(body.output, outputs))
        node.ClearField("name")
        node.ClearField("doc_string")
        if name:  # proto2 fields: set only what the unfolded node had set
            node.name = name
        if doc:
            node.doc_string = doc
        del node.input[:], node.output[:], node.metadata_props[:]
        node.input.extend(names.get(v, v) if v else v for v in body.input)
        node.output.extend(outputs)
        for entry in metadata:
            if isinstance(entry, int):
                node.metadata_props.add().CopyFrom(shared[entry])
            else:
                node.metadata_props.add(key=entry[0], value=entry[1])
        into.append(node)


def inline_modules(model: Any, prefix: str = "") -> Any:
    """``model`` itself if :func:`fold_modules` folded nothing in it, else a copy with every
    call of a module function replaced by the nodes the unfolded export wrote, and those
    functions (and their domain's import) gone. FormatError if a call's record does not fit.

    >>> import onnx
    >>> m = onnx.ModelProto()
    >>> inline_modules(m) is m
    True
    """
    functions = _module_functions(model)
    if not functions:
        return model
    import onnx

    inlined = onnx.ModelProto()
    inlined.CopyFrom(model)
    nodes: list[Any] = []
    for node in inlined.graph.node:
        function = functions.get(node.op_type) if node.domain == DOMAIN else None
        if function is None:
            nodes.append(node)
        else:
            _expand(node, function, _instance_of(node, function, prefix), nodes)
    del inlined.graph.node[:]
    inlined.graph.node.extend(nodes)
    others = [f for f in inlined.functions if f.name not in functions or f.domain != DOMAIN]
    del inlined.functions[:]
    inlined.functions.extend(others)
    if not any(f.domain == DOMAIN for f in others):
        imports = [e for e in inlined.opset_import if e.domain != DOMAIN]
        del inlined.opset_import[:]
        inlined.opset_import.extend(imports)
    return inlined
