"""How to draw the embedded default's samples so that what wins on train wins on test (issue 40).

No search: per seed, ``--configs`` WFQ configurations spread over its space (a scrambled
Halton sequence) and the baselines are each simulated on every one of ``2 R`` generated
draws (``R = --replicates``), drawn as ``PolicySearch`` draws them: the first R train, the
last R test, WFQ fitted to the first. For ``r`` = 1 and R training draws (and as many test
draws, averaged, common random numbers), and for each pair of objectives (``--pair``):

  front   configurations no other dominates on the training draws
  dom%    share of the front some baseline dominates on the test draws
  rho     Spearman rank correlation of each objective, train against test, over the front
          (``rho all``: over every configuration)
  range   each objective's smallest and largest value over the front (train): a pair whose
          second objective barely moves does not trade off

Also printed per draw: the draw's mean job size, the share of all work in its ten largest
jobs, and FIFO's and SRSF's avg JCT, which show where train and test differ.

``python benchmarks/bench_sample_design.py --seeds 0 --configs 16 --jobs 1000``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
from scipy.stats import qmc, spearmanr

from paretosearch.objectives import dominates, parse_objectives
from paretosearch.search.evaluation import SearchSpace, Task, evaluate
from paretosearch.service.api import BASELINES
from simulator import Workload, generate, load_profile

PROFILE = load_profile("pcs-64")


def _one(name: str, params: dict[str, Any], wl: Workload, fit: Workload) -> dict[str, float]:
    return evaluate(Task(name, PROFILE), params, [wl], fit)


def _front(records: list[dict[str, float]], objectives: Any) -> list[int]:
    return [i for i, r in enumerate(records)
            if not any(dominates(o, r, objectives) for o in records)]


def _rho(a: list[float], b: list[float]) -> float:
    if len(set(a)) < 3 or len(set(b)) < 3:
        return float("nan")
    return float(spearmanr(a, b).statistic)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="0", help="comma-separated (default: 0)")
    p.add_argument("--configs", type=int, default=16, help="WFQ configurations (default: 16)")
    p.add_argument("--jobs", type=int, default=1000, help="jobs per draw (default: 1000)")
    p.add_argument("--replicates", type=int, default=3, help="R (default: 3)")
    p.add_argument("--pair", action="append", metavar="A,B",
                   help="objective pair (repeatable; default: jct:avg,pred_err:avg and "
                        "jct:avg,pred_err:p99)")
    p.add_argument("--workers", type=int, default=1, help="processes (default: 1)")
    p.add_argument("--save", metavar="FILE", help="also write every record (JSON lines)")
    args = p.parse_args()
    pairs = [parse_objectives(x.split(",")) for x in
             (args.pair or ["jct:avg,pred_err:avg", "jct:avg,pred_err:p99"])]
    R = args.replicates
    space = SearchSpace.of("wfq")
    for seed in map(int, args.seeds.split(",")):
        draws = [generate(args.jobs, load=0.9, gpus=PROFILE.total_gpus, seed=d)
                 for d in np.random.SeedSequence(seed).spawn(2 * R)]
        units = qmc.Halton(len(space), rng=np.random.default_rng(seed)).random(args.configs)
        configs = [("wfq", space.decode(space.unit_codes(u))) for u in units]
        configs += [(name, {}) for name in BASELINES]
        work = [(name, params, wl, draws[0]) for name, params in configs for wl in draws]
        if args.workers > 1:
            with ProcessPoolExecutor(args.workers,
                                     mp_context=multiprocessing.get_context("fork")) as pool:
                flat = list(pool.map(_one, *zip(*work, strict=True)))
        else:
            flat = [_one(*w) for w in work]
        per_draw = [flat[k * len(draws):(k + 1) * len(draws)] for k in range(len(configs))]
        if args.save:
            with open(args.save, "a") as f:
                for (name, params), recs in zip(configs, per_draw, strict=True):
                    f.write(json.dumps({"seed": seed, "policy": name, "params": params,
                                        "draws": recs}) + "\n")
        for d, wl in enumerate(draws):
            service = wl.to_frame()["service_s"].to_numpy()
            top = np.sort(service)[::-1][:10].sum() / service.sum()
            jct = {name: per_draw[len(configs) - len(BASELINES) + BASELINES.index(name)][d][
                "jct:avg"] for name in ("fifo", "srsf")}
            print(f"seed {seed} draw {d} ({'train' if d < R else 'test'}): mean job "
                  f"{service.mean():,.0f} GPU-s, top-10 share {top:.2f}, FIFO avg JCT "
                  f"{jct['fifo']:,.0f} s, SRSF {jct['srsf']:,.0f} s")
        for r in sorted({1, R}):
            def mean(recs: list[dict[str, float]], first: int, r: int = r) -> dict[str, float]:
                return {k: float(np.mean([x[k] for x in recs[first:first + r]]))
                        for k in recs[0]}

            train = [mean(recs, 0) for recs in per_draw]
            test = [mean(recs, R) for recs in per_draw]
            n = args.configs
            for objectives in pairs:
                front = _front(train[:n], objectives)
                dom = np.mean([any(dominates(b, test[i], objectives) for b in test[n:])
                               for i in front])
                cells = []
                for o in objectives:
                    a = [train[i][o.label] for i in front]
                    b = [test[i][o.label] for i in front]
                    every = _rho([x[o.label] for x in train[:n]], [x[o.label] for x in test[:n]])
                    cells.append(f"{o.label}: rho {_rho(a, b):5.2f} (all {every:5.2f}), range "
                                 f"{min(a):,.4g}..{max(a):,.4g}")
                print(f"seed {seed} r={r}: {len(front):2d} on the front, dom% "
                      f"{100 * dom:3.0f}; " + "; ".join(cells))


if __name__ == "__main__":
    main()
