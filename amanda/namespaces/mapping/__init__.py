"""Mapping between namespaces: rule tables (YAML or Python), one driver, and ``convert``.

See ``docs/mapping.md`` for the YAML format and the semantics.
"""

from amanda.namespaces.mapping.convert import convert, register_table
from amanda.namespaces.mapping.driver import MappingLoopError, UnmatchedOpsError
from amanda.namespaces.mapping.names import NameMap
from amanda.namespaces.mapping.pattern import EdgePattern, OpPattern, Pattern
from amanda.namespaces.mapping.rule import RELABEL, Match, NewOp, Replacement, Rule, Skip
from amanda.namespaces.mapping.table import MappingTable
from amanda.namespaces.mapping.yaml_rules import load_mapping

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
