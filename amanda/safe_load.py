"""The one reader of YAML and JSON text: plain data, with bounded depth and size.

Containers, namespace schemas, mapping tables and ONNX metadata are all read here, so one
set of guards holds everywhere:

- **depth**: lists and mappings nest at most ``MAX_DEPTH`` levels (a value inside the innermost
  one counting as a level). YAML depth is counted by the composer itself, node by node, so no
  comment, quoted bracket or line layout can fool it; JSON depth by ``json.loads``'s own
  recursion guard when the interpreter's recursion limit is within ours, else (and to name
  the line) by a scan of the brackets outside strings, which JSON, having no comments,
  cannot fool.
- **size**: aliases may expand a document to at most its length plus ``ALIAS_ALLOWANCE``
  nodes, so a few hundred bytes cannot stand for 10^9 nodes; recursive aliases are refused.
- **tags**: only plain data (strings, integers, floats, booleans, null, lists, mappings); an
  unquoted date stays a string; Python, custom and merge (``<<``) tags are refused.
- **keys**: mapping keys are scalars and unique; integers fit Python's digit limit.

Every refusal is a ``FormatError`` with the line and column of the offending node.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from amanda.errors import FormatError
from amanda.parse_guards import MAX_DEPTH, check_json_depth, gc_paused

__all__ = ["ALIAS_ALLOWANCE", "MAX_DEPTH", "Lines", "compose_yaml", "gc_paused", "load_located",
           "load_text", "load_yaml_tree"]

ALIAS_ALLOWANCE = 10_000

Lines = dict[tuple[str, ...], int]  # field path (keys and list indexes as text) -> line

_CORE = "tag:yaml.org,2002:"
_SEQ, _MAP = _CORE + "seq", _CORE + "map"
_STR = _CORE + "str"
_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_RESOLVED_FIRST = frozenset(_BaseLoader.yaml_implicit_resolvers) | {""}


class _TooDeep(Exception):
    """Raised inside the composer; becomes a FormatError with the line."""


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """libyaml's safe loader whose composer counts its nesting depth.

    libyaml composes recursively in C and crashes the interpreter some 20,000 levels down; the
    composer calls ``descend_resolver``/``ascend_resolver`` around every node, so counting
    there stops it at ``MAX_DEPTH`` whatever the text looks like.
    """

    depth = 0

    def __init__(self, stream: str | bytes) -> None:
        super().__init__(stream)
        self.resolved: dict[str, str] = {}  # plain scalar -> its implicit tag

    def descend_resolver(self, parent: Any, index: Any) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _TooDeep

    def ascend_resolver(self) -> None:
        self.depth -= 1

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        # the composer asks this for every node; a plain scalar whose first character starts
        # no implicit type (most names) is a string without trying the resolver's regexes
        if kind is yaml.ScalarNode:
            if implicit[0] and value[:1] in _RESOLVED_FIRST:
                tag = self.resolved.get(value)
                if tag is None:
                    tag = self.resolved[value] = _BaseLoader.resolve(self, kind, value, implicit)
                return tag  # type: ignore[no-any-return]
            return _STR
        return _SEQ if kind is yaml.SequenceNode else _MAP


def _mark(node: yaml.Node) -> dict[str, int]:
    return {"line": node.start_mark.line + 1, "column": node.start_mark.column + 1}


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_CORE):] if tag.startswith(_CORE) else tag


def _at(path: tuple[str, ...] | None) -> str:
    return "" if path is None else f"at {'/'.join(path) or '<root>'}: "


def _refused(node: yaml.Node, path: tuple[str, ...] | None) -> FormatError:
    shown = _short_tag(node.tag)
    return FormatError(
        f"{_at(path)}expected plain YAML data (strings, numbers, booleans, null, lists, "
        f"mappings), found the refused tag {shown}", path=path,
        expected="plain YAML data", found=f"the refused tag {shown}", **_mark(node))


def _int(loader: Any, node: yaml.ScalarNode) -> int:
    try:
        return SafeConstructor.construct_yaml_int(loader, node)  # type: ignore[no-any-return]
    except ValueError:
        if len(node.value) <= 4000:
            raise  # not a digit-limit problem: the caller says the text is no integer
        limit = sys.get_int_max_str_digits()
        raise FormatError(f"expected an integer of at most {limit} digits, found "
                          f"{len(node.value)} characters", expected=f"at most {limit} digits",
                          found=node.value[:20] + "...", **_mark(node)) from None


_SCALAR_MAKER = SafeConstructor()  # its scalar methods read only the node
_SCALARS: dict[str, Any] = {
    _CORE + "str": lambda loader, node: node.value,
    _CORE + "timestamp": lambda loader, node: node.value,  # a date is text to us
    _CORE + "null": lambda loader, node: None,
    _CORE + "bool": SafeConstructor.construct_yaml_bool,
    _CORE + "int": _int,
    _CORE + "float": SafeConstructor.construct_yaml_float,
}


def compose_yaml(text: str | bytes) -> yaml.Node | None:
    """The node tree of one YAML document, composed under the depth and alias guards.

    >>> compose_yaml("a: [1, 2]").value[0][1].start_mark.column
    3
    """
    try:
        loader = _Loader(text)
    except (UnicodeEncodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"the document is not UTF-8 text: {exc.reason}") from None
    try:
        node = loader.get_single_node()
    except _TooDeep:
        raise _depth_error(text) from None
    except RecursionError:  # the pure-Python composer, when libyaml is missing
        raise _depth_error(text) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = f"invalid YAML: {exc.problem or exc.context}"
        where = {} if mark is None else {"line": mark.line + 1, "column": mark.column + 1}
        raise FormatError(message, found=str(exc.problem), **where) from None
    except yaml.YAMLError as exc:
        raise FormatError(f"invalid YAML: {exc}") from None
    except (UnicodeEncodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"the document is not UTF-8 text: {exc.reason}") from None
    finally:
        loader.dispose()
    if node is not None and _has_anchors(text):
        _check_aliases(node, len(text) + ALIAS_ALLOWANCE)
    return node


def _has_anchors(text: str | bytes) -> bool:
    """Whether the text may hold an anchor, so aliases may share nodes (no '&', no anchor)."""
    return "&" in text if isinstance(text, str) else b"&" in text


def _depth_error(text: str | bytes) -> FormatError:
    """The too-deep error, at the first node past the limit (found by an event scan)."""
    depth, where = 0, {}
    for event in yaml.parse(text, Loader=_BaseLoader):  # events: iterative, never recursive
        if isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)):
            if depth + 1 > MAX_DEPTH:
                where = {"line": event.start_mark.line + 1, "column": event.start_mark.column + 1}
                break
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return FormatError(f"the document nests deeper than the limit of {MAX_DEPTH} levels",
                       expected=f"at most {MAX_DEPTH} levels of lists and mappings",
                       found="deeper nesting", **where)


def _check_aliases(root: yaml.Node, budget: int) -> None:
    """Refuse recursive aliases, and aliases expanding the document past ``budget`` nodes."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()  # the nodes whose subtree is being counted: a path from the root
    todo: list[tuple[yaml.Node, bool]] = [(root, False)]
    while todo:
        node, done = todo.pop()
        key = id(node)
        if done:
            open_.discard(key)
            children = _children(node)
            size = 1 + sum(sizes[id(c)] for c in children)
            if size > budget:
                raise FormatError(
                    f"the document's aliases expand it to more than {budget:,} nodes "
                    f"(its length plus {ALIAS_ALLOWANCE:,})", expected=f"at most {budget} nodes",
                    found="an alias expansion beyond that", **_mark(node))
            sizes[key] = size
        elif key in open_:
            raise FormatError("expected a finite document, found a recursive alias",
                              expected="a finite document", found="a recursive alias",
                              **_mark(node))
        elif key not in sizes:
            if isinstance(node, yaml.ScalarNode):
                sizes[key] = 1
                continue
            open_.add(key)
            todo.append((node, True))
            todo.extend((c, False) for c in _children(node))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _build(root: yaml.Node, lines: Lines | None, shared: bool = True) -> Any:
    """Plain data from a composed tree, iteratively; records each field's line in ``lines``.

    Paths are tracked only with ``lines``, so errors name their path only then. With
    ``shared`` an aliased node becomes one shared object, never a copy.
    """
    located = lines is not None
    built: dict[int, Any] = {}
    out: list[Any] = [None]
    todo: list[tuple[yaml.Node, Any, Any, tuple[str, ...]]] = [(root, out, 0, ())]
    if lines is not None:
        lines[()] = root.start_mark.line + 1
    scalar, sequence, mapping = yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode
    while todo:
        node, parent, slot, path = todo.pop()
        if shared and id(node) in built:
            parent[slot] = built[id(node)]
            continue
        kind, tag = type(node), node.tag
        if kind is scalar:
            value = _scalar(node, path if located else None)
        elif kind is sequence and tag == _SEQ:
            value = _sequence(node, path, lines, todo)
        elif kind is mapping and tag == _MAP:
            value = _mapping(node, path, lines, todo)
        else:
            raise _refused(node, path if located else None)
        if shared:
            built[id(node)] = value
        parent[slot] = value
    return out[0]


