"""One rewrite engine: rules written as builder code, matched across a model's hierarchy.

A :class:`Rule` is a pattern function and a replacement function over the op builder, compiled
when it is made; :func:`rewrite` groups each match into a fused container that keeps the ops it
replaces (``metadata.rewritten_by`` names the rule), :func:`matches` lists them, and the
optimiser (``amanda.passes``) applies its fusion tables with the same matcher, replacing the
matched ops. See docs/rewrite.md.
"""

from amanda.rewrite.apply import matches, rewrite
from amanda.rewrite.match import COMMUTATIVE, LevelView, Match, TreeView, find_matches
from amanda.rewrite.pattern import ANY, Optional, PatternOp, Var
from amanda.rewrite.rule import NewOp, Rule, Value, replacement_of

__all__ = [
    "ANY",
    "COMMUTATIVE",
    "LevelView",
    "Match",
    "NewOp",
    "Optional",
    "PatternOp",
    "Rule",
    "TreeView",
    "Value",
    "Var",
    "find_matches",
    "matches",
    "replacement_of",
    "rewrite",
]
