"""Where compiled kernels are cached, keyed by the source they were compiled from.

numba's on-disk cache checks only the timestamp of the file that defines a function, so a
kernel that calls a helper from another module (``speed_at``, ``water_fill``) would keep
running a stale copy of that helper after the helper changed. Keying the cache folder on a
digest of every compiled module's source (the ``simulator`` and ``policies`` packages) and
numba's version makes any change start a fresh cache. ``NUMBA_CACHE_DIR``, if set, wins.

Helpers that allocate nothing are compiled with ``_nrt=False`` (no reference counting). numba
otherwise increfs every array of a tuple argument on entry to a call and decrefs it on each
exit - 22 arrays for an OJPP pack, 34 for the round engine's job arrays - and its pruning pass
leaves most of these in branchy code; they were over half of the unified policy's time. An
allocation in such a helper, or a call to one that allocates, is a compile-time typing error,
so nothing can leak.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import numba

__all__ = ["configure_cache", "source_digest"]

_ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def source_digest() -> str:
    """A digest of the simulator's and policies' source and numba's version: what a
    simulation's result depends on besides its inputs."""
    digest = hashlib.sha256(numba.__version__.encode())
    for package in ("simulator", "policies"):
        for path in sorted((_ROOT / package).rglob("*.py")):
            digest.update(str(path.relative_to(_ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def configure_cache() -> Path:
    """Point numba's cache at a folder named after the source digest; return the folder."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"])
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    folder = base / "paretosearch" / "numba" / source_digest()
    numba.config.CACHE_DIR = str(folder)
    return folder