def _sequence(node: yaml.Node, path: tuple[str, ...], lines: Lines | None, todo: list) -> list:
    """A list for a sequence node: plain strings filled in, other items queued on ``todo``."""
    located = lines is not None
    value: list[Any] = [None] * len(node.value)
    for i, item in enumerate(node.value):
        if type(item) is yaml.ScalarNode and item.tag == _STR and not located:
            value[i] = item.value  # the common case, without a trip through todo
            continue
        sub = path + (str(i),) if located else path
        if lines is not None:
            lines.setdefault(sub, item.start_mark.line + 1)
        todo.append((item, value, i, sub))
    return value


def _mapping(node: yaml.Node, path: tuple[str, ...], lines: Lines | None, todo: list) -> dict:
    """A dict for a mapping node (keys unique), values queued on ``todo`` as for sequences."""
    located = lines is not None
    value: dict[Any, Any] = {}
    for key_node, item in node.value:
        if type(key_node) is yaml.ScalarNode and key_node.tag == _STR:
            key = key_node.value
        else:
            key = _key(key_node, path if located else None)
        if key in value:
            raise _duplicate(key_node, key, path if located else None)
        if type(item) is yaml.ScalarNode and item.tag == _STR and not located:
            value[key] = item.value
            continue
        value[key] = None
        sub = path + (str(key),) if located else path
        if lines is not None:
            lines[sub] = key_node.start_mark.line + 1
        todo.append((item, value, key, sub))
    return value


