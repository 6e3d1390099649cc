"""Imports point one way: simulator <- policies <- paretosearch (STYLE.md rule 1)."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.helpers.data import ROOT

FORBIDDEN = {
    "simulator": {"policies", "paretosearch", "pymoo", "dask", "distributed", "optuna",
                  "matplotlib"},
    "policies": {"paretosearch", "pymoo", "dask", "distributed", "optuna", "matplotlib"},
}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package: str) -> None:
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN[package], f"{path}: imports {name}"


def test_a_policy_module_is_registered_without_a_line_in_the_package() -> None:
    """Importing ``policies`` imports every module in it, so no ``@register`` is lost."""
    listed = subprocess.run(
        [sys.executable, "-c", "import sys, policies; print(*sorted(sys.modules))"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
               for p in (ROOT / "policies").rglob("*.py")}
    assert modules <= set(listed), sorted(modules - set(listed))
