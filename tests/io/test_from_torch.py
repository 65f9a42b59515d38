"""``amanda.from_torch`` captures a torch module with its module tree: every module that ran
has its container at its ``named_modules()`` path and the container computes the module's eager
outputs. Needs torch (skipped without it: CI has none); without torch it names the extra."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import amanda


def test_without_torch_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """With torch missing, from_torch raises a FormatError saying to install ``amanda[torch]``."""
    monkeypatch.setitem(sys.modules, "torch", None)  # "import torch" now raises ImportError
    with pytest.raises(amanda.FormatError, match=r"amanda\[torch\]"):
        amanda.from_torch(object(), ())


@pytest.mark.parametrize("option, value", [("input_names", "x"), ("output_names", [3]), ("opset", "17"),
                                           ("dynamo", "yes"), ("example_kwargs", [1]), ("hierarchy", "nmaes")])
def test_wrong_options_are_refused_before_torch_runs(option: str, value: object) -> None:
    """Each option of the wrong type is an ArgumentError naming it, with or without torch."""
    with pytest.raises(amanda.ArgumentError, match=option.split("_")[0]):
        amanda.from_torch(object(), (), **{option: value})


def _modules():  # type: ignore[no-untyped-def]
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(8)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 8))

        def forward(self, x):  # type: ignore[no-untyped-def]
            return x + self.mlp(self.norm(x))

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Linear(4, 8)
            self.blocks = torch.nn.ModuleList([Block(), Block()])
            self.unused = torch.nn.Linear(8, 8)  # never runs: no container
            self.head = torch.nn.Linear(8, 3)

        def forward(self, x):  # type: ignore[no-untyped-def]
            x = self.embed(x)
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    torch.manual_seed(0)
    return torch, Net().eval()


def _ran(torch, module, x) -> list[str]:  # type: ignore[no-untyped-def]
    names = {id(m): n for n, m in module.named_modules()}
    seen: list[str] = []
    hooks = [m.register_forward_pre_hook(lambda mod, args: seen.append(names[id(mod)])) for m in module.modules()]
    with torch.no_grad():
        module(x)
    for hook in hooks:
        hook.remove()
    return [n for n in dict.fromkeys(seen) if n]


def _expected_path(ran: list[str], qualified: str) -> tuple[str, ...]:
    """The module's path: its name relative to each module that called it on the way down
    (a ModuleList such as ``blocks`` is never called, so ``blocks.0`` is one name)."""
    callers = [m for m in sorted(ran, key=len) if qualified == m or qualified.startswith(m + ".")]
    names, parent = [], ""
    for module in callers:
        names.append(module[len(parent) + 1:] if parent else module)
        parent = module
    return tuple(names)


def _find(model: amanda.Container, path: tuple[str, ...]) -> amanda.Container | None:
    node = model
    for name in path:
        if not node.has_child(name):
            return None
        node = node.child(name)
    return node


@pytest.mark.parametrize("dynamo", [True, False])
def test_the_captured_tree_matches_named_modules_and_outputs(dynamo: bool) -> None:
    """Each module that ran (``blocks.0.mlp.0`` ...) is the container at its path split at its
    callers, whose ``scope`` is its qualified name; with the dynamo exporter its type is the
    class name; a module that never ran has no container; the outputs equal eager torch's."""
    torch, net = _modules()
    x = torch.randn(2, 5, 4)
    model = amanda.from_torch(net, (x,), input_names=["x"], output_names=["y"], dynamo=dynamo)
    classes = {n: type(m).__name__ for n, m in net.named_modules()}
    ran = _ran(torch, net, x)
    for qualified in ran:
        found = _find(model, _expected_path(ran, qualified))
        assert found is not None and found.attrs["scope"] == qualified, qualified
        if dynamo:
            assert found.type == classes[qualified]
    assert _find(model, ("unused",)) is None
    with torch.no_grad():
        want = net(x).numpy()
    (got,) = amanda.Session(model).run(["y"], {"x": x.numpy()})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_bad_arguments_are_refused() -> None:
    """A non-module is an ArgumentError; a module torch cannot export is a FormatError."""
    torch, _ = _modules()
    with pytest.raises(amanda.ArgumentError, match="torch.nn.Module"):
        amanda.from_torch(lambda t: t, (torch.ones(2),))

    class Bad(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            return x * 2 if x.sum() > 0 else -x  # a branch on a value: torch.export refuses it

    with pytest.raises(amanda.FormatError, match="Bad"):
        amanda.from_torch(Bad(), (torch.ones(2),))
