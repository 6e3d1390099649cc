"""paretosearch: multi-objective policy search for GPU-cluster schedulers.

The search service (:class:`PolicySearch`), with the simulator (:mod:`simulator`) and the
policies (:mod:`policies`) re-exported for convenience.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from paretosearch.objectives import Objective, parse_objectives
    from paretosearch.runs.records import ChosenConfig, FrontEntry
    from paretosearch.service.api import BASELINES, PolicySearch, SearchConfig, SearchSettings
    from policies import REGISTRY, WFQ, Policy, get_policy, make_policy
    from simulator import (
        METRICS,
        ClusterProfile,
        InvalidObjective,
        InvalidPolicyParams,
        InvalidProfile,
        InvalidWorkload,
        ParetoSearchError,
        SimulationResult,
        Workload,
        generate,
        load_profile,
        measure,
        read_trace,
        simulate,
    )

_HOME = {
    "paretosearch.runs.records": ("ChosenConfig", "FrontEntry"),
    "paretosearch.objectives": ("Objective", "parse_objectives"),
    "paretosearch.service.api": ("BASELINES", "PolicySearch", "SearchConfig", "SearchSettings"),
    "policies": ("REGISTRY", "WFQ", "Policy", "get_policy", "make_policy"),
    "simulator": ("METRICS", "ClusterProfile", "InvalidObjective", "InvalidPolicyParams",
                  "InvalidProfile", "InvalidWorkload", "ParetoSearchError", "SimulationResult",
                  "Workload", "generate", "load_profile", "measure", "read_trace", "simulate"),
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}


def __getattr__(name: str) -> Any:
    """The names below, imported when first used: ``import paretosearch`` (and the command
    line's ``--help``) pays for no search machinery, Dask or pymoo until they are needed."""
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'paretosearch' has no attribute {name!r}")
    value = getattr(importlib.import_module(_MODULE_OF[name]), name)
    globals()[name] = value
    return value


try:
    __version__ = version("paretosearch")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

__all__ = [
    "BASELINES",
    "METRICS",
    "REGISTRY",
    "WFQ",
    "ChosenConfig",
    "ClusterProfile",
    "FrontEntry",
    "InvalidObjective",
    "InvalidPolicyParams",
    "InvalidProfile",
    "InvalidWorkload",
    "Objective",
    "ParetoSearchError",
    "Policy",
    "PolicySearch",
    "SearchConfig",
    "SearchSettings",
    "SimulationResult",
    "Workload",
    "__version__",
    "generate",
    "get_policy",
    "load_profile",
    "make_policy",
    "measure",
    "parse_objectives",
    "read_trace",
    "simulate",
]
