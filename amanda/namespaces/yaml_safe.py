"""Safe YAML parsing that remembers where each value came from.

Only YAML's plain scalars, lists and mappings are accepted: any other tag (``!!python/object``,
``!!binary``, merge keys, custom tags) is refused with the path and line of the node, and the
parser is PyYAML's C safe loader when available, else its pure-Python safe loader.
"""

from __future__ import annotations

from typing import Any, cast

import yaml

from amanda.errors import SchemaError

__all__ = ["SafeLoader", "located_error", "parse_yaml"]

SafeLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_CORE = "tag:yaml.org,2002:"
_ALLOWED = {_CORE + t for t in ("str", "int", "float", "bool", "null", "seq", "map")}
_MAX_NODES = 1_000_000  # guards against alias bombs

Path = tuple[str, ...]


def located_error(path: Path, expected: str, found: str, hint: str = "",
                  line: int | None = None) -> SchemaError:
    """A ``SchemaError`` at ``path`` whose message (and ``line`` field) gives the line.

    >>> str(located_error(("a", "b"), "an int", "'x'", line=3))
    "at a/b: expected an int, found 'x' (line 3)"
    """
    error = cast(SchemaError, SchemaError.at(path, expected, found, hint))
    if line is not None:
        error.args = (f"{error.args[0]} (line {line})",)
    error.line = line  # type: ignore[attr-defined]
    return error


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_CORE):] if tag.startswith(_CORE) else tag


class _Walker:
    """Turns a composed node tree into plain data, recording each value's line by path."""

    def __init__(self, loader: Any, base: Path) -> None:
        self.loader = loader
        self.lines: dict[Path, int] = {}
        self.count = 0
        self.active: set[int] = set()
        self.base = base

    def convert(self, node: yaml.Node, path: Path, record: bool = True) -> Any:
        line = node.start_mark.line + 1
        if record:
            self.lines.setdefault(path, line)
        self.count += 1
        where = self.base + path
        if self.count > _MAX_NODES:
            raise located_error(where, f"at most {_MAX_NODES} nodes", "more (alias expansion?)",
                                line=line)
        if node.tag == _CORE + "timestamp":
            return str(node.value)  # an unquoted date is just text to us
        if node.tag not in _ALLOWED:
            raise located_error(where, "plain YAML data (scalars, lists, mappings)",
                                f"the refused tag {_short_tag(node.tag)}",
                                "schemas are data: Python and custom tags are refused", line)
        if isinstance(node, yaml.ScalarNode):
            return self.loader.construct_object(node, deep=True)
        if id(node) in self.active:
            raise located_error(where, "a finite document", "a recursive alias", line=line)
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.convert(item, path + (str(i),)) for i, item in enumerate(node.value)]
            return self._mapping(node, path)
        finally:
            self.active.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: Path) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise located_error(self.base + path, "scalar mapping keys", "a complex key",
                                    line=key_line)
            key = self.convert(key_node, path, record=False)
            if key in result:
                raise located_error(self.base + path + (str(key),), "unique keys",
                                    f"{key!r} twice", line=key_line)
            self.lines[path + (str(key),)] = key_line
            result[key] = self.convert(value_node, path + (str(key),))
        return result


def parse_yaml(text: str, base: Path = ()) -> tuple[Any, dict[Path, int]]:
    """Parse one YAML document into plain data and a map from field path to line number.

    ``base`` prefixes the paths named in errors.

    >>> parse_yaml("a: [1, {b: x}]")
    ({'a': [1, {'b': 'x'}]}, {(): 1, ('a',): 1, ('a', '0'): 1, ('a', '1'): 1, ('a', '1', 'b'): 1})
    >>> parse_yaml("!!python/object:os.system {}")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    amanda.errors.SchemaError: at <root>: ... found the refused tag !!python/object:os.system ...
    """
    loader = SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
            line = mark.line + 1 if mark is not None else None
            problem = getattr(exc, "problem", None) or str(exc)
            raise located_error(base, "well-formed YAML", str(problem), line=line) from None
        if node is None:
            return None, {}
        walker = _Walker(loader, base)
        data = walker.convert(node, ())
        return data, walker.lines
    finally:
        loader.dispose()
