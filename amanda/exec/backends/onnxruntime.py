"""The onnxruntime device: a part of a model exported with amanda's ONNX exporter and run by
an ``onnxruntime.InferenceSession``.

A device ``onnxruntime:cpu`` runs through onnxruntime's CPU provider, ``onnxruntime:cuda``
through its CUDA provider (the ``gpu`` extra: ``onnxruntime-gpu``). An op goes to the device
when its namespace is an ONNX one (``amanda/onnx/<n>``, ``amanda/onnx-ml/<n>``) and the
provider registers a kernel for its type or ONNX defines it by a function body
(:func:`supported_op`); everything else stays on
numpy. A part is exported once per input signature (dtypes and shapes of the values it
receives); a part that the exporter or onnxruntime refuses runs on numpy instead, with a
warning naming the ops.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np

from amanda.containers import CONTROL, SELF, Container, Edge, Endpoint, Port
from amanda.errors import ArgumentError, ExecutionError, suggest
from amanda.exec.dist.partition import DIST, Part

__all__ = ["ORT_PREFIX", "PROVIDERS", "OrtPart", "check_device", "is_ort_device", "onnx_form", "part_proto", "provider_of",
           "supported_op"]

ORT_PREFIX = "onnxruntime:"
PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
_TOKEN = np.zeros(0, np.bool_)  # what a Send of a control edge carries


def is_ort_device(device: Any) -> bool:
    """Whether ``device`` names an onnxruntime device (``onnxruntime:<kind>``)."""
    return isinstance(device, str) and device.startswith(ORT_PREFIX)


def _onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise ExecutionError("the onnxruntime device needs onnxruntime: pip install 'amanda[onnx]' "
                             "(or 'amanda[gpu]' for onnxruntime:cuda)", path="device",
                             expected="onnxruntime installed", found="not installed") from None
    return onnxruntime


def provider_of(device: str) -> str:
    """The onnxruntime execution provider that runs ``device`` (``onnxruntime:cpu`` ->
    ``CPUExecutionProvider``); an ArgumentError for an unknown kind."""
    kind = device[len(ORT_PREFIX):]
    if kind not in PROVIDERS:
        hint = suggest(kind, PROVIDERS)
        raise ArgumentError.at("device", f"one of {', '.join(ORT_PREFIX + k for k in PROVIDERS)}",
                               repr(device), hint)
    return PROVIDERS[kind]


def check_device(device: str) -> str:
    """The provider of ``device`` after checking that this onnxruntime has it: a missing CUDA
    provider is an ExecutionError saying to install the ``gpu`` extra on a machine with a GPU."""
    provider = provider_of(device)
    available = _onnxruntime().get_available_providers()
    if provider not in available:
        raise ExecutionError(
            f"device {device!r}: this onnxruntime has no {provider} (it has {', '.join(available)}); "
            "install amanda[gpu] (onnxruntime-gpu) on a machine with a CUDA GPU, or place the ops on "
            "onnxruntime:cpu", path="device", expected=f"onnxruntime with {provider}",
            found=", ".join(available))
    return provider


# lists onnxruntime's kernels as JSON, in a child process (see _kernel_table); its output is
# read as plain data only
_LISTING = ("import json; from onnxruntime.capi import _pybind_state as p; "
            "print(json.dumps([[k.provider, k.domain or '', k.op_name] for k in p.get_all_opkernel_def()]))")
_HOST_ONLY = {"CPUExecutionProvider", "AzureExecutionProvider"}


@cache
def _kernel_table() -> frozenset[tuple[str, str, str]] | None:
    """(provider, domain, op type) of every kernel onnxruntime registers; None where it cannot
    say. onnxruntime-gpu's listing crashes its process where a provider's library does not load
    (1.31 without TensorRT, seen on an H100), so a GPU build lists them in a child process."""
    if set(_onnxruntime().get_available_providers()) <= _HOST_ONLY:
        from onnxruntime.capi import _pybind_state

        return frozenset((k.provider, k.domain or "", k.op_name) for k in _pybind_state.get_all_opkernel_def())
    try:
        done = subprocess.run([sys.executable, "-c", _LISTING], capture_output=True, text=True, timeout=120, check=True)
        return frozenset((str(p), str(d), str(o)) for p, d, o in json.loads(done.stdout))
    except (subprocess.SubprocessError, OSError, ValueError, TypeError):
        # every op ONNX defines is offered to it then; a part it refuses warns, naming the op
        return None


@cache
def _kernels(provider: str) -> frozenset[tuple[str, str]] | None:
    """(domain, op type) of every kernel a session on ``provider`` runs: its own and, for a GPU
    provider, the CPU provider's, which onnxruntime places the rest on; None where unknown."""
    table = _kernel_table()
    if table is None:
        return None
    return frozenset((d, o) for p, d, o in table if p in (provider, PROVIDERS["cpu"]))


