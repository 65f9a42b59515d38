"""One rewrite engine: rules written as builder code, matched across a model's hierarchy.

A :class:`Rule` is a pattern function and a replacement function over the op builder, compiled
when it is made; :func:`rewrite` groups each match into a fused container that keeps the ops it
replaces (``metadata.rewritten_by`` names the rule), :func:`matches` lists them, and the
optimiser (``amanda.passes``) applies its fusion tables with the same matcher, replacing the
matched ops. See docs/rewrite.md.
"""

from amanda.rewrite.apply import matches, rewrite
from amanda.rewrite.match import Match
from amanda.rewrite.pattern import ANY, Optional
from amanda.rewrite.rule import Rule, Value

__all__ = ["ANY", "Match", "Optional", "Rule", "Value", "matches", "rewrite"]
