"""Round policies that decide with a compiled kernel (the contract: :mod:`simulator.rounds.view`).

:class:`KernelRoundPolicy` hands its kernel and initial memory to the engine, which calls the
kernel inside its compiled loop. Its :meth:`~KernelRoundPolicy.plan` runs the same kernel on a
:class:`~simulator.rounds.RoundState` (:func:`simulator.rounds.python_path.kernel_plan`: unit tests,
and harnesses that wrap a policy), keeping the kernel's memory in ``state.memo``, so both paths
decide alike. A subclass that overrides ``plan`` decides in Python instead (the on-ramp,
:mod:`simulator.rounds.python_path`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import RoundPolicy
from simulator.jit import compiled
from simulator.rounds import RoundState
from simulator.rounds.python_path import kernel_plan
from simulator.rounds.view import (
    ClusterArrays,
    JobView,
    Layout,
    PolicyMemory,
    StateView,
    empty_memory,
)

__all__ = ["KernelRoundPolicy"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class KernelRoundPolicy(RoundPolicy):
    """A round policy whose decisions come from ``kernel`` (signature
    :data:`simulator.rounds.view.ROUND_KERNEL_SIG`, set as a ``staticmethod``)."""

    kernel: ClassVar[Any]
    clairvoyant: ClassVar[bool] = False
    """Whether the kernel sees the true work left as ``jobs.est`` (a policy reproducing a
    scheduler that knows it, as Gavel's simulator knows each job's steps)."""
    layouts: ClassVar[dict[str, Layout]] = {}
    """The kernel's memory, declared: a :class:`~simulator.rounds.view.Layout` per memory
    array it keeps (``"f"``, ``"i"``, ``"g"``, ``"gi"``; none: no memory). :meth:`memory` sizes
    those arrays from them; the kernels read columns by their names."""

    @classmethod
    def kernels(cls) -> tuple[Any, ...]:
        """``kernel``, unless a subclass decides in Python."""
        return (cls.kernel,) if cls.plan is KernelRoundPolicy.plan else ()

    def memory(self, cluster: ClusterArrays, jobs: JobView) -> PolicyMemory:
        """The kernel's parameters and initial memory for ``jobs`` (default: zeros as
        :attr:`layouts` declares, and :meth:`kernel_params`)."""
        return empty_memory(jobs, cluster.node_gpus.shape[0], params=self.kernel_params(),
                            **self.layouts)

    def kernel_params(self) -> FloatArray:
        """The parameters the kernel reads (``memory.params``)."""
        return np.zeros(0)

    def host_step(self, cluster: ClusterArrays, jobs: JobView, memory: PolicyMemory,
                  state: StateView, now: float) -> None:
        """The Python step a kernel asks for by returning ``HOST`` (none by default)."""
        raise NotImplementedError(f"{type(self).__name__}'s kernel asked for a host step")

    def round_kernel(self, cluster: ClusterArrays, jobs: JobView, workload: Any
                     ) -> tuple[Any, PolicyMemory] | None:
        """The kernel and its memory for one run (None if a subclass decides in Python)."""
        if type(self).plan is not KernelRoundPolicy.plan:
            return None
        return type(self).kernel, self.memory(cluster, jobs)

    def plan(self, state: RoundState) -> IntArray:
        """Run the kernel on ``state``; its memory lives in ``state.memo``."""
        return kernel_plan(compiled(type(self).kernel), self.host_step,
                           lambda cluster, jobs: self._memory(state, cluster, jobs), state,
                           self.shares_gpus, self.clairvoyant)

    def _memory(self, state: RoundState, cluster: ClusterArrays, jobs: JobView
                ) -> PolicyMemory:
        """The kernel's memory kept in ``state.memo``, grown to the rows ``jobs`` covers."""
        fresh = self.memory(cluster, jobs)
        kept: PolicyMemory | None = state.memo.get("kernel_memory")
        if kept is not None:
            for name in ("f", "i", "g", "gi", "out_stop"):  # rows (or sized-by-rows vectors)
                old, new = getattr(kept, name), getattr(fresh, name)
                rows = min(old.shape[0], new.shape[0])
                new[:rows] = old[:rows]
        state.memo["kernel_memory"] = fresh
        return fresh
