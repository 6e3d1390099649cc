"""What a run of a policy compiles first: its engine's loop and its own kernels.

Nothing compiles at import (:mod:`simulator.jit`); :func:`compile_kernels` compiles these
(or loads them from the cache) ahead of a run: ``paretosearch compile`` for an image or a
job prologue, and a search before its workers start, so that they find them cached.
"""

from __future__ import annotations

from policies.base import PolicyClass, RoundPolicy
from simulator.fluid import engine
from simulator.jit import compiled
from simulator.rounds import engine as round_engine

__all__ = ["compile_kernels"]


def compile_kernels(cls: PolicyClass) -> None:
    """Compile what a run of policy ``cls`` takes into its engine (from the cache if there):
    the engine's own compiled functions and the policy's kernels."""
    engine_kernels = round_engine.KERNELS if issubclass(cls, RoundPolicy) else engine.KERNELS
    for function in (*engine_kernels, *cls.kernels()):
        compiled(function)
