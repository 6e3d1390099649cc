"""Every round policy declares its memory with :class:`~simulator.rounds.view.Layout`: its
``memory()`` arrays have the declared widths, and its code reads memory columns only through
names bound to a layout (never bare numbers, never ``range()`` offsets)."""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path

import pytest

from policies import REGISTRY
from policies.round_kernel import KernelRoundPolicy
from simulator.rounds.arrays import cluster_arrays, job_view
from simulator.rounds.python_path import job_arrays_from
from simulator.rounds.view import Layout
from tests.policies.test_policies import (
    ROUND_NAMES,
    SHARING_NAMES,
    random_sharing_state,
    random_state,
    ready,
)

ROOT = Path(__file__).resolve().parents[2]
KERNEL_NAMES = [n for n in ROUND_NAMES if issubclass(REGISTRY[n], KernelRoundPolicy)
                and REGISTRY[n].kernels()]
ARRAYS = ("f", "i", "g", "gi")


def test_layout_offsets_width_and_open_end() -> None:
    L = Layout(a=1, b=3, c=0)
    assert (L.A, L.B, L.C, L.width, L.open) == (0, 1, 4, 4, True)
    assert not Layout(a=2).open and Layout(a=2).width == 2
    with pytest.raises(AttributeError, match="no memory block 'd'"):
        _ = L.D


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_memory_has_the_declared_widths(name: str) -> None:
    shares = name in SHARING_NAMES
    state = (random_sharing_state(3, 20, "ojpp-1080ti") if shares
             else random_state(3, 20, "gavel-hetero-60"))
    policy = ready(name)
    assert isinstance(policy, KernelRoundPolicy)
    memory = policy.memory(cluster_arrays(state.cluster, state.speeds, state.scaling,
                                          state.sharing),
                           job_view(job_arrays_from(state, shares)))
    assert set(policy.layouts) <= set(ARRAYS)
    for array in ARRAYS:
        width = getattr(memory, array).shape[-1]
        layout = policy.layouts.get(array)
        if layout is None:
            assert width == 0, f"{name}: memory.{array} has {width} columns, no Layout"
        elif layout.open:
            assert width >= layout.width, (name, array, layout)
        else:
            assert width == layout.width, (name, array, layout)


def _module_path(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    return Path(spec.origin) if spec is not None and spec.origin else None


@cache
def _bindings(path: Path) -> dict[str, ast.AST]:
    """Module-level names of ``path``: each to its assigned value or its ``ImportFrom``."""
    out: dict[str, ast.AST] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        out[name.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node.value if node.value is not None else node
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                out[alias.asname or alias.name] = node
    return out


def _resolve(path: Path, name: str) -> tuple[Path, ast.AST] | None:
    """Where ``name`` (seen in ``path``) is bound, following ``from m import name``."""
    bound = _bindings(path).get(name)
    if isinstance(bound, ast.ImportFrom):
        origin = _module_path(str(bound.module))
        return _resolve(origin, name) if origin is not None else None
    return (path, bound) if bound is not None else None


def _is_layout(path: Path, name: str) -> bool:
    found = _resolve(path, name)
    return (found is not None and isinstance(found[1], ast.Call)
            and isinstance(found[1].func, ast.Name) and found[1].func.id == "Layout")


def _block_widths(path: Path) -> set[str]:
    """Names given as a block's width in a ``Layout(...)`` call of ``path``."""
    return {kw.value.id for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "Layout"
            for kw in node.keywords if isinstance(kw.value, ast.Name)}


def _from_layout(path: Path, name: str) -> bool:
    """Whether constant ``name`` is a layout's offset or width (``X = L.NAME``,
    ``X = L.width``), or a block width given to a layout."""
    found = _resolve(path, name)
    if found is None:
        return False
    where, value = found
    if name in _block_widths(where):
        return True
    return any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
               and _is_layout(where, n.value.id) for n in ast.walk(value))


def _column_index(node: ast.Subscript) -> ast.AST | None:
    """The column part of a memory subscript (``f``/``i``: after the row; ``g``/``gi``: all),
    or None."""
    assert isinstance(node.value, ast.Attribute)
    if node.value.attr in ("f", "i"):
        index = node.slice
        return index.elts[1] if isinstance(index, ast.Tuple) and len(index.elts) > 1 else None
    return node.slice


def _parts(node: ast.AST) -> list[ast.AST]:
    """``node`` and what it is made of, less other subscripts' contents (``a.shape[0]``; a
    memory subscript inside is checked on its own)."""
    out = [node]
    for child in ast.iter_child_nodes(node):
        out += [child] if isinstance(child, ast.Subscript) else _parts(child)
    return out


def _offenses(path: Path, root: Path = ROOT) -> list[str]:
    """Memory columns ``path`` reads or writes by number, or through a constant that is not
    a layout's."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                and node.value.attr in ARRAYS):
            continue
        column = _column_index(node)
        for part in _parts(column) if column is not None else ():
            where = f"{path.relative_to(root)}:{node.lineno}"
            if (isinstance(part, ast.Constant) and isinstance(part.value, int)
                    and not isinstance(part.value, bool)):
                out.append(f"{where}: column {part.value} by number")
            elif (isinstance(part, ast.Name) and len(part.id) > 1
                  and part.id.upper() == part.id and not _from_layout(path, part.id)):
                out.append(f"{where}: {part.id} is not a Layout's offset")
    return out


def test_kernels_read_memory_through_layout_names() -> None:
    paths = sorted((ROOT / "policies").rglob("*.py"))
    assert paths
    offenses = [o for p in paths for o in _offenses(p)]
    assert not offenses, "\n".join(offenses)


def test_the_check_catches_bare_offsets(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("QUEUE, PLACE = range(2)\n"
                   "def k(M, r):\n"
                   "    M.i[r, QUEUE] = M.gi[0]\n"
                   "    M.f[r, 1:3] = 0.0\n")
    good = tmp_path / "good.py"
    good.write_text("from simulator.rounds.view import Layout\n"
                    "I = Layout(queue=1, place=1)\n"
                    "QUEUE = I.QUEUE\n"
                    "def k(M, r, m):\n"
                    "    M.i[r, QUEUE] = M.i[r, m + QUEUE]\n")
    found = sorted(o.split(": ", 1)[1] for o in _offenses(bad, tmp_path))
    assert found == ["QUEUE is not a Layout's offset", "column 0 by number", "column 1 by number",
                     "column 3 by number"]
    assert _offenses(good, tmp_path) == []


def test_style_checklist_names_its_checks() -> None:
    """The tests STYLE.md's new-policy checklist names exist; the memory step names this
    one."""
    section = (ROOT / "STYLE.md").read_text().split("## Adding a policy")[1].split("\n## ")[0]
    named = set(re.findall(r"`(tests/[\w/]+\.py)", section))
    assert "tests/policies/test_memory_layout.py" in named
    assert all((ROOT / path).is_file() for path in named), named
