"""What starting costs: whole-process CPU-seconds of the first commands on a machine, cold (an
empty kernel cache) and warm, as ratios to ``python -c "import numpy, pandas, numba"`` timed
in the same run.

Each figure is one child process (user + system CPU of it and its children, from
``resource.getrusage(RUSAGE_CHILDREN)``): ``--help``; ``import paretosearch``; the first
``simulate`` of each policy family, each on its own empty cache (its engine and policy
compile), then again warm; the default ``search`` (its embedded LocalCluster) until its
first progress line, cold and warm; and the size of each family's cache. A cold ``--help``
must leave the cache empty: it compiles nothing.

Run from the project root: ``python benchmarks/bench_startup.py`` (``--families pcs,hetero``
to measure fewer, the first before the search and the rest after it; ``--no-search``). Rows
print as they are measured. CPU heavy: minutes on two cores.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GAVEL = ROOT.parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"
CLI = [sys.executable, "-m", "paretosearch.cli"]
FAMILIES = {
    "pcs": ["--policy", "wfq", "--generate", "1000"],
    "hetero": ["--policy", "hadar", "--profile", "gavel-hetero-60", "--generate", "300",
               "--gavel", str(GAVEL), "--jobs-per-hr", "6"],
    "unisched": ["--policy", "unisched", "--profile", "unisched-c96", "--generate", "300",
                 "--slo-mix", "MIX2", "--load", "1.2"],
    "horus": ["--policy", "horus", "--profile", "horus-128x8", "--generate", "300",
              "--sharing"],
    "ojpp": ["--policy", "ojpp", "--profile", "ojpp-1080ti", "--generate", "300", "--sharing"],
}
"""Family -> the first ``simulate`` measured (the README's example workloads, small)."""


def _cpu(argv: list[str], cache: Path, *, until: str | None = None) -> float:
    """CPU-s of ``argv`` run to its end (or, with ``until``, to the first output line that
    starts so, then interrupted as Ctrl-C would, and waited for with its workers)."""
    env = {**os.environ, "PARETOSEARCH_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    env.pop("NUMBA_CACHE_DIR", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as work:
        proc = subprocess.Popen(argv, cwd=work, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            if until is not None and line.startswith(until):
                proc.send_signal(signal.SIGINT)
                break
        proc.communicate()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 130):
        raise SystemExit(f"{' '.join(argv)} failed with exit status {proc.returncode}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _size_mib(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def _kernels(folder: Path) -> int:
    """Compiled entries saved in a cache folder (numba's index files)."""
    return len(list(folder.rglob("*.nbi")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=",".join(FAMILIES),
                    help=f"families whose first simulate to measure (default: all: "
                         f"{', '.join(FAMILIES)})")
    ap.add_argument("--no-search", action="store_true", help="skip the search")
    args = ap.parse_args()
    base = 0.0
    width = 56
    print(f"{'command':<{width}}  {'CPU-s':>7}  {'ratio':>6}", flush=True)

    def row(what: str, cpu: float, note: str = "") -> None:
        print(f"{what:<{width}}  {cpu:7.2f}  {cpu / (base or cpu):5.1f}x  {note}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        caches = Path(tmp)
        base = _cpu([sys.executable, "-c", "import numpy, pandas, numba"], caches / "none")
        row("python -c 'import numpy, pandas, numba'", base)
        for state in ("cold", "warm"):
            cache = caches / "help"
            row(f"--help, {state}", _cpu([*CLI, "--help"], cache),
                f"{_kernels(cache)} kernels cached after")
            row(f"import paretosearch, {state}",
                _cpu([sys.executable, "-c", "import paretosearch"], cache))
        families = args.families.split(",")
        for family in families[:1]:
            _simulate(family, caches / family, row)
        if not args.no_search:
            for state in ("cold", "warm"):
                row(f"search (default) to its first progress line, {state}",
                    _cpu([*CLI, "search"], caches / "search", until="generation "))
        for family in families[1:]:
            _simulate(family, caches / family, row)


def _simulate(family: str, cache: Path, row: Callable[..., None]) -> None:
    """The first ``simulate`` of ``family`` on an empty cache, then again warm."""
    argv = [*CLI, "simulate", *FAMILIES[family]]
    what = f"simulate {' '.join(FAMILIES[family][:4])}"
    cold = _cpu(argv, cache)
    row(f"{what}, cold", cold, f"cache {_size_mib(cache):.1f} MiB, {_kernels(cache)} entries")
    row(f"{what}, warm", _cpu(argv, cache))

if __name__ == "__main__":
    main()
