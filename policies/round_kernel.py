"""Round policies that decide with a compiled kernel (:mod:`simulator.round_arrays`).

:class:`KernelRoundPolicy` hands its kernel and initial memory to the engine, which calls the
kernel inside its compiled loop. Its :meth:`~KernelRoundPolicy.plan` runs the same kernel on a
:class:`~simulator.rounds.RoundState` (unit tests, and harnesses that wrap a policy), keeping
the kernel's memory in ``state.memo``, so both paths decide alike. A subclass that overrides
``plan`` decides in Python instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import RoundPolicy
from simulator.jit import compiled
from simulator.round_arrays import (
    HOST,
    ClusterArrays,
    EngineState,
    JobArrays,
    PolicyMemory,
    cluster_arrays,
    decision_state,
    empty_memory,
    job_arrays_from,
)
from simulator.rounds import RoundState

__all__ = ["KernelRoundPolicy"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class KernelRoundPolicy(RoundPolicy):
    """A round policy whose decisions come from ``kernel`` (signature
    :data:`simulator.round_arrays.ROUND_KERNEL_SIG`, set as a ``staticmethod``)."""

    kernel: ClassVar[Any]

    @classmethod
    def kernels(cls) -> tuple[Any, ...]:
        """``kernel``, unless a subclass decides in Python."""
        return (cls.kernel,) if cls.plan is KernelRoundPolicy.plan else ()

    def memory(self, cluster: ClusterArrays, jobs: JobArrays) -> PolicyMemory:
        """The kernel's parameters and initial memory for ``jobs`` (default: no memory and
        :meth:`kernel_params`)."""
        return empty_memory(jobs, cluster.node_gpus.shape[0], params=self.kernel_params())

    def kernel_params(self) -> FloatArray:
        """The parameters the kernel reads (``memory.params``)."""
        return np.zeros(0)

    def host_step(self, cluster: ClusterArrays, jobs: JobArrays, memory: PolicyMemory,
                  state: EngineState, now: float) -> None:
        """The Python step a kernel asks for by returning ``HOST`` (none by default)."""
        raise NotImplementedError(f"{type(self).__name__}'s kernel asked for a host step")

    def round_kernel(self, cluster: ClusterArrays, jobs: JobArrays, workload: Any
                     ) -> tuple[Any, PolicyMemory] | None:
        """The kernel and its memory for one run (None if a subclass decides in Python)."""
        if type(self).plan is not KernelRoundPolicy.plan:
            return None
        return type(self).kernel, self.memory(cluster, jobs)

    def plan(self, state: RoundState) -> IntArray:
        """Run the kernel on ``state``; its memory lives in ``state.memo``."""
        shares = self.shares_gpus
        cluster = cluster_arrays(state.cluster, state.speeds, state.scaling, state.sharing)
        jobs = job_arrays_from(state, shares)
        memory = self._memory(state, cluster, jobs)
        engine = decision_state(jobs, state.rows, cluster, shares)
        now = float(state.now)
        kernel = compiled(type(self).kernel)
        if kernel(cluster, jobs, memory, engine, now) == HOST:
            self.host_step(cluster, jobs, memory, engine, now)
            kernel(cluster, jobs, memory, engine, now)
        if not shares:
            return memory.out_alloc[state.rows].copy()
        out = np.zeros(state.placed.shape, dtype=np.int64)
        for a, r in enumerate(state.rows):
            out[a, memory.out_wdev[jobs.woff[r]:jobs.woff[r] + memory.out_nw[r]]] = 1
        return out

    def _memory(self, state: RoundState, cluster: ClusterArrays, jobs: JobArrays
                ) -> PolicyMemory:
        """The kernel's memory kept in ``state.memo``, grown to the rows ``jobs`` covers."""
        fresh = self.memory(cluster, jobs)
        kept: PolicyMemory | None = state.memo.get("kernel_memory")
        if kept is not None:
            for name in ("f", "i", "g", "gi"):  # rows (or sized-by-rows vectors) kept
                old, new = getattr(kept, name), getattr(fresh, name)
                rows = min(old.shape[0], new.shape[0])
                new[:rows] = old[:rows]
        state.memo["kernel_memory"] = fresh
        return fresh
