"""Kernel caching (:mod:`simulator.jit`): keys that follow what a module reads, and a lock
that makes concurrent processes compile a kernel once."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.jit import module_stamp, njit
from simulator.order import stable_order
from tests.helpers.data import ROOT

FLUID = ("policies/pcs/wfq.py", "policies/pcs/baselines.py", "policies/quota.py")
ROUND = ("policies/hetero/hadar.py", "policies/hetero/yarn.py", "policies/unified/kernel.py",
         "simulator/rounds/engine.py")


def _copy(tmp: Path) -> Path:
    for package in ("simulator", "policies"):
        shutil.copytree(ROOT / package, tmp / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return tmp


def _stamps(root: Path) -> dict[str, str]:
    return {m: module_stamp(root / m, root) for m in (*FLUID, *ROUND, "simulator/fluid/engine.py")}


def _edit(path: Path) -> None:
    path.write_text(path.read_text() + "\n# an edit\n")


def test_a_helper_edit_rekeys_its_callers_and_nothing_else(tmp_path: Path) -> None:
    before = _stamps(_copy(tmp_path / "a"))
    edited = _copy(tmp_path / "b")
    _edit(edited / "policies/pcs/baselines.py")  # water_fill, which WFQ's kernel calls
    after = _stamps(edited)
    changed = {m for m in before if before[m] != after[m]}
    # unified's kernel imports wfq_hetero, which imports WFQ: a caller, transitively
    assert changed == {"policies/pcs/baselines.py", "policies/pcs/wfq.py", "policies/quota.py",
                       "policies/unified/kernel.py"}


def test_an_engine_edit_rekeys_what_inlines_it_not_the_other_engine(tmp_path: Path) -> None:
    before = _stamps(_copy(tmp_path / "a"))
    edited = _copy(tmp_path / "b")
    _edit(edited / "simulator/fluid/engine.py")  # speed_at, inlined by the fluid policies
    after = _stamps(edited)
    assert {m for m in before if before[m] != after[m]} == {
        *FLUID, "simulator/fluid/engine.py", "policies/unified/kernel.py"}  # via wfq_hetero, WFQ


def test_a_policy_edit_keeps_every_other_policys_key(tmp_path: Path) -> None:
    before = _stamps(_copy(tmp_path / "a"))
    edited = _copy(tmp_path / "b")
    _edit(edited / "policies/hetero/yarn.py")
    after = _stamps(edited)
    assert {m for m in before if before[m] != after[m]} == {"policies/hetero/yarn.py"}


def _add(flag: bool, k: int) -> int:
    return k + 1 if flag else k


def _callers(helper: object) -> object:
    @numba.njit
    def caller(n: int) -> int:
        total = helper(True, -1)
        for i in range(n):
            total = total + helper(False, i)
        return total
    return caller


def test_a_helper_compiles_one_copy_whatever_constants_its_callers_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))  # not beside this file
    plain, ours = numba.njit(_add), njit(_add)
    assert _callers(plain)(3) == _callers(ours)(3) == 3
    assert len(plain.signatures) > 1  # numba's own: one copy per literal it was typed with
    assert ours.signatures == [(numba.types.boolean, numba.types.int64)]


@settings(deadline=None)  # the first example compiles (or loads) stable_order
@given(st.lists(st.sampled_from([0.0, 1.0, 2.5, -3.0, np.inf]) | st.floats(-1e6, 1e6),
                max_size=80))
def test_stable_order_is_numpys_stable_argsort(keys: list[float]) -> None:
    values = np.array(keys, dtype=np.float64)
    assert stable_order(values).tolist() == np.argsort(values, kind="stable").tolist()
    ints = values.astype(np.int64) if np.isfinite(values).all() else np.arange(len(keys))
    assert stable_order(ints).tolist() == np.argsort(ints, kind="stable").tolist()
    for arranged in (np.sort(values), np.sort(values)[::-1].copy()):  # one run, either way
        assert stable_order(arranged).tolist() == np.argsort(arranged, kind="stable").tolist()


RACE = """
import sys, time
from pathlib import Path
from simulator.fluid import engine
from simulator.jit import compile_notice, compiled

here, n = Path(sys.argv[1]), int(sys.argv[2])
(here / f"ready{n}").touch()
while not (here / "ready0").exists() or not (here / "ready1").exists():
    time.sleep(0.01)
said = []
with compile_notice(lambda: said.append(1)):
    compiled(engine.no_queue)
