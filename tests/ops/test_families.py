"""One home per op family: each module of :mod:`amanda.opset.onnx` registers, side by side, the
kernel(s), the type rule and the gradient (a vector-Jacobian rule, or the reason there is none)
of every op it defines. The registry records which module registered each fact
(``OpDef.origins``), so the test reads the homes from the registry, not from the source."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import amanda
import amanda.opset.onnx as families
from amanda.ops import define
from amanda.ops.registry import OpDef, entries

MODULES = sorted(f"{families.__name__}.{m.name}" for m in pkgutil.iter_modules(families.__path__))
GRADIENT = ("vjp", "no_gradient", "gradient_gap")


def defined_in(module: str) -> list[OpDef]:
    """The entries any of whose facts ``module`` registered."""
    return [e for e in entries() if any(module in where for where in e.origins.values())]


def test_there_are_family_modules() -> None:
    """The package holds op families, each importable on its own name."""
    assert len(MODULES) >= 1
    for name in MODULES:
        assert importlib.import_module(name).__name__ == name


@pytest.mark.parametrize("module", MODULES)
def test_a_family_module_registers_every_fact_of_its_ops(module: str) -> None:
    """Each op the module defines has its kernels, its type rule and its gradient (or the reason
    it has none) registered from that module and from nowhere else."""
    ops_ = defined_in(module)
    assert ops_, f"{module} defines no op"
    for e in ops_:
        where = f"{e.family} {e.op_type}"
        kernels = e.origins.get("kernels", ()) + e.origins.get("session_kernels", ())
        assert set(kernels) == {module}, (where, kernels)
        assert e.origins.get("type_rule") == (module,), (where, e.origins.get("type_rule"))
        kernel_fns = {v.fn for v in (*e.kernels, *e.session_kernels)}
        assert e.type_rule not in kernel_fns and e.vjp not in kernel_fns, where  # each fact its own function
        said = [fact for fact in GRADIENT if e.origins.get(fact)]
        assert said and all(e.origins[fact] == (module,) for fact in said), (where, dict(e.origins))


def test_the_registry_records_the_module_that_registered_a_fact() -> None:
    """A definition made here is recorded as this test module's; a later registration of the
    same fact from elsewhere is recorded after it."""
    d = define("Homed", family="amanda/test-families", no_gradient="an example")
    d.kernel(lambda attrs, x: (x,))
    assert d.entry.origins["kernels"] == (__name__,) and d.entry.origins["no_gradient"] == (__name__,)
    exec(compile("d.type_rule(lambda node: [node.type(0)])", "elsewhere", "exec"),
         {"d": d, "__name__": "elsewhere"})
    assert d.entry.origins["type_rule"] == ("elsewhere",)


def test_the_executor_alone_finds_the_families_kernels() -> None:
    """``import amanda.exec`` in a fresh process (which imports the package first) finds the
    kernels the family modules register."""
    moved = next(e.op_type for e in entries() if any(MODULES[0] in w for w in e.origins.get("kernels", ())))
    code = ("import amanda.exec.kernels.registry as r, sys; "
            f"sys.exit(0 if r.lookup({moved!r}) is not None else 3)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
    assert amanda.exec.kernels.registry.lookup(moved) is not None


def test_every_onnx_kernel_is_registered_by_a_family_module() -> None:
    """Each op of the ONNX default domain that a Session can run has its kernels registered by
    a family module, and by nothing else."""
    homes = {e.op_type: set(e.origins.get("kernels", ()) + e.origins.get("session_kernels", ()))
             for e in entries("amanda/onnx", domain="") if e.kernels or e.session_kernels}
    astray = {op: where for op, where in homes.items() if not where <= set(MODULES)}
    assert astray == {} and len(homes) >= 200
