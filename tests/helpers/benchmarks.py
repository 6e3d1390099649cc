"""The benchmark scripts of ``benchmarks/reproduce/`` imported as modules."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.helpers.data import ROOT


def reproduce_script(name: str) -> ModuleType:
    """``benchmarks/reproduce/<name>.py``, registered in ``sys.modules`` as ``name`` (so its
    functions pickle by name, as its ``--processes`` need)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "reproduce" /
                                                  f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
