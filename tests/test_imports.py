"""Imports point one way: simulator <- policies <- paretosearch (STYLE.md rule 1)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
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
