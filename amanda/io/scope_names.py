"""Scope names as exporters write them: qualified module names, scope-path node names, and the
lists torch's exporter keeps in node metadata. Pure string functions, shared by the ONNX
hierarchy import and export and by any importer of ``/``-scoped (TensorFlow-style) graphs.

A *qualified name* names a scope from the root: torch's ``transformer.h.0.attn`` (atoms joined
by ``.``), TensorFlow's ``encoder/layer_0/dense`` (joined by ``/``). A container is named by its
scope's name *relative* to the scope that called it (``h.0`` in ``transformer``), so joining a
container path gives the qualified name back.

>>> relative_name("transformer", "transformer.h.0")
'h.0'
>>> unqualified("features.10.block.0.0")
'block.0.0'
>>> qualify("features.10.block.0", "block.0.0")
'features.10.block.0.0'
>>> split_node_name("/transformer/h.0/attn/c_attn/Gemm")
(('transformer', 'h.0', 'attn', 'c_attn'), 'Gemm')
>>> parse_scope_list("['', 'transformer', 'transformer.h.0', 'layer_norm']")
['', 'transformer', 'transformer.h.0', 'layer_norm']
"""

from __future__ import annotations

import ast
import re

__all__ = [
    "parse_scope_list",
    "qualify",
    "relative_name",
    "repeat_base",
    "scope_list_text",
    "split_node_name",
    "unqualified",
]

_PLAIN_ITEMS = re.compile(r"\[(?:'[^'\\]*'(?:, '[^'\\]*')*)?\]")
_REPEAT = re.compile(r"^(.+)_([1-9][0-9]*)$")


def parse_scope_list(text: str) -> list[str] | None:
    """The list of strings torch's exporter wrote with ``repr`` (``pkg.torch.onnx.name_scopes``,
    ``pkg.torch.onnx.class_hierarchy``), or None if ``text`` is not such a list.

    Read without ``eval``: the common form is split directly, any other goes through
    ``ast.literal_eval``, which evaluates literals only.

    >>> parse_scope_list("['a', \\"b'c\\"]"), parse_scope_list("[1, 2]"), parse_scope_list("os.system")
    (['a', "b'c"], None, None)
    """
    if _PLAIN_ITEMS.fullmatch(text):
        return [] if text == "[]" else text[2:-2].split("', '")
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, list) and all(type(item) is str for item in value):
        return value
    return None


def scope_list_text(items: list[str]) -> str:
    """``items`` written as torch's exporter writes these lists (Python's ``repr``).

    >>> scope_list_text(['', 'blocks.0'])
    "['', 'blocks.0']"
    """
    return repr(list(items))


def relative_name(parent: str, qualified: str, separator: str | None = None) -> str:
    """``qualified`` relative to its calling scope ``parent``: the parent's prefix (and a
    ``separator``, by default ``.`` or ``/``) stripped where it has one (a module reached
    through a ``ModuleList`` keeps ``h.0``), else the whole qualified name (a module called from
    outside its owner).

    >>> relative_name("", "transformer"), relative_name("seq", "seq.0.0"), relative_name("a", "b.c")
    ('transformer', '0.0', 'b.c')
    >>> relative_name("encoder", "encoder/layer_0")
    'layer_0'
    """
    size = len(parent)
    if parent and len(qualified) > size + 1 and qualified.startswith(parent) and (
            qualified[size] == separator if separator else qualified[size] in "./"):
        return qualified[size + 1 :]
    return qualified


_numeric = str.isdigit  # an atom that is a number: a ModuleList/Sequential index


def unqualified(qualified: str) -> str:
    """The name TorchScript's exporter gives a module scope in node names: the atoms of its
    qualified name from the last one that is not a number (``features.10`` stays
    ``features.10``, ``features.10.block.0.0`` becomes ``block.0.0``).

    >>> unqualified("transformer.h.0.attn"), unqualified("0.1")
    ('attn', '0.1')
    """
    atoms = qualified.split(".")
    for index in range(len(atoms) - 1, -1, -1):
        if not _numeric(atoms[index]):
            return ".".join(atoms[index:])
    return qualified


def qualify(parent: str, component: str) -> str:
    """The qualified name of the scope TorchScript named ``component`` inside the scope of
    qualified name ``parent`` (the inverse of :func:`unqualified`): where the parent ends with
    the component's first atom followed by a proper prefix of its numbers (``block.0`` holding
    ``block.0.0``), the component continues the parent; otherwise it is a child attribute.

    >>> qualify("", "blocks.0"), qualify("blocks.0", "lin"), qualify("features", "features.10")
    ('blocks.0', 'blocks.0.lin', 'features.10')
    """
    if "." not in component:  # one atom: a child attribute (nothing to continue)
        return f"{parent}.{component}" if parent else component
    atoms = component.split(".")
    head, numbers = atoms[0], atoms[1:]
    if parent and not _numeric(head) and all(map(_numeric, numbers)):
        outer = parent.split(".")
        for start in range(len(outer) - 1, -1, -1):
            if not _numeric(outer[start]):
                break
        else:
            start = -1
        if start >= 0 and outer[start] == head:
            tail = outer[start + 1 :]
            if len(tail) < len(numbers) and numbers[: len(tail)] == tail:
                return ".".join(outer[:start] + atoms)
    return f"{parent}.{component}" if parent else component


def split_node_name(name: str) -> tuple[tuple[str, ...], str] | None:
    """The scope components and the leaf of a scope-path node name (``/a/b/Op`` as TorchScript
    writes, ``a/b/op`` as TensorFlow does), or None for a name without a scope.

    >>> split_node_name("dense/MatMul"), split_node_name("Constant_29"), split_node_name("/Add")
    ((('dense',), 'MatMul'), None, ((), 'Add'))
    """
    if "/" not in name:
        return None
    parts = name.split("/")
    if parts[0] == "":
        parts = parts[1:]
    leaf = parts[-1]
    scopes = tuple(parts[:-1])
    if not leaf or any(not part for part in scopes):
        return None  # "a//b" or a trailing "/": not a scope path
    return scopes, leaf


def repeat_base(component: str) -> str | None:
    """The scope a TorchScript component names a repeated call of (``act_1`` -> ``act``: the
    exporter appends ``_<n>`` to the path of a module's second and later calls), or None.

    >>> repeat_base("act_1"), repeat_base("ln_1"), repeat_base("block")
    ('act', 'ln', None)
    """
    found = _REPEAT.match(component)
    return found.group(1) if found else None
