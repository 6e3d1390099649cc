"""PCS Fig. 7 (workload-2) reproduced: avg JCT normalised to AFS, avg and p99 prediction error.

The paper's numbers are ``../shared/data/pcs/paper/fig7/*.csv``: six workloads x AFS,
Tiresias, Themis, FIFO, PCS-JCT, PCS-bal, PCS-pred. The rows are Philly traces: PCS's
repository first committed these files (commit 48243e2, 2024-05-01) with a trace name per
row, 0e4a51, b436b2, 6214e9, 6c71a0, 2869ce, ee9e8c (the text's examples, "80 % to 1 % for
b436b2" and "900 % to 10 % for 6214e9", sit in rows 2 and 3). Row 5, 2869ce, is not in the
shared data and is not built. Each run is PCS's set-up: the trace's first
``--jobs`` jobs (0: the whole trace, as the paper ran it) on 64 GPUs, every policy with a JCT
prediction at each arrival. Tiresias is PCS's SRSF (PCS's code runs SRSF under that name).
The PCS configurations come from ``pcs_configs.json`` (the ones PCS chose) unless ``--search``
runs PCS's search for each trace (SPEA2, population 70, 105 offspring, 370 evaluations, avg
JCT vs avg prediction error on a 2001-job sample from the trace's CDFs at load 0.8) and
picks the three points by :func:`pick` (PCS picks by hand on a plot; see there). Themis's
predictions follow PCS's code as it stands unless ``--themis-playout`` names an earlier state
(``PLAYOUTS`` in :mod:`simulator.fluid.engine`): Fig. 7's Themis errors were made before
2024-06-03, and ``--themis-playout 2024-05-30`` gives them (``docs/fidelity/pcs.md``).

Prints one table per headline: the paper's number, ours, ours / paper, with the set-up in one
line. ``--headlines jct`` prints avg JCT / AFS's alone and runs without predictions: a
prediction is a playout that never changes the schedule, and it is what makes a whole trace
costly (a playout at every arrival). Run from the project root:
``python benchmarks/reproduce/pcs_fig7.py --jobs 1000``.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from policies import AFS, FIFO, SRSF, WFQ, Policy, Themis  # noqa: E402  (after the path is set)
from simulator import (  # noqa: E402
    METRICS,
    ScalingTable,
    Workload,
    generate_from_cdfs,
    load_profile,
    measure,
    parametric_table,
    read_pcs_trace,
    simulate,
)
from simulator.fluid.engine import PLAYOUTS  # noqa: E402

PCS = ROOT.parent / "shared" / "data" / "pcs"
WORKLOADS = {1: "0e4a51", 2: "b436b2", 3: "6214e9", 4: "6c71a0", 6: "ee9e8c"}
POLICIES = ("AFS", "Tiresias", "Themis", "FIFO", "PCS-JCT", "PCS-bal", "PCS-pred")
HEADLINES = (("avg_jct_results", "avg JCT / AFS's"), ("avg_error_results", "avg pred err %"),
             ("p99_error_results", "p99 pred err %"))


def pick(front: list[tuple[dict[str, Any], dict[str, float]]]) -> dict[str, dict[str, Any]]:
    """PCS-JCT, -bal and -pred from a front of (params, {"jct:avg", "pred_err:avg"}).

    PCS's operator clicks the points on the plotted front. This rule stands in for the
    click: JCT is the front's fastest point, pred its most predictable one, bal the point
    nearest the ideal corner with both objectives scaled to [0, 1] over the front.
    """
    F = np.array([[r["jct:avg"], r["pred_err:avg"]] for _, r in front])
    span = np.where(np.ptp(F, axis=0) > 0, np.ptp(F, axis=0), 1.0)
    scaled = (F - F.min(axis=0)) / span
    return {"jct": front[int(np.argmin(F[:, 0]))][0],
            "pred": front[int(np.argmin(F[:, 1]))][0],
            "bal": front[int(np.argmin(np.hypot(scaled[:, 0], scaled[:, 1])))][0]}


def search_front(trace: str, seed: int, budget: int) -> tuple[list[Any], Workload]:
    """Run PCS's search for ``trace`` (see the module's docstring): its front and its sample."""
    from paretosearch.objectives import parse_objectives
    from paretosearch.search.evaluation import SearchSpace, Task
    from paretosearch.search.runners import SerialRunner
    from paretosearch.search.spea2 import SearchSettings, run_spea2

    sample = generate_from_cdfs(PCS / "workloads", f"workload_{trace}",
                                scaling=parametric_table(64), n_jobs=2001, load=0.8, gpus=64,
                                seed=4567, models=("linear",))
    out = run_spea2(Task("wfq", load_profile("pcs-64")), SearchSpace.of("wfq"),
                    parse_objectives(["jct:avg", "pred_err:avg"]),
                    SerialRunner([sample], sample), SearchSettings.pcs(budget, seed))
    return list(out.front), sample


def searched_configs(trace: str, seed: int, budget: int) -> dict[str, WFQ]:
    """PCS's search for ``trace`` and the three points :func:`pick` takes from its front."""
    front, sample = search_front(trace, seed, budget)
    # classes come from the training sample, as PCS derives them
    return {k: WFQ.from_params(v).fit(sample) for k, v in pick(front).items()}