def _scalar(node: yaml.Node, path: tuple[str, ...] | None) -> Any:
    make = _SCALARS.get(node.tag)
    if make is None:
        raise _refused(node, path)
    try:
        return make(_SCALAR_MAKER, node)
    except (ValueError, TypeError, AttributeError, OverflowError, IndexError):  # `!!float abc`: text its tag does not fit
        shown = _short_tag(node.tag)
        raise FormatError(f"{_at(path)}expected a value of type {shown}, found {node.value!r}", path=path,
                          expected=f"a value of type {shown}", found=repr(node.value), **_mark(node)) from None


def _key(node: yaml.Node, path: tuple[str, ...] | None) -> Any:
    if type(node) is not yaml.ScalarNode:
        raise FormatError(f"{_at(path)}expected scalar mapping keys, found a list or mapping",
                          path=path, expected="scalar mapping keys", found="a complex key",
                          **_mark(node))
    return _scalar(node, path)


def _duplicate(node: yaml.Node, key: Any, path: tuple[str, ...] | None) -> FormatError:
    where = None if path is None else path + (str(key),)
    return FormatError(f"{_at(where)}expected unique keys, found {key!r} twice", path=where,
                       expected="unique keys", found=f"{key!r} twice", **_mark(node))


def _json(text: str | bytes) -> Any:
    data = _json_bytes(text)
    if sys.getrecursionlimit() > MAX_DEPTH:
        check_json_depth(data)  # else the decoder's own recursion guard is tighter than ours
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise FormatError(f"invalid JSON: {exc.msg}", found=exc.msg, line=exc.lineno,
                          column=exc.colno) from None
    except RecursionError:
        check_json_depth(data)  # past our limit, or only past the decoder's (deep stack)
    except ValueError as exc:  # integers past Python's digit limit
        raise FormatError(f"invalid JSON: {exc}", found=str(exc)[:80]) from None
    node = compose_yaml(data)  # JSON is YAML's flow style, which we compose iteratively
    return None if node is None else _build(node, None, _has_anchors(data))


def _json_bytes(text: str | bytes) -> bytes:
    """UTF-8 bytes of the JSON text, so the bracket scan sees each character once."""
    try:
        if isinstance(text, str):
            return text.encode("utf-8", "surrogatepass")
        encoding = json.detect_encoding(text)
        return text if encoding == "utf-8" else text.decode(encoding).encode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"the document is not JSON text: {exc.reason}") from None


def load_text(text: str | bytes, format: str = "yaml") -> Any:
    """Plain data from YAML or JSON text, under the depth, size and tag guards.

    >>> load_text("a: [1, {b: 2020-01-01}]")
    {'a': [1, {'b': '2020-01-01'}]}
    >>> load_text("[" * 5000, "json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    amanda.errors.FormatError: the document nests deeper than the limit of 1000 levels ...
    """
    with gc_paused():
        if format == "json":
            return _json(text)
        return load_yaml_tree(text)[0]


def load_yaml_tree(text: str | bytes) -> tuple[Any, yaml.Node | None]:
    """Plain data from YAML text, as :func:`load_text`, and the node tree it was built from:
    a caller that finds a bad field later reads the field's line from the tree instead of
    composing the text again.

    >>> data, node = load_yaml_tree("a: [1, 2]")
    >>> data, node.value[0][1].start_mark.line
    ({'a': [1, 2]}, 0)
    """
    with gc_paused():
        node = compose_yaml(text)
        if node is None:
            return None, None
        try:
            return _build(node, None, _has_anchors(text)), node
        except FormatError:
            _build(node, {})  # again with paths tracked, to name the path in the error
            raise


def load_located(text: str | bytes) -> tuple[Any, Lines]:
    """Plain data from YAML text and the line of each field, by path of keys and indexes.

    >>> load_located("a: [1, {b: x}]")
    ({'a': [1, {'b': 'x'}]}, {(): 1, ('a',): 1, ('a', '0'): 1, ('a', '1'): 1, ('a', '1', 'b'): 1})
    """
    with gc_paused():
        node = compose_yaml(text)
        lines: Lines = {}
        return (None if node is None else _build(node, lines)), lines
