"""``paretosearch compile``, and the line a command prints before it compiles kernels.

Kernels compile on first use and are cached (:mod:`simulator.jit`, docs/startup.md). The
first run on a machine compiles its engine and policy for a while; :func:`compiling` says so
on standard error, once, the moment a compilation starts (never for kernels loaded from the
cache). A search first compiles its policy's kernels in this process, so that the line comes
before the workers need them and they find them cached.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

from rich.console import Console

from paretosearch.cli.runs import error_console
from policies import REGISTRY, RoundPolicy, get_policy
from policies.compiling import compile_kernels
from simulator.jit import cache_dir, compile_notice

__all__ = ["add_compile_command", "compiling", "run_compile"]

ENGINE_S = {"fluid": 20, "round": 100}
"""Rough CPU-seconds to compile an engine's loop and one of its policies' kernels on a cold
cache (WFQ and Hadar in benchmarks/bench_startup.py on a 2-core machine; docs/startup.md)."""
KERNEL_S = 10
"""Rough CPU-seconds for each further policy's kernel."""


def add_compile_command(sub: Any) -> None:
    """The ``compile`` subcommand."""
    p = sub.add_parser("compile", help="compile the simulator's kernels into the cache now "
                                       "(an image build, a job prologue, a CI cache)")
    p.add_argument("--policy", action="append", metavar="NAME",
                   help="a policy whose kernels to compile (repeatable; default: every policy)")


def run_compile(args: argparse.Namespace, console: Console) -> None:
    """Compile (or find cached) the kernels of the policies asked for."""
    classes = [get_policy(name) for name in args.policy or sorted(REGISTRY)]
    for cls in classes:
        compile_kernels(cls)
    console.print(f"kernels of {len(classes)} {'policy' if len(classes) == 1 else 'policies'} "
                  f"cached in {cache_dir()}")


def _names(args: argparse.Namespace) -> list[str]:
    """The known policies the command names (an unknown one is the command's error)."""
    asked = args.policy or sorted(REGISTRY) if args.command == "compile" else [
        getattr(args, "policy", None)]
    return [n for n in asked if isinstance(n, str) and n.lower() in REGISTRY]


def _estimate_s(names: list[str]) -> int:
    families = {"round" if issubclass(REGISTRY[n.lower()], RoundPolicy) else "fluid"
                for n in names}
    return sum(ENGINE_S[f] for f in families) + KERNEL_S * max(0, len(names) - len(families))


@contextlib.contextmanager
def compiling(args: argparse.Namespace) -> Iterator[None]:
    """Around a command: one line on standard error before its first kernel compiles; a
    search's policy compiled here first (module docstring)."""
    names = _names(args)
    what = ", ".join(names) or args.command
    estimate = f", ~{_estimate_s(names)} s" if names else ""

    def say() -> None:
        error_console().print(f"compiling the simulator's kernels for {what} (first run on "
                              f"this machine{estimate})…", highlight=False)

    with compile_notice(say):
        if args.command == "search" and names and not getattr(args, "resume", None):
            compile_kernels(REGISTRY[names[0].lower()])
        yield
