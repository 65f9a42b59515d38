"""How an ONNX op's inputs and attributes moved between opsets, for hints in messages.

Several ONNX ops turned an attribute into an input (``ReduceMean``'s ``axes`` at opset 18,
``Split``'s ``split``, ``Squeeze``'s ``axes`` and ``Pad``'s ``pads`` at 13 ...) or the other way.
Written for the opset of the other shape, a call fails with "at most 1 inputs" or "unknown
attribute"; :func:`moved_hint` says what the name is at the opset used and where it changed.

>>> from amanda.namespaces.namespace import namespace
>>> moved_hint(namespace("amanda/onnx/17").schema("ReduceMean"), "axes", "input")
'axes is an attribute of ReduceMean before opset 18 (an input from opset 18): pass it as axes=...'
>>> moved_hint(namespace("amanda/onnx/18").schema("ReduceMean"), "axes", "attribute")
'axes is an input of ReduceMean from opset 18 (an attribute before): pass it as an input'
"""

from __future__ import annotations

from amanda.namespaces.schema import OpSchema

__all__ = ["extra_input_names", "moved_hint"]


def _versions(schema: OpSchema) -> list[OpSchema]:
    """Every version of ``schema``'s op in its domain, oldest first; empty unless ``schema`` is
    one of ONNX's (other vocabularies keep no history here)."""
    from amanda.namespaces.onnx_vocab import onnx_vocabulary

    versions = [s for s in onnx_vocabulary().schemas if s.domain == schema.domain and s.type == schema.type]
    # equal, not the same object: an opset read straight from onnx.defs converts its own copies
    return versions if any(s.since_version == schema.since_version and s == schema for s in versions) else []


def _kind(schema: OpSchema, name: str) -> str | None:
    if name in schema.input_names:
        return "input"
    if name in schema.attrs:
        return "attribute"
    return None


def extra_input_names(schema: OpSchema, count: int) -> list[str]:
    """Names that the inputs past ``schema``'s own would have in other versions of the op, for
    a call giving ``count`` inputs (``['axes']`` for ``ReduceMean(x, axes)`` at opset 17)."""
    names: list[str] = []
    own = len(schema.inputs)
    for version in _versions(schema):
        for port in version.inputs[own:count]:
            if port.name not in names and port.name not in schema.input_names:
                names.append(port.name)
    return names


def moved_hint(schema: OpSchema, name: str, given_as: str) -> str:
    """Where ``name``, given as an ``'input'`` or an ``'attribute'`` of ``schema``'s op, is the
    other kind or exists in other opsets; '' when no version of the op knows it otherwise."""
    versions = _versions(schema)
    if not versions:
        return ""
    here = _kind(schema, name)
    later = [v for v in versions if v.since_version > schema.since_version]
    earlier = [v for v in versions if v.since_version <= schema.since_version]
    changed_to = next((v for v in later if _kind(v, name) not in (None, here)), None)
    changed_from = next((v for v in reversed(earlier) if _kind(v, name) not in (None, here)), None)
    fix = "pass it as an input" if here == "input" else f"pass it as {name}=..."
    if here is None:
        elsewhere = [v for v in versions if _kind(v, name) is not None]
        if not elsewhere:
            return ""
        found = elsewhere[-1]
        return (f"{name} is an {_kind(found, name)} of {schema.type} in opset {found.since_version}, "
                f"not at this opset's version of it (since opset {schema.since_version})")
    if here == given_as:
        return ""
    if changed_to is not None:
        other = _kind(changed_to, name)
        return (f"{name} is an {here} of {schema.type} before opset {changed_to.since_version} "
                f"(an {other} from opset {changed_to.since_version}): {fix}")
    if changed_from is not None:
        since = versions[versions.index(changed_from) + 1].since_version
        return (f"{name} is an {here} of {schema.type} from opset {since} "
                f"(an {_kind(changed_from, name)} before): {fix}")
    return f"{name} is an {here} of {schema.type}: {fix}"
