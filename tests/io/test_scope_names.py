"""Scope names: TorchScript's scope components and qualified names are inverse, relative
names join back into qualified ones, torch's metadata lists read back what ``repr`` wrote."""

from __future__ import annotations

import ast

from hypothesis import given
from hypothesis import strategies as st

from amanda.io.scope_names import (
    parse_scope_list,
    qualify,
    relative_name,
    repeat_base,
    scope_list_text,
    split_node_name,
    unqualified,
)

_word = st.from_regex(r"[a-z][a-z_0-9]{0,6}", fullmatch=True)


@st.composite
def _module_paths(draw: st.DrawFn) -> list[str]:
    """Qualified names of a chain of modules, each called by the one before it: a child is an
    attribute, optionally followed by list indices (``blocks.0``), like torch's. An attribute
    named like its parent's last word (``b`` in ``a.b``, then ``a.b.b.0``) is left out: TorchScript
    writes it as it writes the parent's own list element, so no reader can tell them apart."""
    chain, parent = [], ""
    for _ in range(draw(st.integers(1, 5))):
        last_word = next((a for a in reversed(parent.split(".")) if not a.isdigit()), None)
        word = draw(_word.filter(lambda w, last=last_word: w != last))
        atoms = [word, *map(str, draw(st.lists(st.integers(0, 12), max_size=2)))]
        parent = ".".join([parent, *atoms] if parent else atoms)
        chain.append(parent)
    return chain


@given(_module_paths())
def test_torchscript_components_give_back_the_qualified_names(chain: list[str]) -> None:
    """Reading TorchScript's component of each module (its atoms from the last non-number)
    from the root down gives back every qualified name."""
    parent = ""
    for qualified in chain:
        parent = qualify(parent, unqualified(qualified))
        assert parent == qualified


@given(_module_paths())
def test_relative_names_join_into_qualified_names(chain: list[str]) -> None:
    """Each module's name relative to its caller, joined with ``.``, is its qualified name."""
    parts, parent = [], ""
    for qualified in chain:
        parts.append(relative_name(parent, qualified))
        parent = qualified
        assert ".".join(parts) == qualified


def test_sequential_inside_sequential_continues_its_parent() -> None:
    """``block.0.0`` under ``features.10.block.0`` is that module's child ``0``."""
    assert qualify("features.10.block.0", "block.0.0") == "features.10.block.0.0"
    assert qualify("x.block.0", "block") == "x.block.0.block"  # an attribute, not a continuation


@given(st.lists(st.text(max_size=8), max_size=6))
def test_scope_lists_read_back(items: list[str]) -> None:
    """Whatever ``repr`` writes (quotes and backslashes included) reads back."""
    assert parse_scope_list(scope_list_text(items)) == items
    assert parse_scope_list(repr(items)) == ast.literal_eval(repr(items))


def test_only_lists_of_strings_are_read() -> None:
    """A list of numbers, a call, or broken text is not a scope list."""
    for text in ("[1, 2]", "__import__('os')", "['a'", "{'a': 1}"):
        assert parse_scope_list(text) is None


def test_node_names_split_at_their_scopes() -> None:
    """Both styles split; a name without a scope, or with an empty part, does not."""
    assert split_node_name("/features/features.10/block/Conv") == (("features", "features.10", "block"), "Conv")
    assert split_node_name("dense/kernel") == (("dense",), "kernel")
    assert split_node_name("Constant_29") is None
    assert split_node_name("a//b") is None and split_node_name("a/") is None


def test_repeated_calls_are_recognised() -> None:
    """``x_<n>`` names a repeat of ``x``; ``x_0`` and ``x_`` do not."""
    assert repeat_base("shared_1") == "shared" and repeat_base("act_12") == "act"
    assert repeat_base("act_0") is None and repeat_base("act_") is None