def policies(trace: str, search: int, seed: int, playout: str = PLAYOUTS[0]
             ) -> dict[str, Policy]:
    """The seven policies of Fig. 7 for ``trace`` (``search``: the search's budget, 0: none;
    ``playout``: Themis's)."""
    if search:
        wfq = searched_configs(trace, seed, search)
    else:
        configs = json.loads((PCS / "configs" / "pcs_configs.json").read_text())["configs"]
        wfq = {k: WFQ.from_pcs_config(configs[f"{trace}_{k}"]) for k in ("jct", "bal", "pred")}
    return {"AFS": AFS(), "Tiresias": SRSF(), "Themis": Themis(playout=playout), "FIFO": FIFO(),
            "PCS-JCT": wfq["jct"], "PCS-bal": wfq["bal"], "PCS-pred": wfq["pred"]}


@functools.cache  # each policy's run reads it; a workload is never changed by a run
def trace_head(trace: str, jobs: int) -> Workload:
    """The trace's first ``jobs`` jobs (0: all), PCS's scaling table."""
    wl = read_pcs_trace(PCS / "traces" / f"trace_{trace}.csv",
                        scaling=ScalingTable.from_csv(PCS / "scaling_tables.csv"))
    return wl.head(jobs) if jobs else wl


def run_one(wl: Workload, policy: Policy, predict: bool = True) -> dict[str, float]:
    """One run, with a prediction at each arrival if ``predict``: avg JCT (s), avg and p99
    prediction error (%; NaN without predictions) and its CPU seconds."""
    t0 = time.process_time()
    r = simulate(wl, load_profile("pcs-64"), policy, predict=predict)
    err = METRICS["pred_err"].compute(r)  # all NaN without predictions
    return {"jct": float(r.jct_s.mean()), "avg_err": measure(err, "avg"),
            "p99_err": measure(err, "p99"), "cpu_s": time.process_time() - t0,
            "jobs": len(wl)}


def _run_named(trace: str, jobs: int, name: str, policy: Policy, predict: bool
               ) -> dict[str, float]:
    """:func:`run_one` on the trace's first ``jobs`` jobs, its figures printed as it ends (a
    long run, a whole trace, keeps each as it finishes)."""
    out = run_one(trace_head(trace, jobs), policy, predict)
    print(f"# {trace} {name}: {out['jobs']} jobs, avg JCT {out['jct']:.1f} s, avg/p99 err "
          f"{out['avg_err']:.3f}/{out['p99_err']:.3f} %, {out['cpu_s']:.1f} CPU-s",
          file=sys.stderr, flush=True)
    return out


def run_traces(traces: list[str], jobs: int, search: int, seed: int, predict: bool = True,
               playout: str = PLAYOUTS[0], processes: int = 1
               ) -> dict[str, dict[str, dict[str, float]]]:
    """Per trace and policy of Fig. 7: :func:`run_one` on the trace's first ``jobs`` jobs,
    on ``processes`` processes (the runs are independent; figures do not depend on where
    each ran)."""
    runs = [(trace, jobs, name, policy, predict) for trace in traces
            for name, policy in policies(trace, search, seed, playout).items()]
    if processes > 1:
        with ProcessPoolExecutor(processes, mp_context=get_context("fork")) as pool:
            figures = list(pool.map(_run_named, *zip(*runs, strict=True)))
    else:
        figures = [_run_named(*run) for run in runs]
    out: dict[str, dict[str, dict[str, float]]] = {trace: {} for trace in traces}
    for (trace, _, name, _, _), fig in zip(runs, figures, strict=True):
        out[trace][name] = fig
    return out


def fastest(front: list[tuple[dict[str, Any], dict[str, float]]], k: int
            ) -> list[tuple[dict[str, Any], dict[str, float]]]:
    """The ``k`` entries of ``front`` with the lowest avg JCT on the search's sample, fastest
    first (0: every entry, in the front's order): the end PCS-JCT is picked from."""
    return sorted(front, key=lambda e: e[1]["jct:avg"])[:k] if k else front


