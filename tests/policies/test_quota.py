"""The deployed queues (policies/quota.py): whole gangs, integer quotas, borrowing, reclaim,
each decision checked against the one worked out by hand from the module's rules."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from policies import make_policy
from simulator import ClusterView, InvalidPolicyParams, generate, load_profile, parametric_table
from simulator import simulate as run

TABLE = parametric_table(64)


def view(gpus: int, demand: list[int], size: list[float], alloc: list[float]) -> ClusterView:
    """Jobs in arrival order (one a second), with their demand, estimated size and the GPUs
    they hold."""
    n = len(demand)

    def ro(a: Any) -> Any:
        a = np.asarray(a)
        a.flags.writeable = False
        return a

    return ClusterView(now=100.0, total_gpus=gpus, job=ro(np.arange(n)),
                       arrival_s=ro(np.arange(n, dtype=np.float64)),
                       demand=ro(np.array(demand, dtype=np.int64)),
                       est_size=ro(np.array(size, dtype=np.float64)),
                       est_remaining=ro(np.array(size, dtype=np.float64)),
                       attained=ro(np.zeros(n)), alloc=ro(np.array(alloc, dtype=np.float64)),
                       model=ro(np.zeros(n, dtype=np.int64)), scaling=TABLE)


def decide(v: ClusterView, **params: Any) -> list[float]:
    return [float(a) for a in make_policy("quota", params).allocate(v)]


def test_running_gangs_keep_their_gpus_and_a_later_job_may_pass_one_that_does_not_fit() -> None:
    # 8 GPUs, one queue: 4 held; the 8-GPU job waits, the 2-GPU one behind it starts
    assert decide(view(8, [4, 8, 2], [10, 10, 10], [4, 0, 0])) == [4, 0, 2]
    # a gang larger than the cluster runs on all of it, alone
    assert decide(view(8, [16, 1], [10, 10], [0, 0])) == [8, 0]


def test_a_class_below_its_quota_reclaims_borrowed_gpus() -> None:
    # two classes (size <= 100, larger) owning 4 of 8 GPUs each; the large class borrowed
    # all 8; a small job arrives: the most recent large job is preempted, the small one runs
    # and the preempted gang (4) does not fit the 2 GPUs left
    v = view(8, [4, 4, 2], [1e3, 1e3, 50], [4, 4, 0])
    th = [100.0, None]
    assert decide(v, thresholds=th, quotas=[4, 4]) == [4, 0, 2]
    # without reclaim the small job waits for a large one to end
    assert decide(v, thresholds=th, quotas=[4, 4], reclaim=False) == [4, 4, 0]
    # as many gangs as it takes, the most recent first
    assert decide(view(8, [4, 4, 6], [1e3, 1e3, 50], [4, 4, 0]), thresholds=th,
                  quotas=[6, 2]) == [0, 0, 6]
    # only borrowed GPUs are taken: a class on its own quota keeps them
    assert decide(view(8, [4, 4, 2], [1e3, 50, 50], [4, 4, 0]), thresholds=th,
                  quotas=[6, 2]) == [0, 4, 2]
    # with no quotas nothing is borrowed, so nothing is reclaimed
    assert decide(v, thresholds=th) == [4, 4, 0]


def test_idle_gpus_are_lent_to_the_smallest_borrowed_share_per_weight() -> None:
    # 10 GPUs, quotas 2 + 2, weights 1 and 3, six 2-GPU jobs alternating small and large:
    # each class's first job on its quota; then both borrow at share 0 (the first class
    # first), then the small class's share is 2/1 and the large class's 2/3: the large wins
    v = view(10, [2] * 6, [50, 1e3] * 3, [0] * 6)
    assert decide(v, thresholds=[100.0, None], quotas=[2, 2], weights=[1, 3]) == \
        [2, 2, 2, 2, 0, 2]
    assert decide(v, thresholds=[100.0, None], quotas=[2, 2], weights=[3, 1]) == \
        [2, 2, 2, 2, 2, 0]


@pytest.mark.parametrize("bad", [{"thresholds": [5.0, 1.0, None]}, {"thresholds": [5.0]},
                                 {"quotas": [1, 2]}, {"quotas": [1.5]}, {"quotas": [-1]},
                                 {"weights": [0]}])
def test_bad_classes_are_named(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidPolicyParams, match=f"quota: .*{next(iter(bad))}"):
        make_policy("quota", bad)


def test_whole_gangs_in_a_simulation() -> None:
    """Every job runs on its whole demand (capped at the cluster) from start to end: its
    runtime is its work over the speed-up at that many GPUs, however the queues moved."""
    wl = generate(300, load=0.9, gpus=64, seed=2)
    pol = make_policy("quota", {"thresholds": [2e4, None], "quotas": [16, 48],
                                "reclaim": False})
    r = run(wl, load_profile("pcs-64"), pol)
    speed = wl.scaling.speed(wl.model, np.minimum(wl.gpus, 64).astype(np.float64))
    np.testing.assert_allclose(r.finish_s - r.start_s, wl.service_s / speed, rtol=1e-9)
    assert (r.start_s > wl.arrival_s).any()  # some waited: the queues were busy
