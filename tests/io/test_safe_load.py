"""The one document loader: depth, alias expansion, tags, keys and integers are all bounded."""

import json
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import amanda
from amanda import AmandaError, FormatError, MappingError, SchemaError, load_mapping
from amanda.namespaces import load_namespace_schema
from amanda.safe_load import ALIAS_ALLOWANCE, MAX_DEPTH, load_located, load_text

_DEEP_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import amanda
    from amanda import AmandaError, load_mapping
    from amanda.namespaces import load_namespace_schema

    def cases(n):
        yield "json", "[" * n + "]" * n + "\\n"
        yield "json-quoted", '{"a": "' + "]" * n + '", "b": ' + "[" * n + "1" + "]" * n + "}"
        yield "json-escaped", '{"a": "\\\\\\\\\\\\"]]]]", "b": ' + "[" * n + "1" + "]" * n + "}"
        yield "yaml-flow", "a: " + "[" * n + "]" * n
        yield "yaml-flow-unclosed", "a: " + "{x: " * n
        yield "yaml-block", "a:\\n" + "- " * n + "x\\n"
        yield "yaml-comment", "# " + "]" * n + "\\n" + "a: " + "[" * n + "\\n"
        yield "yaml-quoted", "a: '" + "]}" * n + "'\\nb: " + "{x: " * n + "1" + "}" * n

    for n in (20000, 100000):
        for name, text in cases(n):
            readers = [("loads", amanda.loads), ("schema", load_namespace_schema),
                       ("mapping", load_mapping)]
            if name.startswith("json"):
                readers.append(("loads-json", lambda t: amanda.loads(t, "json")))
            for reader, read in readers:
                start = time.perf_counter()
                try:
                    read(text)
                    row = {"outcome": "loaded"}
                except AmandaError as exc:
                    row = {"outcome": "refused", "error": type(exc).__name__,
                           "line": getattr(exc, "line", None)}
                row.update(n=n, case=name, reader=reader, seconds=time.perf_counter() - start)
                print(json.dumps(row), flush=True)
    """
)


def test_deep_documents_are_refused_quickly_through_every_reader():
    """20,000- and 100,000-deep JSON and YAML (flow, block, brackets in comments and quotes)
    are refused fast through loads, schemas and mappings, by the reader's own AmandaError
    subclass with the line where the nesting went too deep; run in a subprocess so a crash fails
    the test instead of killing pytest.

    Only the behaviour is judged, never the message: whether amanda's limit or the YAML
    library's own nesting limit (libyaml has one since PyYAML 6.0.4) fires first, the outcome
    is the same refusal."""
    done = subprocess.run([sys.executable, "-c", _DEEP_SCRIPT], capture_output=True, text=True, check=False,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rows) == 2 * (3 * 4 + 5 * 3)
    expected = {"loads": "FormatError", "loads-json": "FormatError", "schema": "SchemaError",
                "mapping": "MappingError"}
    for row in rows:
        assert row["outcome"] == "refused", row
        assert row["error"] == expected[row["reader"]], row
        assert isinstance(row["line"], int) and row["line"] >= 1, row
        assert row["seconds"] < 2.0, row


def _nested(levels: int, inner: str = "1") -> str:
    return "[" * levels + inner + "]" * levels


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_depth_limit_is_exact(fmt):
    """A scalar inside MAX_DEPTH - 1 lists loads; inside MAX_DEPTH lists it is refused."""
    value = load_text(_nested(MAX_DEPTH - 1), fmt)
    for _ in range(MAX_DEPTH - 1):
        assert isinstance(value, list) and len(value) == 1
        value = value[0]
    assert value == 1
    with pytest.raises(FormatError, match=f"limit of {MAX_DEPTH} levels") as info:
        load_text("\n" + _nested(MAX_DEPTH), fmt)
    assert info.value.line == 2


_JSON_NOISE = st.text(alphabet='[]{}"\\ab:, \n', max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.lists(_JSON_NOISE, min_size=1, max_size=4), st.integers(MAX_DEPTH - 2, MAX_DEPTH + 1))
def test_json_depth_scan_ignores_brackets_in_strings(noise, levels):
    """Strings full of brackets, quotes and backslashes never change the JSON depth decision."""
    strings = json.dumps(noise)  # a list of strings: one level, with escapes inside
    text = "[" * levels + strings + "]" * levels
    if levels + 2 <= MAX_DEPTH:  # the strings sit two levels below the outer lists
        assert load_text(text, "json") is not None
    else:
        with pytest.raises(FormatError, match="limit"):
            load_text(text, "json")


def _bomb(levels: int) -> str:
    text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, levels):
        name, prev = chr(97 + i), chr(96 + i)
        text += f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]\n"
    return text


@pytest.mark.parametrize("read, error", [
    (amanda.loads, FormatError), (load_namespace_schema, SchemaError), (load_mapping, MappingError),
])
def test_alias_bombs_are_refused_by_every_reader(read, error):
    """A 400-byte document whose aliases stand for 10^9 nodes is refused at once, naming the budget."""
    with pytest.raises(error, match="10,?4"):
        read(_bomb(9))


def test_modest_aliasing_still_loads():
    """Anchors reused a few times load as the values they stand for."""
    text = "op:\n  name: f\n  attrs:\n    base: &b {k: [1, 2], s: hi}\n    again: *b\n    more: [*b, *b]\n"
    attrs = amanda.loads(text).attrs
    expected = {"k": (1, 2), "s": "hi"}
    assert attrs["base"] == expected and attrs["again"] == expected
    assert list(attrs["more"]) == [expected, expected]


def test_alias_budget_grows_with_the_text():
    """Expansion within the text length plus the allowance loads; just past it is refused."""
    width = ALIAS_ALLOWANCE // 20
    text = "a: &a [" + ", ".join(["1"] * width) + "]\nb: [" + ", ".join(["*a"] * 15) + "]\n"
    assert len(load_text(text)["b"]) == 15
    over = "a: &a [" + ", ".join(["1"] * width) + "]\nb: [" + ", ".join(["*a"] * 30) + "]\n"
    with pytest.raises(FormatError, match="aliases expand"):
        load_text(over)


@pytest.mark.parametrize("text", ["a: &a [*a]", "a: &a {b: *a}"])
def test_recursive_aliases_are_refused(text):
    """An alias inside its own anchor is refused, with its line."""
    with pytest.raises(FormatError, match="recursive alias") as info:
        load_text(text)
    assert info.value.line == 1


@pytest.mark.parametrize("text, found", [
    ("a: !!binary aGVsbG8=", "!!binary"),
    ("a: !!set {x: null}", "!!set"),
    ("a: !!python/object/apply:os.system [true]", "!!python/object/apply:os.system"),
    ("base: &b {x: 1}\nc: {<<: *b}", "!!merge"),
    ("a: !custom 3", "!custom"),
])
def test_only_plain_tags_load(text, found):
    """Binary, set, merge, Python and custom tags are refused with the tag and its path."""
    with pytest.raises(FormatError, match=found) as info:
        load_text(text)
    assert info.value.line is not None and info.value.path is not None


def test_dates_stay_text_and_keys_are_unique():
    """An unquoted date is a string; a repeated key is refused with its path and line."""
    assert load_text("d: 2020-01-02") == {"d": "2020-01-02"}
    with pytest.raises(FormatError, match="twice") as info:
        load_text("a:\n  b: 1\n  b: 2\n")
    assert (info.value.path, info.value.line) == (("a", "b"), 3)


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_huge_integers_are_format_errors(fmt):
    """A 5,000-digit integer is a FormatError naming the digit limit, not a ValueError."""
    with pytest.raises(FormatError, match="digit"):
        load_text('{"a": ' + "7" * 5000 + "}", fmt)
    with pytest.raises(FormatError):
        amanda.loads('{"op": {"name": "f", "attrs": {"v": ' + "7" * 5000 + "}}}", fmt)


def test_located_lines_follow_the_text():
    """Each field's line is where its key (or list item) stands."""
    data, lines = load_located("a:\n  - x\n  - {b: 1,\n     c: 2}\n")
    assert data == {"a": ["x", {"b": 1, "c": 2}]}
    assert lines[("a",)] == 1 and lines[("a", "0")] == 2 and lines[("a", "1", "c")] == 4


