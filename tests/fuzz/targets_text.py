"""Fuzz targets over text: YAML and JSON documents, selectors and mapping tables.

Each ``run`` raises ``ModifiedInput`` when amanda changed a container it was given and
``InvalidResult`` when a result breaks a property checked here (documents must write back to
the same text, and a YAML document is composed once even when it is rejected; the compiled
selector engine must agree with the plain JMESPath one).
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Iterator
from typing import Any

import yaml

import amanda
from amanda import Container
from tests.fuzz import seeds
from tests.fuzz.harness import InvalidResult, Source, Target, check_unchanged, snapshot
from tests.fuzz.mutate import deep_text, mutate_bytes, mutate_data, tag_yaml

# -- documents ------------------------------------------------------------------------------


@functools.cache
def _parsed(format: str) -> tuple[Any, ...]:
    load = json.loads if format == "json" else yaml.safe_load
    return tuple(load(text) for text in seeds.documents(format))


def _write(data: Any, format: str) -> str:
    if format == "json":
        return json.dumps(data)
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None)


def mutate_text(src: Source, text: str, parsed: Any, format: str) -> str | bytes:
    """One of: a structural mutation written back, a byte-level one, deep nesting, a tag."""
    kind = src.integer(0, 4)
    if kind <= 1:
        try:
            text = _write(mutate_data(src, parsed, aliases=format == "yaml"), format)
        except (RecursionError, ValueError, TypeError, OverflowError):
            pass  # a mutation the writer cannot express: keep the valid text
        return mutate_bytes(src, text.encode()) if kind == 1 else text
    if kind == 2:
        return mutate_bytes(src, text.encode())
    if kind == 3:
        return deep_text(src, text, json=format == "json")
    return tag_yaml(src, text) if format == "yaml" else mutate_bytes(src, text.encode(), 12)


def _document_target(format: str) -> Target:
    def generate(src: Source) -> tuple[str, str | bytes]:
        i = src.integer(0, len(seeds.documents(format)) - 1)
        return format, mutate_text(src, seeds.documents(format)[i], _parsed(format)[i], format)

    return Target(f"{format}_document", generate, run_document, lambda case: _raw(case[1]))


def _raw(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")


@contextlib.contextmanager
def _counted_composes() -> Iterator[list[int]]:
    """Count the YAML compositions (node trees built) while the block runs."""
    import amanda.io.text as text_module
    import amanda.safe_load as safe_load

    calls: list[int] = []
    real = safe_load.compose_yaml

    def counted(text: str | bytes) -> Any:
        calls.append(len(text))
        return real(text)

    safe_load.compose_yaml = text_module.compose_yaml = counted  # type: ignore[assignment]
    try:
        yield calls
    finally:
        safe_load.compose_yaml = text_module.compose_yaml = real  # type: ignore[assignment]


def run_document(case: tuple[str, str | bytes]) -> None:
    """``loads``, which composes a YAML document at most once even to reject it (the error's
    line comes from that tree); a container read is queried (unchanged) and written back to
    the same text."""
    format, text = case
    with _counted_composes() as composed:
        try:
            result = amanda.loads(text, format)
        except amanda.FormatError:
            if format == "yaml" and len(composed) > 1:
                raise InvalidResult(f"the document was composed {len(composed)} times to be rejected") from None
            raise
    if not isinstance(result, (Container, amanda.Edge, amanda.Port)):
        raise InvalidResult(f"loads returned a {type(result).__name__}")
    written = amanda.dumps(result, format)
    if amanda.dumps(amanda.loads(written, format), format) != written:
        raise InvalidResult("the container read does not write back to the same text")
    if isinstance(result, Container):
        before = snapshot(result)
        amanda.select(result, "$..*")
        check_unchanged(result, before, "the loaded container")


# -- selectors ------------------------------------------------------------------------------

NAMES = ["cell", "w", "act", "init", "show", "model", "relu", "if", "loop", "then_branch",
         "then_mul", "n0", "n1", "g0", "x", "*", "-", "_", "é", "0"]
FIELDS = ["name", "type", "path", "depth", "attrs", "own_attrs", "inputs", "outputs", "is_op",
          "namespace", "attrs.debug", "attrs.rnn_cell", "attrs.initializer", "own_attrs.k",
          "inputs[0]", "attrs.*", "nosuch", "@", "path[-1]", "attrs.value"]
LITERALS = ["'Dot'", "'Relu'", "`1`", "`null`", "`[1, 2]`", "`true`", "'x'", "`\"s\"`", "`{}`",
            "`1e400`", "`-0`", "''", "'\\''",
            # JMESPath's traps: a double-quoted or bare word is a field, so are true and null; a
            # bare number does not parse
            '"Dot"', '"Conv"', "Dot", "Conv", "true", "null", "4", "-2.5", "name", "type"]
FUNCTIONS = ["in_computation('inference')", "in_computation('nosuch')", "producer_types()",
             "consumer_types()", "length(inputs)", "contains(producer_types(), 'Dot')",
             "length(@)", "keys(attrs)", "max(`[]`)", "to_number(name)", "abs(name)",
             "sort_by(@, &name)", "in_computation()", "in_computation(`1`)", "no_such_fn()",
             "join(',', inputs)", "starts_with(type, 'D')", "sum(`[1e308, 1e308]`)"]


def _json_literal(src: Source) -> str:
    """A JSON literal nested a few or thousands of levels deep (Python's json decoder recurses)."""
    depth = src.choice([2, 50, 99, 100, 101, 1000, 20000])
    if src.boolean():
        return "`" + "[" * depth + "]" * depth + "`"
    return "`" + '{"a": ' * depth + "1" + "}" * depth + "`"


def _filter(src: Source, depth: int = 0) -> str:
    kind = src.integer(0, 7 if depth < 3 else 2)
    if kind == 0:
        return src.choice(FIELDS)
    if kind == 1:
        return f"{src.choice(FIELDS)} {src.choice(['==', '!=', '<', '>=', '=~'])} {src.choice(LITERALS)}"
    if kind == 7:
        return f"{src.choice(FIELDS)} == {_json_literal(src)}"
    if kind == 2:
        return src.choice(FUNCTIONS)
    if kind == 3:
        return f"!({_filter(src, depth + 1)})"
    if kind == 4:
        return f"{_filter(src, depth + 1)} {src.choice(['&&', '||'])} {_filter(src, depth + 1)}"
    if kind == 5:
        return f"({_filter(src, depth + 1)})"
    return f"{src.choice(FIELDS)}[?{_filter(src, depth + 1)}]"


def _step(src: Source) -> str:
    kind = src.integer(0, 9)
    if kind == 0:
        return f".{src.choice(NAMES)}"
    if kind == 1:
        return f"..{src.choice(NAMES)}"
    if kind == 2:
        return f"[{src.integer(-5, 5)}]"
    if kind == 3:
        parts = [str(src.integer(-4, 4)) if src.boolean() else "" for _ in range(src.integer(2, 3))]
        return f"[{':'.join(parts)}]"
    if kind == 4:
        return src.choice(["[*]", ".*", "..*", "..[*]"])
    if kind == 5:
        return f"['{src.choice(NAMES)}']" if src.boolean() else '."dense/MatMul"'
    if kind == 6:
        return f"[?{_filter(src)}]"
    if kind == 7:
        return f"..[?{_filter(src)}]"
    if kind == 8:
        return f"[{src.integer(-(2**70), 2**70)}]"
    return src.choice(["", " ", ".", "..", "[", "]", "[?]", "['", '."', "\\"])


def selector_text(src: Source) -> str:
    """A selector from the grammar, maybe mutated, or random text."""
    kind = src.integer(0, 5)
    if kind == 5:
        return src.data(40).decode("latin-1")
    text = "$" + "".join(_step(src) for _ in range(src.integer(0, 5)))
    if kind == 4:
        text = mutate_bytes(src, text.encode()).decode("utf-8", "replace")
    if kind == 3:
        text = text[1:]  # no leading $
    return text


@functools.cache
def selector_models() -> tuple[Container, ...]:
    """Models the selectors run on: the query model, an ONNX model with If and Loop bodies, a
    random nested container."""
    return seeds.query_model(), seeds.onnx_containers()["control_flow"], seeds.strategy_containers()[3]


def generate_selector(src: Source) -> tuple[int, str]:
    """A model index and a selector."""
    return src.integer(0, len(selector_models()) - 1), selector_text(src)


def run_selector(case: tuple[int, str]) -> None:
    """``select`` leaves the model unchanged, agrees with the plain JMESPath engine, and never
    answers a filter that reads a field no node's view has (always null: a trap) without a word."""
    model = selector_models()[case[0]]
    before = snapshot(model)
    paths = amanda.select(model, case[1]).paths
    check = amanda.compile_selector(case[1], engine="jmespath").select(model).paths
    if paths != check:
        raise InvalidResult(f"compiled engine found {paths[:4]}, jmespath engine {check[:4]}")
    check_unchanged(model, before, "the model queried")
    missing = _fields_missing_from_views(model, case[1])
    if missing:
        raise InvalidResult(f"the filter reads {sorted(missing)}, which no view has, and the selector "
                            f"answered {len(paths)} nodes without a word")


class _RecordingView(dict):
    """A node's view that notes every key a filter looks up and the view lacks (jmespath reads
    a field with ``get``)."""

    def __init__(self, view: dict, missing: set) -> None:
        super().__init__(view)
        self.missing = missing

    def get(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self.missing.add(key)
        return super().get(key, default)


def _fields_missing_from_views(model: Container, selector: str) -> set:
    """Keys the selector's filters read from some node's documented view and it lacks, found by
    running each filter with plain jmespath on views built by the tests' own brute force."""
    import jmespath

    from amanda.query.parse import parse_selector
    from tests.query.models import _entries, brute_view

    missing: set = set()
    filters = [step.arg for step in parse_selector(selector) if step.test == "filter"]
    if not filters:
        return missing
    views = [brute_view(path, node, attrs) for path, node, attrs in _entries(model)]
    for text in filters:
        for view in views:
            try:
                jmespath.search(text, _RecordingView(view, missing))
            except Exception:  # noqa: BLE001 - unknown functions and type errors: the keys read before count
                pass
    return missing


# -- mapping tables -------------------------------------------------------------------------


@functools.cache
def _mapping_data() -> tuple[Any, ...]:
    return tuple(yaml.safe_load(text) for text in seeds.mapping_texts())


def mapping_graphs() -> tuple[Container, ...]:
    """Graphs the tables are applied to."""
    return seeds.tf_graph(), seeds.user_graph(), seeds.query_model(), seeds.strategy_containers()[0]


def generate_mapping(src: Source) -> tuple[str | bytes, int, str, bool]:
    """Table text, graph index, on_unmatched and fixed_point."""
    i = src.integer(0, len(seeds.mapping_texts()) - 1)
    text = mutate_text(src, seeds.mapping_texts()[i], _mapping_data()[i], "yaml")
    graph = src.integer(0, len(mapping_graphs()) - 1)
    return text, graph, src.choice(["pass", "error"]), src.boolean(0.2)


def run_mapping(case: tuple[str | bytes, int, str, bool]) -> None:
    """``load_mapping`` then ``apply``: the graph is unchanged and the result a valid container."""
    text, index, on_unmatched, fixed_point = case
    table = amanda.load_mapping(text)
    graph = mapping_graphs()[index]
    before = snapshot(graph)
    result = table.apply(graph, on_unmatched=on_unmatched, fixed_point=fixed_point)
    check_unchanged(graph, before, "the graph mapped")
    if not isinstance(result, Container) or amanda.loads(amanda.dumps(result)) != result:
        raise InvalidResult("apply returned something that does not read back equal")


TARGETS = (
    _document_target("yaml"),
    _document_target("json"),
    Target("selector", generate_selector, run_selector, lambda case: _raw(case[1])),
    Target("mapping", generate_mapping, run_mapping, lambda case: _raw(case[0])),
)
