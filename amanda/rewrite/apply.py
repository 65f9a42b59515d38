"""``rewrite(model, rules)``: every match becomes a fused container that keeps the ops it
replaces, marked with the rule that made it; ``matches(model, rules)`` lists them first.

Matching sees the whole hierarchy at once (values followed through container ports), so a
pattern finds the ops it describes wherever the importer nested them. A match whose ops are
siblings is grouped in place with :func:`amanda.containers.fuse` (``unfuse`` restores them); a
match spanning containers is listed by ``matches`` and left as it is by ``rewrite``, since
grouping it would move ops out of the modules they belong to.
"""

from __future__ import annotations

from typing import Any

from amanda.containers.arguments import expect_container
from amanda.containers.container import Container
from amanda.containers.fusion import fuse
from amanda.rewrite.match import Match, TreeView, find_matches
from amanda.rewrite.rule import NewOp, _checked, replacement_of

__all__ = ["matches", "rewrite"]


def matches(model: Container, rules: Any) -> list[Match]:
    """Every match of ``rules`` (a Rule or a list, earlier rules first) among the leaf ops of
    ``model`` and its containers; no op is in two matches. ``match.keys`` are op paths.

    >>> import amanda
    >>> from amanda.rewrite import Rule
    >>> x = amanda.Input("x", "float32", (2,))
    >>> m = amanda.model([x], amanda.ops.Mul(x, amanda.ops.Sigmoid(x, name="s"), name="m"))
    >>> [match.keys for match in matches(m, Rule("silu", lambda op, x: op.Mul(x, op.Sigmoid(x))))]
    [[('m',), ('s',)]]
    """
    expect_container(model, "model")
    rules = _checked(rules)
    view = TreeView(model)
    taken: set = set()
    found: list[Match] = []
    for rule in rules:
        found += find_matches(view, rule, None, taken)
    return found


def rewrite(model: Container, rules: Any) -> Container:
    """``model`` with every match of ``rules`` (see :func:`matches`) grouped into a fused
    container: its type is the replacement's op type (the rule's name without one), its
    attributes the replacement's plus ``metadata.rewritten_by``, the rule's name. The grouped
    ops are kept as they are, so the model computes the same and ``amanda.unfuse`` undoes a
    group (its ops keep the ``metadata`` they inherited from it, as unfuse does for every
    attribute); ``model.select("$..[?own_attrs.metadata.rewritten_by=='gelu']")`` lists the
    groups, ``attrs.`` (effective attributes) the groups and the ops inside them.

    >>> import amanda
    >>> from amanda.rewrite import Rule
    >>> x = amanda.Input("x", "float32", (2,))
    >>> m = amanda.model([x], amanda.ops.Mul(x, amanda.ops.Sigmoid(x, name="s"), name="m"))
    >>> out = rewrite(m, Rule("silu", lambda op, x: op.Mul(x, op.Sigmoid(x)), lambda op, x: op.Swish(x)))
    >>> [(c.type, c.name, [k.name for k in c.children]) for c in out.children]
    [('Swish', 'Swish_0', ['s', 'm'])]
    >>> out.select("$..[?own_attrs.metadata.rewritten_by=='silu']").paths
    (('Swish_0',),)
    >>> out.select("$..[?attrs.metadata.rewritten_by=='silu']").paths  # and the ops inside, by inheritance
    (('Swish_0',), ('Swish_0', 's'), ('Swish_0', 'm'))
    """
    found = matches(model, rules)
    for match in found:
        paths = match.keys
        if len({path[:-1] for path in paths}) != 1:
            continue  # spans containers: listed by matches(), left in place
        new = replacement_of(match)
        made = new if isinstance(new, NewOp) else None  # no op, or a value passed on: the rule names the group
        attrs = {k: v for k, v in (made.attrs if made is not None else {}).items() if not callable(v)}
        metadata = {"rewritten_by": match.rule.name}
        model = fuse(model, paths, made.type if made is not None else match.rule.name,
                     attrs={**attrs, "metadata": metadata})
    return model