def front_span(trace: str, jobs: int, seeds: list[int], budget: int,
               predict: bool = True, k: int = 0) -> dict[str, Any]:
    """Every entry (or the :func:`fastest` ``k``) of the fronts of PCS's search over
    ``seeds``, run on the trace's first ``jobs`` jobs: per headline (as in Fig. 7), one
    value per distinct entry."""
    afs = _run_named(trace, jobs, "AFS", AFS(), predict)
    runs: dict[str, dict[str, float]] = {}
    for seed in seeds:
        front, sample = search_front(trace, seed, budget)
        for i, (params, _) in enumerate(fastest(front, k)):
            key = json.dumps(params, sort_keys=True, default=str)
            if key not in runs:
                runs[key] = _run_named(trace, jobs, f"seed {seed} entry {i}",
                                       WFQ.from_params(params).fit(sample), predict)
        print(f"# {trace} seed {seed}: front of {len(front)}, {len(runs)} distinct entries "
              "run so far", file=sys.stderr, flush=True)
    rows = list(runs.values())
    return {"figures": np.array([[r["jct"] / afs["jct"], r["avg_err"], r["p99_err"]]
                                 for r in rows]),
            "cpu_s": afs["cpu_s"] + sum(r["cpu_s"] for r in rows)}


def table(paper: pd.DataFrame, ours: dict[int, dict[str, dict[str, float]]], headline: str,
          title: str, setup: str) -> str:
    """One headline: per workload and policy, the paper's number, ours and the ratio."""
    lines = [f"## {title}  ({setup})",
             f"{'workload':>10} {'policy':>9} {'paper':>9} {'ours':>9} {'ours/paper':>10}"]
    for k, res in ours.items():
        afs = res["AFS"]["jct"]
        for name in POLICIES:
            want = float(paper.loc[paper.workload == k, name].iloc[0])
            got = {"avg_jct_results": res[name]["jct"] / afs,
                   "avg_error_results": res[name]["avg_err"],
                   "p99_error_results": res[name]["p99_err"]}[headline]
            ratio = f"{got / want:10.2f}" if want > 0 else f"{'-':>10}"
            lines.append(f"{k:>4} {WORKLOADS[k]:>5} {name:>9} {want:9.3f} {got:9.3f} {ratio}")
    return "\n".join(lines)


