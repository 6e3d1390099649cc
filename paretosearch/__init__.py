"""paretosearch: multi-objective policy search for GPU-cluster schedulers.

The search service (:class:`PolicySearch`), with the simulator (:mod:`simulator`) and the
policies (:mod:`policies`) re-exported for convenience.
"""

from importlib.metadata import PackageNotFoundError, version

from paretosearch.runs.records import ChosenConfig, FrontEntry
from paretosearch.search.objectives import Objective, parse_objectives
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