def supported_op(op: Container, namespace: Any, provider: str) -> bool:
    """Whether onnxruntime's ``provider`` can run ``op`` (of effective ``namespace``)."""
    from amanda.engines import engine

    if not isinstance(namespace, str) or not namespace.startswith("amanda/onnx"):
        return False
    domain = engine("onnx_domain")(namespace)  # installed by amanda.io, above the executor
    if domain is None:
        return False
    kernels = _kernels(provider)
    if kernels is None:  # unknown: every op ONNX defines; onnxruntime refuses a part it lacks
        return op.type == "Constant" or _is_defined(op.type, *domain)
    return op.type == "Constant" or (domain[0], op.type) in kernels or _is_function(op.type, *domain)


@cache
def _is_function(op_type: str, domain: str, opset: int) -> bool:
    """Whether ONNX defines ``op_type`` by a function body (onnxruntime expands it)."""
    import onnx.defs

    try:
        return bool(getattr(onnx.defs.get_schema(op_type, opset, domain), "has_function", False))
    except onnx.defs.SchemaError:
        return False


@cache
def _is_defined(op_type: str, domain: str, opset: int) -> bool:
    """Whether ONNX defines ``op_type`` at ``opset`` of ``domain``."""
    import onnx.defs

    try:
        onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return False
    return True


def _data_edges(c: Container) -> list[Edge]:
    """The part's edges that carry values (no control edges, no edge into its ``done`` port)."""
    return [e for e in c.edges if e.src.port != CONTROL and e.dst.port != CONTROL
            and not (e.dst.op == SELF and e.dst.port == "done")]


def _boundary(c: Container, edges: list[Edge]) -> tuple[dict[str, str], dict[str, Endpoint]]:
    """Recv op -> the input port it takes its value from; Send op -> the value it sends."""
    recv_port: dict[str, str] = {}
    send_src: dict[str, Endpoint] = {}
    for e in edges:
        if e.dst.op != SELF and c.child(e.dst.op[0]).attrs.get("namespace") == DIST:
            if e.src.op == SELF:
                recv_port[e.dst.op[0]] = e.src.port
            else:
                send_src[e.dst.op[0]] = e.src
    return recv_port, send_src


def onnx_form(part: Part, values: Mapping[str, Any],
              declared: Mapping[str, Any] | None = None) -> tuple[Container, list[str]]:
    """The part as a container the ONNX exporter writes: Recv and Send ops removed, control
    edges dropped, its inputs typed from ``values``; and the output ports that carry control
    tokens (no value: the part gives an empty token for them). ``declared``: input port -> the
    shape the model declares for the feed it takes; where the value fits it, the port keeps
    its symbolic dimensions (see :func:`_type_attrs`)."""
    c = part.container
    kept = [ch for ch in c.children if ch.attrs.get("namespace") != DIST]
    data = _data_edges(c)
    recv_port, send_src = _boundary(c, data)
    tokens, outputs, edges = [], [], []
    for e in data:
        src, dst = e.src, e.dst
        if dst.op != SELF and (dst.op[0] in recv_port or dst.op[0] in send_src):
            continue
        if src.op != SELF and src.op[0] in recv_port:
            src = Endpoint(SELF, recv_port[src.op[0]])
        elif src.op != SELF and src.op[0].startswith("send "):
            if src.op[0] not in send_src:
                tokens.append(dst.port)
                continue
            src = send_src[src.op[0]]
        if dst.op == SELF:
            outputs.append(dst.port)
        edges.append(Edge(src, dst))
    declared = declared or {}
    inputs = [Port(p, attrs=_type_attrs(values[p], p, declared.get(p))) for p in c.input_names]
    form = Container("Part", c.name, inputs=inputs, outputs=[Port(p) for p in outputs], children=kept,
                     edges=edges)
    return form, tokens


def part_proto(form: Container) -> Any:
    """The ONNX model onnxruntime runs for a part's :func:`onnx_form`: amanda's export without
    the types of intermediate values (``value_info``). Files as exporters write them carry none,
    and onnxruntime infers them itself; given them, its optimiser fuses more (``Add`` and
    ``LayerNormalization`` into ``SkipLayerNormalization``, for one), which ran a BERT 1.16-1.39x
    slower at 2 threads than the same model without them (benchmarks/README.md)."""
    from amanda.engines import engine

    proto = engine("to_onnx")(form)  # installed by amanda.io, above the executor
    del proto.graph.value_info[:]
    return proto


