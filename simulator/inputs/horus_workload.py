"""Horus's testbed workload (papers/horus.md §5.2), built from what the paper says of it.

100 one-GPU jobs of 3 minutes to 2 hours; short (<= 800 s) or long, light (< 60 % GPU
utilization) or heavy; W-Small has "a higher proportion of short and small jobs", W-Large
"longer and heavier jobs"; the testbed's RTX 2080 has 8 GiB. The paper gives neither the
shares nor the jobs' GPU memory: they are arguments (``short_share``, ``light_share``,
``mem_scale``), and ``docs/fidelity/horus.md`` shows the results across them. Durations are
log-uniform within each class, utilizations uniform (light 0.10-0.60, heavy 0.60-0.95), memory
fixed (Horus eq. 2): light 1-3 GiB, heavy 2-5 GiB, times ``mem_scale``, at most 8 GiB. All
jobs arrive at t = 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.inputs.workload import Workload

__all__ = ["MIXES", "horus_testbed"]

MIXES = {"W-Small": (0.55, 0.70), "W-Large": (0.43, 0.50)}
"""Default (share of short jobs, share of light jobs) per workload. The short shares match
Table 6's FIFO makespans (267.3 and 306.9 min: FIFO runs one job a GPU, so its makespan follows
the jobs' lengths alone): 265.0 and 307.1 min as means over 100 job sets, where the paper ran
one job set five times. W-Large's 0.43 was set by them (0.25 before); W-Small's 0.55 checked.
The light shares are this project's choice (W-Large "heavier")."""


def horus_testbed(short_share: float, light_share: float, mem_scale: float = 1.5,
                  seed: int = 0, jobs: int = 100) -> Workload:
    """One job set of the testbed (module docstring); ``seed`` draws it."""
    rng = np.random.default_rng([7, seed])
    short = rng.random(jobs) < short_share
    lo, hi = np.where(short, 180.0, 800.0), np.where(short, 800.0, 7200.0)
    service = np.exp(rng.uniform(np.log(lo), np.log(hi)))
    light = rng.random(jobs) < light_share
    util = np.where(light, rng.uniform(0.10, 0.60, jobs), rng.uniform(0.60, 0.95, jobs))
    mem = np.minimum(np.where(light, rng.uniform(1.0, 3.0, jobs),
                              rng.uniform(2.0, 5.0, jobs)) * mem_scale, 8.0)
    frame = pd.DataFrame({"arrival_s": np.zeros(jobs), "gpus": 1, "service_s": service,
                          "gpu_util": util, "gpu_mem_gib": mem, "mem_surge_gib": 0.0,
                          "mem_surge_p": 0.0})
    return Workload.from_frame(frame, source=f"horus-testbed(short {short_share:g}, light "
                                             f"{light_share:g}, mem x{mem_scale:g}, {seed})")
