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
from policies.gavel import Gavel
from policies.hadar import Hadar
from policies.slo_baselines import LLF, Hydra
from policies.unisched import UniSched
from policies.wfq import WFQ, class_thresholds
from policies.wfq_hetero import WFQHetero
from policies.yarn import YarnCS

__all__ = [
    "AFS", "FIFO", "LAS", "LLF", "REGISTRY", "SRSF", "SRTF", "WFQ", "Domain", "Gavel", "Hadar",
    "Hydra", "KernelPolicy", "MaxMin", "Policy", "RoundPolicy", "Themis", "UniSched", "WFQHetero",
    "YarnCS", "class_thresholds", "get_policy", "make_policy", "param", "register",
]
