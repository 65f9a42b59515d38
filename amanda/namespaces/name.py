"""The parts of a namespace name, read in one place: the kernel family, the ONNX domain
within it, and the version.

>>> NamespaceName.parse("amanda/onnx/17")
NamespaceName(family='amanda/onnx', domain='', version='17')
>>> NamespaceName.parse("amanda/onnx/com.example/2").family, NamespaceName.parse("amanda/onnx/com.example/2").opset
('amanda/onnx', 2)
>>> NamespaceName.parse("amanda/onnx-ml/3").domain
'ai.onnx.ml'
>>> NamespaceName.parse("amanda/tensorflow/1.13.1").opset is None
True
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from amanda.containers.arguments import expect_str

__all__ = ["NamespaceName"]

ONNX = "amanda/onnx"


@dataclass(frozen=True)
class NamespaceName:
    """``family`` names the vocabulary and its kernels (``amanda/onnx``, ``amanda/core``,
    ``amanda/tensorflow``); ``domain`` the ONNX domain within the ONNX family (``""`` for the
    default one, ``ai.onnx.ml`` for ``amanda/onnx-ml``, ``com.example`` for
    ``amanda/onnx/com.example/2``); ``version`` the last part when it starts with a digit."""

    family: str
    domain: str = ""
    version: str | None = None

    @property
    def opset(self) -> int | None:
        """The version as an integer (None when absent or not an integer: the newest)."""
        return int(self.version) if self.version is not None and self.version.isdigit() else None

    @property
    def is_onnx(self) -> bool:
        """Whether the name is the default domain of the ONNX family."""
        return self.family == ONNX and not self.domain

    @classmethod
    def parse(cls, name: str) -> NamespaceName:
        """The parts of ``name`` (see the module docstring); a name that is not a non-empty
        string is an ArgumentError."""
        expect_str(name, "namespace", "a namespace name such as 'amanda/onnx/17'")
        return _parse(name)


@functools.lru_cache(maxsize=4096)
def _parse(name: str) -> NamespaceName:
    """The parts of a checked name (the passes read one per op, so they are kept)."""
    parts = name.split("/")
    version = parts.pop() if len(parts) > 1 and parts[-1][:1].isdigit() else None
    family = "/".join(parts)
    if family.startswith(ONNX + "/"):
        # amanda/onnx/<domain>/<v>: a domain amanda has no vocabulary for (see io/onnx/ports)
        return NamespaceName(ONNX, family[len(ONNX) + 1:], version)
    head, _, base = family.rpartition("/")
    if head == "amanda" and base.startswith("onnx-"):
        # amanda/onnx-ml is the ai.onnx.ml domain of the ONNX family (see namespaces/onnx_vocab)
        return NamespaceName(ONNX, "ai." + base.replace("-", "."), version)
    return NamespaceName(family, "", version)
