"""What the Optuna copy of a search (``optuna.log``) costs in wall time.

Runs the API search of the embedded default problem (WFQ, generated workload, pcs-64,
``jct:avg`` vs ``pred_err:avg``) serially into a fresh run directory, timing every call of
the copy (per generation, and the last one with the front and baselines) against the whole
search. Run from the project root: ``python benchmarks/bench_optuna_copy.py``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from paretosearch.runs.optuna_copy import OptunaCopy, load_study
from paretosearch.search.spea2 import SearchSettings
from paretosearch.service.api import PolicySearch, SearchConfig


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=int, default=370)
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    calls: list[float] = []
    add, init = OptunaCopy.add, OptunaCopy.__init__

    def timed(f: Any) -> Any:
        def call(*a: Any, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                calls.append(time.perf_counter() - start)
        return call

    OptunaCopy.add, OptunaCopy.__init__ = timed(add), timed(init)  # type: ignore[method-assign]
    # compile and load before the clock starts
    PolicySearch(config=SearchConfig(jobs=50)).evaluate("fifo", {})
    with tempfile.TemporaryDirectory() as run_dir:
        settings = SearchSettings(budget=args.budget, seed=args.seed)
        search = PolicySearch(config=SearchConfig(jobs=args.jobs, settings=settings),
                              store=run_dir)
        search.SetPreference("jct:avg", "pred_err:avg")
        start = time.perf_counter()
        search.run()
        wall = time.perf_counter() - start
        trials = len(load_study(Path(run_dir) / "optuna.log").trials)
    copy = sum(calls)
    print(f"{args.budget} evaluations, {args.jobs} jobs: search {wall:.1f} s, of which the "
          f"Optuna copy {copy:.2f} s in {len(calls)} calls ({trials} trials): "
          f"{100 * copy / wall:.1f} % of the wall time, "
          f"{100 * copy / (wall - copy):.1f} % added to the search without it")


if __name__ == "__main__":
    main()
