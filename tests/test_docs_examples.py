"""The documentation's examples run as written: every ```bash and ```python block of README.md,
the user guide (docs/guide/*.md) and docs/scaling.md, in order, page by page, each page in a
scratch copy of the repository root (so ``../shared/data``, ``examples/`` and ``deploy/``
resolve as they do for a reader; ``paretosearch`` and ``python`` are this checkout's). A block
that needs a real cluster starts with a visible ``# needs a cluster: REASON`` line and is
skipped with that reason; the set-up blocks' install is what ``.ci/run`` does, so only the
command after it runs here. The reference pages' example profile and retune spec load."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from paretosearch.service.retune_spec import RetuneSpec
from simulator import load_profile

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md")),
         ROOT / "docs" / "scaling.md"]
NEEDS_CLUSTER = "# needs a cluster:"
INSTALL = "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && "
"""The README's set-up blocks start with the install .ci/run does from scratch."""
NOISE = ("Worker process still alive", "is already in use", "Traceback")
"""What a normal run must not print (Dask's teardown and port warnings, a crash)."""
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_LEFT_OUT = {".git", ".venv", "runs", "examples", "site", "tests", ".pytest_cache",
             ".mypy_cache", ".ruff_cache", "__pycache__"}


def blocks(page: Path) -> list[tuple[str, str, int]]:
    """The page's fenced blocks: (language, code, line of the fence)."""
    text = page.read_text()
    return [(m[1], m[2], text.count("\n", 0, m.start()) + 1) for m in _FENCE.finditer(text)]


def _sandbox(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A folder that looks like the repository root beside ``shared/``, and the environment
    whose ``paretosearch`` and ``python`` run this checkout."""
    repo = tmp / "repo"
    repo.mkdir()
    (tmp / "shared").symlink_to(ROOT.parent / "shared")
    for entry in ROOT.iterdir():  # the code is imported from ROOT (PYTHONPATH), never
        # through a link here: numba keys its cache on the source's path
        if entry.name not in _LEFT_OUT and not (entry / "__init__.py").exists():
            (repo / entry.name).symlink_to(entry)
    shutil.copytree(ROOT / "examples", repo / "examples")  # its outputs land beside it
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name, run in (("paretosearch", "-m paretosearch.cli"), ("python", ""),
                      ("python3", "")):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" {run} "$@"\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120",
           "PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent),
                                    os.environ.get("PATH", "")])}
    env.pop("PARETOSEARCH_DASK_CLUSTER", None)
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return repo, env


def _runnable(page: Path, lang: str, code: str, line: int) -> str | None:
    """The code to run for a block, or None where it is not run here (with why checked)."""
    if lang not in ("bash", "python"):
        return None
    if code.startswith(NEEDS_CLUSTER):
        reason = code.splitlines()[0][len(NEEDS_CLUSTER):].strip()
        assert len(reason) > 10, f"{page.name}:{line}: say which cluster it needs and why"
        return None
    if code.startswith(INSTALL):
        ci = (ROOT / ".ci" / "run").read_text()
        assert ".venv/bin/python -m pip install --quiet -e '.[dev]'" in ci
        command = code[len(INSTALL):].strip()
        if command == ".venv/bin/python -m pytest -q":  # what .ci/run runs: this suite
            assert f"\n{command}\n" in ci
            return None
        return command.removeprefix(".venv/bin/")
    return code


@pytest.mark.slow
@pytest.mark.dask
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run(page: Path, tmp_path: Path) -> None:
    repo, env = _sandbox(tmp_path)
    ran = skipped = 0
    for lang, code, line in blocks(page):
        script = _runnable(page, lang, code, line)
        if script is None:
            skipped += lang in ("bash", "python")
            continue
        argv = ["bash", "-euo", "pipefail", "-c", script] if lang == "bash" else \
            [sys.executable, "-c", script]
        done = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True,
                              timeout=900)
        said = done.stdout + done.stderr
        where = f"{page.relative_to(ROOT)}:{line}"
        assert done.returncode == 0, f"{where} exited {done.returncode}:\n{script}\n{said[-3000:]}"
        assert done.stdout.strip(), f"{where} printed nothing:\n{script}"
        for noise in NOISE:
            assert noise not in said, f"{where} printed {noise!r}:\n{said[-3000:]}"
        ran += 1
    assert ran or skipped, f"{page.name} has no example"


def _yaml_block(page: str) -> str:
    found = [code for lang, code, _ in blocks(ROOT / "docs" / "reference" / page)
             if lang == "yaml"]
    assert len(found) == 1
    return found[0]


def test_reference_profile_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "lab-48.yaml"
    path.write_text(_yaml_block("cluster-profile.md"))
    profile = load_profile(path)
    # every field of the format is in the example
    assert profile.gpus_by_type == {"a100": 32, "v100": 16}
    assert profile.slowdown_curves["v100"].linear == (0.002, 0.0)
    assert (profile.inter_node_factor, profile.restart_overhead_s, profile.suspend_overhead_s,
            profile.collision_slowdown) == (0.9, 30.0, 5.0, 1.2)


def test_reference_retune_spec_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "retune.yaml"
    path.write_text(_yaml_block("retune-spec.md"))
    spec = RetuneSpec.load(path)
    assert (spec.min_jobs, spec.max_jobs, spec.workers, spec.config.slo_mix) == (
        500, 4000, 8, "MIX2")
    assert spec.config.settings.n_offsprings == 105 and spec.config.fixed == {"zeta_min": 0.5}


def test_cli_reference_lists_every_command() -> None:
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        from cli_reference import cli_reference
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    from paretosearch.cli.main import _parser

    page = cli_reference()
    commands = next(a for a in _parser()._actions if a.dest == "command").choices
    assert commands and all(f"## `paretosearch {name}`" in page for name in commands)
    assert "--objective METRIC:MEASURE" in page and "--set NAME=VALUE" in page
