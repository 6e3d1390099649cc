"""paretosearch: multi-objective policy search for GPU-cluster schedulers.

The simulator (:mod:`simulator`) and the policies (:mod:`policies`) are re-exported here
for convenience; the search service builds on them.
"""

from importlib.metadata import PackageNotFoundError, version

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
    "METRICS",
    "REGISTRY",
    "WFQ",
    "ClusterProfile",
    "InvalidObjective",
    "InvalidPolicyParams",
    "InvalidProfile",
    "InvalidWorkload",
    "ParetoSearchError",
    "Policy",
    "SimulationResult",
    "Workload",
    "__version__",
    "generate",
    "get_policy",
    "load_profile",
    "make_policy",
    "measure",
    "read_trace",
    "simulate",
]
