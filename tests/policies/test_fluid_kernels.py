"""PCS's fluid baselines' kernels against plain transcriptions of PCS's procedures.

Oracles: Themis as PCS runs it (after every pick, re-sort the jobs left by rho, largest
first, with a stable sort, and give the first what it wants of what is left), and weighted
water-filling over every entry in ratio order, zero demands included. Inputs are drawn from
small sets of values so that equal rhos and ratios, the cases the kernels' shortcuts must
rank exactly as the sorts do, come up often.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.pcs.baselines import _themis, water_fill
from simulator.jit import compiled


def themis_as_pcs(now: float, gpus: float, arrival: np.ndarray, demand: np.ndarray,
                  est_size: np.ndarray, est_rem: np.ndarray, seen: np.ndarray) -> np.ndarray:
    fair = est_size / np.minimum(gpus / seen, demand)
    out = np.zeros(len(demand))
    left = min(float(demand.sum()), gpus)
    order = list(range(len(demand)))
    while left > 0.0 and order:
        rho = {i: (now - arrival[i] + est_rem[i] / min(left, float(demand[i]))) / fair[i]
               for i in order}
        order = sorted(order, key=lambda i: -rho[i])  # stable: equals keep their order
        top = order.pop(0)
        out[top] = min(left, float(demand[top]))
        left -= out[top]
    return out


def water_fill_over_all(demand: np.ndarray, capacity: float, weight: np.ndarray) -> np.ndarray:
    if demand.sum() <= capacity:
        return demand.copy()
    ratio = np.where(weight > 0.0, demand / np.where(weight > 0.0, weight, 1.0), np.inf)
    order = np.argsort(ratio, kind="stable")
    weight_left = np.cumsum(weight[order][::-1])[::-1]
    out, left = np.zeros(len(demand)), capacity
    for j, i in enumerate(order):
        level = left / weight_left[j] if weight_left[j] > 0.0 else 0.0
        if ratio[i] <= level:
            out[i] = demand[i]
            left -= demand[i]
        else:
            out[order[j:]] = level * weight[order[j:]]
            break
    return out


@settings(deadline=None, max_examples=300)  # the first example compiles (or loads) the kernel
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(
    st.lists(st.sampled_from([0.0, 10.0, 40.0]), min_size=n, max_size=n),
    st.lists(st.sampled_from([1, 2, 4, 8]), min_size=n, max_size=n),
    st.lists(st.sampled_from([100.0, 400.0, 1600.0]), min_size=n, max_size=n),
    st.lists(st.sampled_from([0.25, 0.5, 1.0]), min_size=n, max_size=n),
    st.lists(st.sampled_from([1.0, 2.0, 3.0]), min_size=n, max_size=n))),
       st.sampled_from([3.0, 8.0, 16.0]))
def test_themis_picks_as_pcs_re_sorting_after_every_pick(jobs: tuple[list[float], ...],
                                                         gpus: float) -> None:
    arrival, demand, size, done, seen = (np.array(v) for v in jobs)
    demand = demand.astype(np.int64)
    est_size = size * demand
    est_rem = est_size * done
    out = np.full(len(demand), -1.0)
    none = np.zeros(len(demand))
    compiled(_themis)(np.zeros(1), np.zeros((1, 1)), 50.0, gpus, arrival, demand, est_size,
                      est_rem, seen, none, np.zeros(len(demand), dtype=np.int64),
                      np.ones((1, 17)), out)
    assert out.tolist() == themis_as_pcs(50.0, gpus, arrival, demand, est_size, est_rem,
                                         seen).tolist()


@settings(deadline=None, max_examples=300)
@given(st.integers(1, 30).flatmap(lambda n: st.tuples(
    st.lists(st.sampled_from([0.0, 0.0, 1.0, 2.0, 3.5, 8.0]), min_size=n, max_size=n),
    st.lists(st.sampled_from([0.0, 0.1, 0.25, 1.0]), min_size=n, max_size=n))),
       st.sampled_from([1.0, 4.0, 7.5, 16.0]))
def test_water_fill_leaves_zero_demands_out_and_shares_as_over_every_entry(
        entries: tuple[list[float], list[float]], capacity: float) -> None:
    demand, weight = np.array(entries[0]), np.array(entries[1])
    out = np.full(len(demand), -1.0)
    water_fill(demand, capacity, weight, out)
    assert out.tolist() == water_fill_over_all(demand, capacity, weight).tolist()