print(len(said))
"""


def test_two_processes_needing_one_kernel_compile_it_once(tmp_path: Path) -> None:
    """Both start together (each waits for the other's file) on an empty cache; the one that
    gets the lock compiles and saves, the other waits and loads."""
    env = {**os.environ, "PARETOSEARCH_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", RACE, str(tmp_path), str(n)], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, text=True) for n in (0, 1)]
    compiled = sorted(int(p.communicate(timeout=600)[0]) for p in procs)
    assert [p.returncode for p in procs] == [0, 0]
    assert compiled == [0, 1]


NESTED = """
from numba import types
from simulator.jit import njit, njit_lazily

@njit
def inner(x):
    return x * 2.0 + 1.0

@njit
def outer(x):
    return inner(x) + 1.0

@njit_lazily(types.float64(types.float64))
def kernel(x):
    return outer(x) - 1.0
"""

CHILD = """
import resource, signal, sys
from simulator import nested
from simulator.jit import KernelCacheError, compiled
if sys.argv[1] == "full":
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))
try:
    print(nested.outer(1.0) if sys.argv[2] == "helper" else compiled(nested.kernel)(1.0))
except KernelCacheError as exc:
    print(exc)
"""


@pytest.fixture(scope="module")
def nested_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project with a kernel that calls a helper that calls a helper: numba
    compiles and saves the helpers while it types their caller."""
    root = _copy(tmp_path_factory.mktemp("tree"))
    (root / "simulator" / "nested.py").write_text(NESTED)
    return root


def _child(root: Path, cache: Path, limit: str, entry: str) -> str:
    return _run_child(root, cache, limit, entry).stdout.strip()


def _run_child(root: Path, cache: Path, limit: str, entry: str
               ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PARETOSEARCH_CACHE_DIR": str(cache), "PYTHONPATH": str(root),
           "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD, limit, entry], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


def _unwritable(tmp: Path, how: str) -> Path:
    if how == "not a folder":
        (tmp / "file").write_text("")
        return tmp / "file" / "cache"
    if os.geteuid() == 0:
        pytest.skip("root writes to a read-only folder")
    (tmp / "ro").mkdir(mode=0o555)
    return tmp / "ro"


@pytest.mark.parametrize("entry", ["kernel", "helper"])
@pytest.mark.parametrize("how", ["full disk", "not a folder", "read-only"])
def test_a_cache_folder_that_cannot_take_a_save_is_an_error_naming_it(
        nested_tree: Path, tmp_path: Path, how: str, entry: str) -> None:
    """A full disk (a real file-size limit: the kernel's EFBIG), a path through a file, or a
    read-only folder, met while numba saves a helper it compiled on the way to a kernel
    (``compiled``) or to a helper's first call from Python, is one error naming the folder
    and the fix, not numba's traceback (numba wraps what a nested compile raises)."""
    cache = tmp_path / "cache" if how == "full disk" else _unwritable(tmp_path, how)
    said = _child(nested_tree, cache, "full" if how == "full disk" else "none", entry)
    assert said.startswith(f"{cache}: cannot save the compiled kernels there"), said
    assert "PARETOSEARCH_CACHE_DIR" in said
    if how == "full disk":  # what a failed save left behind does not stop the next process
        assert _child(nested_tree, cache, "none", entry) == ("3.0" if entry == "kernel" else "4.0")


@pytest.mark.parametrize("damage", [lambda b: b[: len(b) // 2], lambda b: b"garbage",
                                    lambda b: b""], ids=["truncated", "garbled", "empty"])
@pytest.mark.parametrize("suffix", [".nbi", ".nbc"])
def test_a_damaged_cache_entry_is_compiled_again(
        nested_tree: Path, tmp_path: Path, suffix: str, damage: Callable[[bytes], bytes]) -> None:
    """Truncated, garbled or emptied index or data files: a warning naming the entry, the
    same result, and a cache repaired for the next process."""
    cache = tmp_path / "cache"
    assert _child(nested_tree, cache, "none", "kernel") == "3.0"
    files = sorted(cache.rglob(f"*{suffix}"))
    assert len(files) == 3  # inner, outer, kernel
    damaged = {path: damage(path.read_bytes()) for path in files}
    for path, data in damaged.items():
        path.write_bytes(data)
    assert _child(nested_tree, cache, "none", "kernel") == "3.0"
    assert all(path.read_bytes() != data for path, data in damaged.items())  # saved again


def test_an_entry_of_an_older_layout_is_compiled_again_without_a_warning(
        nested_tree: Path, tmp_path: Path) -> None:
    """An index whose types name a module that has since moved (an upgrade that regrouped
    the code) is stale, not damaged: compiled again and overwritten, with no warning."""
    cache = tmp_path / "cache"
    assert _child(nested_tree, cache, "none", "kernel") == "3.0"
    # (stamp, a type of module simulator.moved_away), in pickle's first protocol
    stale = b"(S'an older stamp'\ncsimulator.moved_away\nMoved\nt."
    for index in sorted(cache.rglob("*.nbi")):
        with open(index, "rb") as f:
            version = pickle.load(f)
        index.write_bytes(pickle.dumps(version) + stale)
    done = _run_child(nested_tree, cache, "none", "kernel")
    assert done.stdout.strip() == "3.0"
    assert "damaged" not in done.stderr and "WARNING" not in done.stderr.upper(), done.stderr
    assert all(stale not in index.read_bytes() for index in cache.rglob("*.nbi"))
