"""The stub ``lifeline/_lifeline.pyi`` matches the built extension module: every public name
(and every method and property of its classes) in the stub exists in the module, and vice
versa. mypy's stubtest also runs where mypy is installed."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Set

import pytest

import lifeline
from lifeline import _lifeline

STUB = Path(lifeline.__file__).parent / "_lifeline.pyi"


def stub_names() -> Dict[str, Set[str]]:
    """Top-level names of the stub, each class with its members (empty for non-classes)."""
    tree = ast.parse(STUB.read_text())
    out: Dict[str, Set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = {
                b.name
                for b in node.body
                if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))
                and (not b.name.startswith("_") or b.name == "__new__")
            }
            out[node.name] = members
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = set()
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = set()
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = set()
    return out


def module_names() -> Dict[str, Set[str]]:
    out: Dict[str, Set[str]] = {}
    for name, obj in vars(_lifeline).items():
        if name.startswith("_") and name != "__version__":
            continue
        if inspect.isclass(obj):
            own = set(vars(obj)) if not issubclass(obj, BaseException) else set()
            members = {m for m in own if not m.startswith("_")}
            if "__new__" in vars(obj) or obj.__text_signature__:
                members.add("__new__")
            out[name] = members
        else:
            out[name] = set()
    return out


def test_stub_and_module_have_the_same_names():
    stub, mod = stub_names(), module_names()
    # `_RawEvent` is a type alias of the stub only.
    stub_top = {n for n in stub if not n.startswith("_") or n == "__version__"}
    assert stub_top == set(mod), (
        f"in the stub only: {sorted(stub_top - set(mod))}; "
        f"in the module only: {sorted(set(mod) - stub_top)}"
    )
    for name in sorted(stub_top):
        s = stub[name] - {"__new__"}
        m = mod[name] - {"__new__"}
        assert s == m, f"{name}: stub only {sorted(s - m)}, module only {sorted(m - s)}"


def test_the_public_package_exports_what_it_says():
    for name in lifeline.__all__:
        assert hasattr(lifeline, name), name


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_mypy_stubtest():
    r = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "lifeline._lifeline", "--ignore-missing-stub"],
        capture_output=True,
        text=True,
        cwd=str(STUB.parent.parent),
    )
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_the_package_type_checks_strictly():
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "lifeline"],
        capture_output=True,
        text=True,
        cwd=str(STUB.parent.parent),
    )
    assert r.returncode == 0, r.stdout + r.stderr
