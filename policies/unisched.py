"""UniSched's building blocks (papers/unisched.md §III-B, §III-C; SPEC §3.3).

So far the SR-aware duration estimate (eq. 3); the lease-based policy and its MILP selector
build on it.
"""

from __future__ import annotations

from math import comb

__all__ = ["expected_sr_overhead"]


def expected_sr_overhead(n_leases: int, deadline_leases: int, t_sr: float, *,
                         best_effort: bool = False) -> float:
    """Expected suspend/resume overhead of a job needing ``n_leases`` leases (eq. 3).

    An SLO job that must run ``n`` of the ``m`` leases before its deadline, each schedule
    equally likely, is suspended once between consecutive runs of leases: with ``k + 1`` runs
    (``C(n-1, k) C(m-n+1, k+1)`` of the ``C(m, n)`` schedules) it pays ``k`` times ``t_sr``.
    A best-effort job, with no deadline to bound it, is charged ``n / 2`` suspensions.

    Args:
        n_leases: leases of work the job needs (n >= 1).
        deadline_leases: leases until its deadline (m >= n); ignored for best-effort jobs.
        t_sr: seconds one suspension and resumption cost together.
        best_effort: use the best-effort rule.
    """
    n, m = n_leases, deadline_leases
    if n < 1:
        raise ValueError(f"a job needs at least one lease (got {n})")
    if best_effort:
        return n / 2 * t_sr
    if m < n:
        raise ValueError(f"{n} leases cannot fit before a deadline {m} leases away")
    total = comb(m, n)
    return sum(k * t_sr * comb(n - 1, k) * comb(m - n + 1, k + 1)
               for k in range(min(n - 1, m - n) + 1)) / total