def span_tables(spans: dict[int, dict[str, Any]], setup: str, headlines: int = 3) -> str:
    """Per headline (the first ``headlines`` of :data:`HEADLINES`) and workload, the span
    (min-max) of every front entry's figure on the trace and whether each of the paper's PCS
    points lies in it (``in``: some pick reaches it on that headline); then, with all three
    headlines, per PCS point the one entry nearest it on all three at once (its largest
    ours / paper or paper / ours)."""
    pcs = ("PCS-JCT", "PCS-bal", "PCS-pred")
    papers = [pd.read_csv(PCS / "paper" / "fig7" / f"{stem}.csv") for stem, _ in HEADLINES]
    want = {k: np.array([[float(p.loc[p.workload == k, n].iloc[0]) for p in papers]
                         for n in pcs]) for k in spans}
    out = []
    for h, (_, title) in enumerate(HEADLINES[:headlines]):
        lines = [f"## {title}: span of the search fronts on the trace  ({setup})",
                 f"{'workload':>10} {'entries':>7} {'min':>9} {'max':>9} "
                 + " ".join(f"{n:>13}" for n in pcs)]
        for k, span in spans.items():
            v = span["figures"][:, h]
            cells = [f"{w:9.3f} {'in' if v.min() <= w <= v.max() else 'out':>3}"
                     for w in want[k][:, h]]
            lines.append(f"{k:>4} {WORKLOADS[k]:>5} {len(v):>7} {v.min():9.3f} "
                         f"{v.max():9.3f} " + " ".join(cells))
        out.append("\n".join(lines))
    if headlines < len(HEADLINES):
        return "\n\n".join(out)
    lines = ["## the entry nearest each PCS point on all three headlines: its figures "
             "(JCT / avg err / p99 err) and its largest factor off the paper's",
             f"{'workload':>10} " + " ".join(f"{n:>31}" for n in pcs)]
    for k, span in spans.items():
        cells = []
        for w in want[k]:
            with np.errstate(divide="ignore"):  # an entry with no error is infinitely off
                off = np.abs(np.log(span["figures"] / w)).max(axis=1)
            best = span["figures"][int(np.argmin(off))]
            cells.append(f"{best[0]:6.2f} / {best[1]:5.1f} / {best[2]:5.0f} "
                         f"x{np.exp(off.min()):5.2f}")
        lines.append(f"{k:>4} {WORKLOADS[k]:>5} " + " ".join(cells))
    out.append("\n".join(lines))
    return "\n\n".join(out)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=1000,
                   help="first N jobs of each trace (0: whole traces, as the paper; heavy)")
    p.add_argument("--workloads", default="1,2,3,4,6",
                   help="Fig. 7 rows to run (1-4, 6; row 5 is 2869ce, not in the shared data)")
    p.add_argument("--search", action="store_true",
                   help="run PCS's search per trace for the PCS configs (370 simulations of "
                        "2001 jobs each, serially) instead of pcs_configs.json")
    p.add_argument("--budget", type=int, default=370, help="the search's evaluations")
    p.add_argument("--seed", type=int, default=0, help="the search's seed")
    p.add_argument("--span", default="",
                   help="search seeds, e.g. 0,1,2: instead of the seven-policy tables, run "
                        "every entry of each seed's front on the trace and print, per "
                        "headline, the span of the PCS points a pick could give")
    p.add_argument("--fastest", type=int, default=0, metavar="K",
                   help="with --span: run only each front's K entries fastest on the "
                        "search's sample (the end PCS-JCT is picked from; a whole trace with "
                        "predictions costs minutes an entry, the slow end the most)")
    p.add_argument("--headlines", choices=("all", "jct"), default="all",
                   help="jct: avg JCT / AFS's alone, run without predictions (a whole trace "
                        "costs seconds instead of the playouts' minutes to hours)")
    p.add_argument("--themis-playout", choices=PLAYOUTS, default=PLAYOUTS[0],
                   help="Themis's predictions as PCS's code of that date made them (default: "
                        "as it stands; Fig. 7's were made before 2024-06-03: 2024-05-30)")
    p.add_argument("--processes", type=int, default=1,
                   help="run the simulations on N processes (a whole trace's seven runs are "
                        "independent: on 2 cores, --processes 2 halves the wall time)")
    args = p.parse_args(argv)
    if args.processes < 1:
        p.error(f"--processes: {args.processes} is not a positive number of processes")
    if args.fastest < 0:
        p.error(f"--fastest: {args.fastest} is not a number of entries (0: all)")
    predict = args.headlines == "all"
    heads = HEADLINES if predict else HEADLINES[:1]
    prediction = "prediction at arrival" if predict else "no prediction (JCT only)"
    rows = [int(k) for k in args.workloads.split(",")]
    bad = [k for k in rows if k not in WORKLOADS]
    if bad:
        p.error(f"--workloads: {bad[0]} is not one of {sorted(WORKLOADS)} (row 5 is trace "
                "2869ce, which the shared data does not have)")
    if args.span:
        seeds = [int(x) for x in args.span.split(",")]
        spans = {k: front_span(WORKLOADS[k], args.jobs, seeds, args.budget, predict,
                               args.fastest) for k in rows}
        entries = f"the {args.fastest} fastest entries" if args.fastest else "every entry"
        setup = (f"first {args.jobs or 'all'} jobs, 64 GPUs, {prediction}, {entries} of the "
                 f"fronts of seeds {args.span}, {args.budget} evaluations each")
        print(span_tables(spans, setup, len(heads)), end="\n\n")
        n = sum(len(v["figures"]) + 1 for v in spans.values())
        cpu = sum(v["cpu_s"] for v in spans.values())
        print(f"simulations of the traces: {n}, {cpu:.1f} CPU-s (the searches aside)")
        return
    search = args.budget if args.search else 0
    runs = run_traces([WORKLOADS[k] for k in rows], args.jobs, search, args.seed, predict,
                      args.themis_playout, args.processes)
    ours = {k: runs[WORKLOADS[k]] for k in rows}
    source = f"our SPEA2 search ({search} evaluations)" if search else "pcs_configs.json"
    setup = (f"first {args.jobs or 'all'} jobs of each trace, 64 GPUs, {prediction}, "
             f"PCS configs from {source}, Themis's playout as PCS's code of "
             f"{args.themis_playout}")
    for stem, title in heads:
        paper = pd.read_csv(PCS / "paper" / "fig7" / f"{stem}.csv")
        print(table(paper, ours, stem, title, setup), end="\n\n")
    cpu = sum(v["cpu_s"] for res in ours.values() for v in res.values())
    print(f"simulations: {len(rows) * len(POLICIES)}, {cpu:.1f} CPU-s in all")


if __name__ == "__main__":
    main()
