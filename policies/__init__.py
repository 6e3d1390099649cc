"""Scheduling policies: each a frozen dataclass with declared parameter domains.

Importing this package registers every policy in :data:`policies.base.REGISTRY`.
"""

from policies.base import (
    REGISTRY,
    Domain,
    KernelPolicy,
    Policy,
    RoundPolicy,
    get_policy,
    make_policy,
    param,
    register,
)
from policies.baselines import AFS, FIFO, LAS, SRSF, SRTF, MaxMin, Themis
from policies.wfq import WFQ, class_thresholds

__all__ = [
    "AFS", "FIFO", "LAS", "REGISTRY", "SRSF", "SRTF", "WFQ", "Domain", "KernelPolicy", "MaxMin",
    "Policy", "RoundPolicy", "Themis", "class_thresholds", "get_policy", "make_policy", "param",
    "register",
]
from policies import gavel, hadar, yarn  # noqa: F401  (registers Gavel, Hadar, YARN-CS)
