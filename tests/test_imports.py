"""Imports point one way: simulator <- policies <- paretosearch (STYLE.md rule 1)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.data import ROOT

FORBIDDEN = {
    "simulator": {"policies", "paretosearch", "pymoo", "dask", "distributed", "optuna",
                  "matplotlib"},
    "policies": {"paretosearch", "pymoo", "dask", "distributed", "optuna", "matplotlib"},
    # a search journals through its own Journal contract and never imports the run folder;
    # the run folder keeps that journal and imports nothing else of the search
    "paretosearch/search": {"paretosearch.runs", "paretosearch.service", "paretosearch.cli"},
    "paretosearch/runs": {"paretosearch.search", "paretosearch.service", "paretosearch.cli"},
    # what a search is (config, settings, objectives) is read by both, and imports neither
    **{f"paretosearch/{name}.py": {"paretosearch.search", "paretosearch.runs",
                                   "paretosearch.service", "paretosearch.cli", "pymoo",
                                   "dask", "distributed"}
       for name in ("config", "settings", "objectives", "samples", "definition")},
}
ALLOWED = {"paretosearch/runs": {"paretosearch.search.journal"}}
"""Modules a package may import although ``FORBIDDEN`` rules out their parent."""


def _imported(path: Path) -> list[str]:
    """Every module ``path`` imports, at any depth of its code."""
    return [name for node in ast.walk(ast.parse(path.read_text()))
            for name in ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package: str) -> None:
    paths = [ROOT / package] if package.endswith(".py") else (ROOT / package).rglob("*.py")
    for path in paths:
        for name in set(_imported(path)) - ALLOWED.get(package, set()):
            assert not any(name == f or name.startswith(f + ".") for f in FORBIDDEN[package]), (
                f"{path}: imports {name}")


ENGINE = ("simulator.rounds.arrays", "simulator.rounds.plan", "simulator.rounds.engine",
          "simulator.rounds.driver", "simulator.rounds.python_path")
"""The round engine's own modules: a round policy sees the engine through
``simulator.rounds.view`` only (its read-only job and state views and its memory)."""
BRIDGES = {"policies/round_kernel.py": {"simulator.rounds.python_path"},
           "policies/compiling.py": {"simulator.rounds.engine"}}
"""Where a policy module may reach further: the Python on-ramp that runs a kernel on a
``RoundState``, and the command that compiles the engine's kernels ahead."""


def test_round_policies_import_only_the_view() -> None:
    for path in (ROOT / "policies").rglob("*.py"):
        allowed = BRIDGES.get(str(path.relative_to(ROOT)), set())
        reached = {n for n in _imported(path) if n in ENGINE} - allowed
        assert not reached, f"{path}: imports {sorted(reached)}; use simulator.rounds.view"


def _graph(package: str) -> dict[str, set[str]]:
    """``package``'s modules and the modules of it each imports (at any depth of its code)."""
    def name(p: Path) -> str:
        return ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")

    modules = {name(p): p for p in (ROOT / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in modules.items():
        graph[mod] = set()
        for imported in _imported(path):
            while imported and imported not in modules:  # a name imported from a module
                imported = imported.rpartition(".")[0]
            if imported and imported != mod and imported != package:
                graph[mod].add(imported)
    return graph


@pytest.mark.parametrize("package", ["simulator", "policies", "paretosearch"])
def test_no_import_circle(package: str) -> None:
    """No module of ``package`` imports, through others, one that imports it (the package's
    ``__init__``, which gathers its public names, aside)."""
    graph = _graph(package)
    done: set[str] = set()

    def visit(mod: str, path: list[str]) -> None:
        if mod in path:
            circle = [*path[path.index(mod):], mod]
            raise AssertionError("import circle: " + " -> ".join(circle))
        if mod in done:
            return
        for nxt in sorted(graph[mod]):
            visit(nxt, [*path, mod])
        done.add(mod)

    for mod in sorted(graph):
        visit(mod, [])


def test_a_policy_module_is_registered_without_a_line_in_the_package() -> None:
    """Importing ``policies`` imports every module in it, so no ``@register`` is lost."""
    listed = subprocess.run(
        [sys.executable, "-c", "import sys, policies; print(*sorted(sys.modules))"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
               for p in (ROOT / "policies").rglob("*.py")}
    assert modules <= set(listed), sorted(modules - set(listed))


HEAVY = ("pymoo", "distributed", "matplotlib", "plotly", "scipy.optimize", "optuna", "sklearn")
PROBE = """
import sys
from numba.core.dispatcher import Dispatcher
import paretosearch, policies, paretosearch.cli.main, paretosearch.config
paretosearch.__version__
compiled = [f"{name}.{value.__name__}" for name, module in list(sys.modules.items())
            if name.split(".")[0] in ("simulator", "policies")
            for value in vars(module).values()
            if isinstance(value, Dispatcher) and value.signatures]
print(compiled, [m for m in HEAVY if m in sys.modules])
"""


def test_imports_and_help_compile_nothing_and_load_no_search_machinery(tmp_path: Path) -> None:
    """On an empty kernel cache, importing everything, ``--help``, ``policies``, ``profiles``
    and an argument error compile no kernel (none in memory, none saved) and import none of
    the heavy modules only a search, a plot or a solver needs."""
    env = {**os.environ, "PARETOSEARCH_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    probe = subprocess.run([sys.executable, "-c", PROBE.replace("HEAVY", repr(HEAVY))],
                           cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "[] []", probe.stdout
    cli = [sys.executable, "-m", "paretosearch.cli"]
    for argv, status in ((["--help"], 0), (["simulate", "--help"], 0), (["search", "--help"], 0),
                         (["compile", "--help"], 0), (["policies"], 0), (["profiles"], 0),
                         (["simulate", "--no-such-option"], 2)):
        done = subprocess.run([*cli, *argv], cwd=ROOT, env=env, capture_output=True, text=True)
        assert done.returncode == status, (argv, done.stderr)
        assert "compiling" not in done.stderr, argv
    assert list(tmp_path.rglob("*.nbi")) == []  # numba's index of saved kernels