def test_any_text_gives_data_or_a_format_error():
    """Malformed, multi-document and non-UTF-8 text raise FormatError, never another error."""
    for text in ("a: [", "a: 1\n---\nb: 2\n", b"a: \xff\xfe\x00", "{a: 1, a", "\ud800"):
        with pytest.raises(AmandaError):
            load_text(text)
    for text in ('{"a": [}', b"\xff\xfe[\x00", "[1,]"):
        with pytest.raises(AmandaError):
            load_text(text, "json")


def test_json_depth_holds_under_a_raised_recursion_limit():
    """With the interpreter's recursion limit raised, JSON past MAX_DEPTH is still refused."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(MAX_DEPTH * 5)
    try:
        with pytest.raises(FormatError, match=f"limit of {MAX_DEPTH}"):
            load_text(_nested(MAX_DEPTH + 200), "json")
        assert load_text(_nested(MAX_DEPTH - 1), "json") is not None
    finally:
        sys.setrecursionlimit(limit)


def test_the_collector_is_restored_after_loading_and_dumping():
    """Loading and dumping pause the cycle collector and leave it as they found it, on
    success and on error, enabled or not."""
    import gc
    import threading

    from amanda.parse_guards import gc_paused

    for was_enabled in (True, False):
        (gc.enable if was_enabled else gc.disable)()
        try:
            amanda.loads(amanda.dumps(amanda.op("Relu", "r", ["x"], ["y"])))
            with pytest.raises(FormatError):
                amanda.loads("op: [")
            assert gc.isenabled() is was_enabled
        finally:
            gc.enable()
    inside = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with gc_paused():
            inside.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    inside.wait(5)
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other holder still has it paused
    release.set()
    holder.join()
    assert gc.isenabled()


def test_promoting_moves_what_was_made_to_the_oldest_generation_and_freezes_nothing():
    """``gc_paused(promote=True)`` leaves the objects made meanwhile in the oldest generation
    (the next young collection does not walk them), keeps nothing frozen, and leaves a
    program's own frozen objects frozen (then it does not promote); the collector still frees
    a cycle made inside once a full collection runs."""
    import gc
    import weakref

    from amanda.parse_guards import gc_paused

    class Node:
        pass

    gc.collect()
    with gc_paused(promote=True):
        made = [[i] for i in range(5000)]
        cycle = Node()
        cycle.me = cycle
        probe = weakref.ref(cycle)
        del cycle
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert gc.get_count()[0] < 100  # not the 5,000 lists: they went to the oldest generation
    assert any(o is made for o in gc.get_objects(generation=2))
    assert probe() is not None
    gc.collect()
    assert probe() is None
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gc_paused(promote=True):
            more = [[i] for i in range(100)]
        assert gc.get_freeze_count() == frozen and more
    finally:
        gc.unfreeze()
