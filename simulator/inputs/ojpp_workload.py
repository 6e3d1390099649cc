"""OJPP's evaluation inputs (papers/ojpp.md §3, §5), from the values its text gives.

``simulator/inputs/ojpp_measured.json`` holds every measured value the paper's text quotes,
each with where it is read: three entries of Fig. 3's 6 x 6 interference matrix, one device-level
figure, the largest slowdown, the ResNet memory profile of Fig. 2, which models have high
collision or interference potential, and the migration cost. The rest of Fig. 3 and the other
models' memory profiles are not in the text; this module fills them with the arguments below
(``docs/fidelity/ojpp.md`` shows the results across them):

- ``unknown``: the range an unquoted pair's slowdown (the row's worker beside the column's) is
  drawn from, uniformly, with a fixed generator (``seed``); a ResNet row entry not quoted is
  ``resnet_unknown`` (above 0.2: at theta-bar = 0.2, §5.3.1's
  ResNet jobs end up alone). The LeNet-ResNet device figure (113 %) goes to ResNet's side.
  Every entry is at most the paper's largest, 122 %.
- memory ``<gamma, delta, p>`` (fractions of the device): ResNet's is Fig. 2's; LeNet and LSTM,
  "high memory collision jobs", take ``(0.15, 0.40, 0.20)``; VGG, AlexNet and CNN
  ``(0.20, 0.20, 0.05)``; ``mem_scale`` scales these assumed ``gamma`` and ``delta``, and
  ``surge_scale`` their surge probability ``p`` (at most 1), which alone decides eq. 4's
  collision probability and so whether tau-bar binds.
- compute ``alpha`` (the ``gpu_util`` column): ``alpha`` for every model.

Workloads (§5.2): 20 jobs of 1-10 workers at t = 0, 30-120 min each alone: ``mixed`` (half the
jobs of high collision or interference models, half of the others), ``c-high`` (ResNet, LeNet,
LSTM), ``i-high`` (LeNet, ResNet), ``average`` (VGG, AlexNet, CNN).
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from simulator.errors import InvalidWorkload
from simulator.inputs.colocation import Interference
from simulator.inputs.scaling import ScalingTable
from simulator.inputs.workload import Workload

__all__ = ["KINDS", "MEASURED", "measured", "ojpp_batch", "ojpp_interference"]

FloatArray = npt.NDArray[np.float64]
MEASURED = Path(__file__).with_name("ojpp_measured.json")
KINDS = ("mixed", "c-high", "i-high", "average")
_ASSUMED_MEMORY = {"LeNet": (0.15, 0.40, 0.20), "LSTM": (0.15, 0.40, 0.20),
                   "VGG": (0.20, 0.20, 0.05), "AlexNet": (0.20, 0.20, 0.05),
                   "CNN": (0.20, 0.20, 0.05)}


@cache
def measured() -> dict[str, Any]:
    """The measured values and their sources (``ojpp_measured.json``)."""
    data: dict[str, Any] = json.loads(MEASURED.read_text())
    return data


def _models() -> list[str]:
    return list(measured()["models"]["value"])


def ojpp_interference(unknown: tuple[float, float] = (0.0, 0.3), resnet_unknown: float = 0.5,
                      seed: int = 0, gpu_type: str = "gtx1080ti") -> Interference:
    """Fig. 3 as far as the text gives it, the rest filled (module docstring)."""
    m, models = measured(), _models()
    top = float(m["max_slowdown"]["value"])
    at = {name: i for i, name in enumerate(models)}
    s = np.random.default_rng(seed).uniform(*unknown, (len(models), len(models)))
    s[at["ResNet"], :] = resnet_unknown
    for d in m["device_level"]:
        a, b = d["workers"]
        s[at[b], at[a]] = d["theta_max"]  # ResNet, "susceptible to other training jobs"
    for p in m["pairs"]:
        s[at[p["worker"]], at[p["partner"]]] = p["slowdown"]
    return Interference((gpu_type,), np.minimum(s, top)[:, :, None].copy())


def _memory(model: str, mem_scale: float, surge_scale: float) -> tuple[float, float, float]:
    for row in measured()["memory"]:
        if row["model"] == model:
            return float(row["gamma"]), float(row["delta"]), float(row["p"])
    gamma, delta, p = _ASSUMED_MEMORY[model]
    return gamma * mem_scale, delta * mem_scale, min(1.0, p * surge_scale)


def ojpp_batch(kind: str, seed: int, *, device_gib: float = 11.0, alpha: float = 0.25,
               workers: tuple[int, int] = (1, 10), interference: Interference | None = None,
               mem_scale: float = 1.0, surge_scale: float = 1.0) -> Workload:
    """One static batch of §5.2 (module docstring): ``workers`` bounds each job's count."""
    if not (np.isfinite(mem_scale) and mem_scale > 0):
        raise InvalidWorkload(f"ojpp_batch: mem_scale must be a finite number > 0 "
                              f"(got {mem_scale!r})")
    if not (np.isfinite(surge_scale) and surge_scale >= 0):
        raise InvalidWorkload(f"ojpp_batch: surge_scale must be a finite number >= 0 "
                              f"(got {surge_scale!r})")
    models = _models()
    m = measured()
    high = sorted(set(m["high_collision"]["value"]) | set(m["high_interference"]["value"]))
    pools = {"c-high": list(m["high_collision"]["value"]),
             "i-high": list(m["high_interference"]["value"]),
             "average": [x for x in models if x not in high]}
    rng = np.random.default_rng([KINDS.index(kind), seed])
    n = 20
    if kind == "mixed":
        names = [str(x) for x in np.concatenate([rng.choice(high, n // 2),
                                                 rng.choice(pools["average"], n - n // 2)])]
    else:
        names = [str(x) for x in rng.choice(pools[kind], n)]
    gpus = rng.integers(workers[0], workers[1] + 1, n)
    mem = np.array([_memory(x, mem_scale, surge_scale) for x in names])
    frame = pd.DataFrame({
        "arrival_s": np.zeros(n), "gpus": gpus,
        "service_s": rng.uniform(30.0, 120.0, n) * 60.0 * gpus, "model": names,
        "gpu_util": alpha, "gpu_mem_gib": mem[:, 0] * device_gib,
        "mem_surge_gib": mem[:, 1] * device_gib, "mem_surge_p": mem[:, 2]})
    scaling = ScalingTable.from_points({x: np.arange(1.0, 11.0) for x in models})
    wl = Workload.from_frame(frame, scaling=scaling, source=f"ojpp-batch({kind}, {seed})")
    return replace(wl, interference=interference or ojpp_interference())
