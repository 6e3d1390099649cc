"""Scheduling policies: each a frozen dataclass with declared parameter domains.

Grouped by paper: ``pcs/``, ``unisched/``, ``hetero/`` (Hadar, Gavel), ``horus/``, ``ojpp/``,
``unified/`` and ``learned/`` (predictors); beside them what policies share (``base``,
``round_kernel``, ``gangs``, ``cells``, ``colocating``) and ``quota``, the exported queues as
deployed. Importing this package imports every module in it, subpackages included, so every
policy a module declares with ``@register`` is in :data:`policies.base.REGISTRY`: a new policy
needs no line here. The names below are re-exported for convenience.
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
from policies.hetero.gavel import Gavel
from policies.hetero.hadar import Hadar
from policies.hetero.tiresias import Tiresias
from policies.hetero.wfq_hetero import WFQHetero
from policies.hetero.yarn import YarnCS
from policies.horus.baselines import OBP, PAB, FifoExclusive
from policies.horus.policy import Horus
from policies.learned.predictors import InterferencePredictor, UtilizationPredictor
from policies.ojpp.policy import OJPP, BestFit, BGreedy, CGreedy, IGreedy, OJPPGreedy
from policies.pcs.baselines import AFS, FIFO, LAS, SRSF, SRTF, MaxMin, Themis
from policies.pcs.wfq import WFQ, class_thresholds
from policies.unified.policy import Unified
from policies.unisched.baselines import LLF, Hydra
from policies.unisched.policy import UniSched

for _module in pkgutil.walk_packages(__path__, f"{__name__}."):
    importlib.import_module(_module.name)

__all__ = [
    "AFS", "FIFO", "LAS", "LLF", "OBP", "OJPP", "PAB", "REGISTRY", "SRSF", "SRTF", "WFQ",
    "BGreedy", "BestFit", "CGreedy", "Domain", "FifoExclusive", "Gavel", "Hadar", "Horus", "Hydra",
    "IGreedy", "InterferencePredictor", "KernelPolicy", "MaxMin", "OJPPGreedy", "Policy",
    "RoundPolicy", "Themis", "Tiresias", "UniSched", "Unified", "UtilizationPredictor",
    "WFQHetero", "YarnCS",
    "class_thresholds", "get_policy", "make_policy", "param", "register",
]
