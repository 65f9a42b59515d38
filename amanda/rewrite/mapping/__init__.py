"""Mapping between namespaces: rule tables (YAML or Python), one driver, and ``convert``.

See ``docs/mapping.md`` for the YAML format and the semantics.
"""

from amanda.rewrite.mapping.convert import convert, register_table
from amanda.rewrite.mapping.driver import MappingLoopError, UnmatchedOpsError
from amanda.rewrite.mapping.names import NameMap
from amanda.rewrite.mapping.pattern import EdgePattern, OpPattern, Pattern
from amanda.rewrite.mapping.rule import RELABEL, Match, NewOp, Replacement, Rule, Skip
from amanda.rewrite.mapping.table import MappingTable
from amanda.rewrite.mapping.yaml_rules import load_mapping

__all__ = [
    "RELABEL",
    "EdgePattern",
    "MappingLoopError",
    "MappingTable",
    "Match",
    "NameMap",
    "NewOp",
    "OpPattern",
    "Pattern",
    "Replacement",
    "Rule",
    "Skip",
    "UnmatchedOpsError",
    "convert",
    "load_mapping",
    "register_table",
]
