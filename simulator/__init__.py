"""The embedded discrete-event GPU-cluster simulator.

Imports nothing else of the project: policies plug in through :class:`Scheduler`.
"""

from simulator.errors import (
    InvalidPolicyParams,
    InvalidProfile,
    InvalidWorkload,
    ParetoSearchError,
)
from simulator.inputs.generate import generate, generate_from_cdfs
from simulator.inputs.profile import ClusterProfile, list_profiles, load_profile
from simulator.inputs.scaling import ScalingTable, parametric_table
from simulator.inputs.traces import (
    read_chronus,
    read_gavel_trace,
    read_helios,
    read_philly_jobs,
    read_tiresias,
    read_trace,
)
from simulator.inputs.workload import Workload, read_pcs_trace, read_table
from simulator.metrics import METRICS, InvalidObjective, Metric, measure, summary
from simulator.simulate import SimulationResult, simulate
from simulator.view import ClusterView, Scheduler

__all__ = [
    "METRICS",
    "ClusterProfile",
    "ClusterView",
    "InvalidObjective",
    "InvalidPolicyParams",
    "InvalidProfile",
    "InvalidWorkload",
    "Metric",
    "ParetoSearchError",
    "ScalingTable",
    "Scheduler",
    "SimulationResult",
    "Workload",
    "generate",
    "generate_from_cdfs",
    "list_profiles",
    "load_profile",
    "measure",
    "parametric_table",
    "read_chronus",
    "read_gavel_trace",
    "read_helios",
    "read_pcs_trace",
    "read_philly_jobs",
    "read_table",
    "read_tiresias",
    "read_trace",
    "simulate",
    "summary",
]
