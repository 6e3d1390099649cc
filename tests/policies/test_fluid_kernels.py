"""PCS's fluid baselines' kernels against plain transcriptions of PCS's procedures.

Oracles: Themis as PCS runs it (after every pick, re-sort the jobs left by rho, largest
first, with a stable sort, and give the first what it wants of what is left); AFS's pairwise
pass over every job below its demand for every GPU; SRSF and SRTF as a stable sort of every
job, filled in order; and weighted water-filling over every entry in ratio order, zero
demands included. Inputs are drawn from small sets of values so that equal rhos, rates,
keys and ratios, the cases the kernels' shortcuts must rank exactly as the sorts and passes
do, come up often.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.pcs.baselines import _AFS_EPS, _afs, _srsf, _srtf, _themis, water_fill
from simulator.fluid.engine import speed_at
from simulator.jit import compiled
from simulator.order import first_in_order


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


def afs_as_pcs(gpus: float, demand: np.ndarray, est_rem: np.ndarray, model: np.ndarray,
               speedup: np.ndarray) -> np.ndarray:
    out = np.zeros(len(demand))

    def rates(i: int) -> tuple[float, float, float]:
        s0, s1 = (speed_at.py_func(speedup, model[i], out[i] + d) for d in (0.0, 1.0))
        t0 = est_rem[i] / s0 if s0 > 0.0 else np.inf
        t1 = est_rem[i] / s1 if s1 > 0.0 else np.inf
        return t0, 1.0 / (t0 + _AFS_EPS), 1.0 / (t1 + _AFS_EPS)

    left = gpus
    while left > 0.0:
        wants = [i for i in range(len(demand)) if out[i] < demand[i]]
        if not wants:
            break
        best = wants[0]
        for c in wants[1:]:
            (tc, *_), (tb, *_) = rates(c), rates(best)
            lo, hi = (c, best) if tc < tb else (best, c)
            (_, r0l, r1l), (_, r0h, r1h) = rates(lo), rates(hi)
            if r0l == 0.0:
                best = lo if r1l > r1h else hi
            else:
                best = lo if (r1l - r0l) / r0l > (r1h - r0h) / r1h else hi
        out[best] += 1.0
        left -= 1.0
    return out


def run_kernel(kernel: object, gpus: float, demand: np.ndarray, est_rem: np.ndarray,
               model: np.ndarray, speedup: np.ndarray) -> np.ndarray:
    n = len(demand)
    out = np.full(n, -1.0)
    compiled(kernel)(np.zeros(1), np.zeros((1, 1)), 0.0, gpus, np.zeros(n), demand,
                     est_rem.copy(), est_rem, np.zeros(n), np.zeros(n), model, speedup, out)
    return out


# speed-ups at 0..8 GPUs: linear, sublinear, and two superlinear (a job gains more than
# double from its second or third GPU); remaining work is drawn negative too (a job that
# outran its estimate), where AFS's shortcut hands over to the pass
SPEEDUPS = np.array([[0.0, 1, 2, 3, 4, 5, 6, 7, 8],
                     [0.0, 1, 1.5, 1.8, 2, 2.1, 2.2, 2.2, 2.2],
                     [0.0, 1, 3, 4, 9, 10, 11, 12, 16],
                     [0.0, 0.5, 0.8, 2, 3, 3, 3, 3, 3]])
JOBS = st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.lists(st.sampled_from([0, 1, 1, 2, 4, 8]), min_size=n, max_size=n),
    st.lists(st.sampled_from([-50.0, 0.0, 100.0, 400.0, 400.0, 1600.0]), min_size=n,
             max_size=n),
    st.lists(st.sampled_from([0, 0, 1, 2, 3]), min_size=n, max_size=n)))


@settings(deadline=None, max_examples=400)
@given(JOBS, st.sampled_from([1.0, 3.0, 7.5, 16.0, 64.0]), st.booleans())
def test_afs_hands_out_gpus_as_pcs_pairwise_pass(jobs: tuple[list[float], ...], gpus: float,
                                                 sane: bool) -> None:
    demand, est_rem, model = np.array(jobs[0]), np.array(jobs[1]), np.array(jobs[2])
    if sane:  # linear and sublinear models only: the kernel's shortcut holds throughout
        model %= 2
    out = run_kernel(_afs, gpus, demand, est_rem, model, SPEEDUPS)
    assert out.tolist() == afs_as_pcs(gpus, demand, est_rem, model, SPEEDUPS).tolist()


@settings(deadline=None, max_examples=300)
@given(JOBS, st.sampled_from([1.0, 3.0, 7.5, 16.0, 64.0]))
def test_srsf_and_srtf_fill_in_the_order_of_a_stable_sort_of_every_job(
        jobs: tuple[list[float], ...], gpus: float) -> None:
    demand, est_rem, model = np.maximum(jobs[0], 1), np.array(jobs[1]), np.array(jobs[2])
    time_left = est_rem / SPEEDUPS[model, demand]
    for kernel, key in ((_srsf, time_left * demand), (_srtf, time_left)):
        want, left = np.zeros(len(demand)), gpus
        for i in np.argsort(key, kind="stable"):
            want[i] = min(left, float(demand[i])) if left > 0.0 else 0.0
            left -= want[i]
        assert run_kernel(kernel, gpus, demand, est_rem, model, SPEEDUPS).tolist() == \
            want.tolist()


@settings(deadline=None, max_examples=300)
@given(st.lists(st.sampled_from([-1.0, 0.0, 2.5, 3.0, np.inf]), max_size=60),
       st.integers(0, 70), st.booleans(), st.integers(0, 2**32 - 1))
def test_first_in_order_is_the_head_of_a_stable_sort(keys: list[float], k: int,
                                                      later_first: bool, seed: int) -> None:
    key = np.array(keys)
    take = np.random.default_rng(seed).random(len(key)) < 0.8
    idx = np.flatnonzero(take)
    if later_first:  # a stable sort of the reversed indices puts the later of equals first
        idx = idx[::-1]
    want = idx[np.argsort(key[idx], kind="stable")][:k]
    assert first_in_order(key, take, k, later_first).tolist() == want.tolist()


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
