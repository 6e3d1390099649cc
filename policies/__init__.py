"""Scheduling policies: each a frozen dataclass with declared parameter domains.

Importing this package imports every module in it, so every policy a module declares with
``@register`` is in :data:`policies.base.REGISTRY`: a new policy needs no line here. The
names below are re-exported for convenience.
"""

import importlib
import pkgutil

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
from policies.horus import Horus
from policies.horus_baselines import OBP, PAB, FifoExclusive
from policies.ojpp import OJPP, BestFit, BGreedy, CGreedy, IGreedy, OJPPGreedy
from policies.predictors import InterferencePredictor, UtilizationPredictor
from policies.slo_baselines import LLF, Hydra
from policies.unified import Unified
from policies.unisched import UniSched
from policies.wfq import WFQ, class_thresholds
from policies.wfq_hetero import WFQHetero
from policies.yarn import YarnCS

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "AFS", "FIFO", "LAS", "LLF", "OBP", "OJPP", "PAB", "REGISTRY", "SRSF", "SRTF", "WFQ",
    "BGreedy", "BestFit", "CGreedy", "Domain", "FifoExclusive", "Gavel", "Hadar", "Horus", "Hydra",
    "IGreedy", "InterferencePredictor", "KernelPolicy", "MaxMin", "OJPPGreedy", "Policy",
    "RoundPolicy", "Themis", "UniSched", "Unified", "UtilizationPredictor", "WFQHetero", "YarnCS",
    "class_thresholds", "get_policy", "make_policy", "param", "register",
]