def _type_attrs(value: Any, port: str, declared: Any = None) -> dict[str, Any]:
    """A part input's type: ``value``'s dtype, and the model's ``declared`` shape where
    ``value`` fits it (its named dimensions stay named), else ``value``'s shape. With every
    dimension fixed, onnxruntime's optimiser folds the shape computations and rewrites a
    MatMul and Add over 3-d values as Reshape, Gemm, Reshape (and BiasGelu as Gemm and Gelu):
    a graph other than the original file's, which ran BERT and ConvNeXt slower."""
    if not isinstance(value, np.ndarray):
        raise ArgumentError.at(port, "an array (onnxruntime takes tensors only)", type(value).__name__)
    shape = list(value.shape)
    if isinstance(declared, (list, tuple)) and len(declared) == len(shape) and all(
            isinstance(d, str) or d == n for d, n in zip(declared, shape)):
        shape = list(declared)
    return {"dtype": value.dtype.name, "shape": shape}


def _signature(values: Mapping[str, Any]) -> tuple:
    return tuple((k, v.dtype.str, v.shape) if isinstance(v, np.ndarray) else (k, type(v)) for k, v in values.items())


class OrtPart:
    """One part on an onnxruntime device: an InferenceSession per input signature, made on
    first use; ``fallback`` (a numpy Session over the part) runs it where onnxruntime refuses;
    ``spin``: let its threads spin after a run (off where other parts follow)."""

    def __init__(self, part: Part, provider: str, threads: int, fallback: Any, spin: bool = True,
                 declared: Mapping[str, Any] | None = None) -> None:
        self.part, self.provider, self.threads, self.fallback = part, provider, threads, fallback
        self.declared = declared  # input port -> the model's declared shape of its feed
        # onnxruntime's intra-op threads spin for a while after a run: with several parts, the
        # next part's threads would compete with them for the cores
        self.spin = spin
        self.fell_back = False  # whether the last run ran on numpy
        self._sessions: dict[tuple, Any] = {}  # signature -> (session, input names, outputs, tokens) or None

    def _build(self, values: Mapping[str, Any]) -> Any:
        ort = _onnxruntime()
        proto = None
        try:
            form, tokens = onnx_form(self.part, values, self.declared)
            proto = part_proto(form)
            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            if not self.spin:
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = ort.InferenceSession(proto.SerializeToString(), options, providers=[self.provider])
        except Exception as exc:  # the exporter's or onnxruntime's refusal: run this part on numpy
            warnings.warn(f"onnxruntime refused part {self.part.name!r} ({_culprits(exc, proto, self.part)}); "
                          f"it runs on numpy: {exc}", stacklevel=5)
            return None
        if self.provider not in session.get_providers():  # onnxruntime falls back to its CPU silently
            hint = "" if self.provider == PROVIDERS["cpu"] else (
                "; check the CUDA and cuDNN libraries onnxruntime-gpu needs (onnxruntime.preload_dlls()), "
                "or place the part on onnxruntime:cpu")
            raise ExecutionError(
                f"part {self.part.name!r}: onnxruntime could not start its {self.provider} (its session runs on "
                f"{', '.join(session.get_providers())}){hint}", path=self.part.name,
                expected=self.provider, found=", ".join(session.get_providers()))
        names = [i.name for i in proto.graph.input]
        outs = [o.name for o in proto.graph.output]
        return session, list(zip(form.input_names, names)), list(zip(form.output_names, outs)), tokens

    def run(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The part's output ports' values given its input ports' ``values``."""
        key = _signature(values)
        if key not in self._sessions:
            self._sessions[key] = self._build(values)
        built = self._sessions[key]
        self.fell_back = built is None
        if built is None:
            return self.fallback(values)
        session, inputs, outputs, tokens = built
        try:
            results = session.run([o for _, o in outputs], {name: values[port] for port, name in inputs})
        except Exception as exc:
            raise ExecutionError(f"onnxruntime failed to run part {self.part.name!r}: {exc}", path=self.part.name,
                                 expected="a run onnxruntime completes", found=type(exc).__name__) from None
        out = {port: value for (port, _), value in zip(outputs, results)}
        for port in tokens:
            out[port] = _TOKEN
        return out


def _culprits(exc: Exception, proto: Any, part: Part) -> str:
    """The ops an error message names (by node name or op path), else every op type of the part."""
    text = str(exc)
    named = []
    if proto is not None:
        named = [f"{n.op_type} `{n.name}`" for n in proto.graph.node if n.name and n.name in text]
    if not named:
        named = [f"{ch.type} `{ch.name}`" for ch in part.container.children
                 if ch.attrs.get("namespace") != DIST and ch.name in text]
    if not named:
        named = sorted({ch.type for ch in part.container.children if ch.attrs.get("namespace") != DIST})
        return "ops " + ", ".join(named)
    return "op " + ", ".join(named)
