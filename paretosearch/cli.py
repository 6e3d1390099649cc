"""The ``paretosearch`` command line: a thin layer over the Python API."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from paretosearch.io import write_json, write_table
from paretosearch.store import RunStore
from policies import REGISTRY, WFQ, Policy, get_policy
from simulator import (
    METRICS,
    ParetoSearchError,
    ScalingTable,
    Workload,
    generate,
    generate_from_cdfs,
    list_profiles,
    load_profile,
    parametric_table,
    read_trace,
    simulate,
    summary,
)
from simulator.errors import InvalidPolicyParams

__all__ = ["main"]

EPILOG = """examples:
  paretosearch simulate                                   # generated workload, pcs-64, WFQ
  paretosearch simulate --policy srsf --generate 2000 --load 0.8
  paretosearch simulate --trace ../shared/data/pcs/traces/trace_0e4a51.csv --jobs 1000 \\
      --scaling-table ../shared/data/pcs/scaling_tables.csv \\
      --config ../shared/data/pcs/configs/pcs_configs.json:0e4a51_bal --predict --out jobs.csv
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="paretosearch",
                                description="Multi-objective policy search for GPU clusters.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sim = sub.add_parser("simulate", help="replay a workload under one policy, print metrics",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = sim.add_argument_group("workload (default: the built-in generator)")
    src.add_argument("--trace", type=Path, metavar="PATH",
                     help="a PCS/Philly trace CSV, or a CSV/Parquet in the workload schema")
    src.add_argument("--generate", type=int, default=1000, metavar="N",
                     help="jobs of the built-in Philly-like generator (default: 1000)")
    src.add_argument("--load", type=float, default=0.9,
                     help="offered load for generated workloads (default: 0.9)")
    src.add_argument("--cdf", metavar="NAME",
                     help="generate from PCS CDF files cdf-*-NAME.csv instead (e.g. "
                          "workload_0e4a51); needs --cdf-dir and a --scaling-table")
    src.add_argument("--cdf-dir", type=Path, metavar="DIR", help="folder of PCS CDF files")
    src.add_argument("--scaling-table", type=Path, metavar="PATH",
                     help="per-model speed-up CSV (model,gpus,speedup[,time_per_iter_us])")
    src.add_argument("--jobs", type=int, metavar="N", help="keep only the first N jobs")
    src.add_argument("--seed", type=int, default=0, help="seed of generated workloads")
    pol = sim.add_argument_group("policy and cluster")
    pol.add_argument("--profile", default="pcs-64",
                     help="cluster profile name or YAML path (default: pcs-64)")
    pol.add_argument("--policy", default="wfq",
                     help=f"one of {', '.join(sorted(REGISTRY))} (default: wfq)")
    pol.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="override a policy parameter (repeatable); VALUE is JSON or text")
    pol.add_argument("--config", metavar="FILE[:KEY]",
                     help='policy config JSON: {"policy": ..., "params": {...}}, or a PCS '
                          "pcs_configs.json entry (FILE:KEY picks one from its configs)")
    out = sim.add_argument_group("output")
    out.add_argument("--predict", action=argparse.BooleanOptionalAction, default=False,
                     help="predict each job's JCT at arrival by playout (default: off)")
    out.add_argument("--out", type=Path, metavar="FILE",
                     help="write per-job records to FILE (.csv or .parquet)")
    out.add_argument("--json", action="store_true", help="print the metrics as JSON")
    _search_parser(sub)
    front = sub.add_parser("front", help="print a run's Pareto front and plot it to PNG")
    front.add_argument("run", type=Path, help="the run directory")
    front.add_argument("--png", type=Path, help="where to write the plot (default: RUN/front.png)")
    sel = sub.add_parser("select", help="choose one configuration from a run's front")
    sel.add_argument("run", type=Path, help="the run directory")
    how = sel.add_mutually_exclusive_group()
    how.add_argument("--index", type=int, help="the front entry with this index (default: 0)")
    how.add_argument("--knee", action="store_true", help="the knee point")
    how.add_argument("--where", action="append", metavar="EXPR",
                     help="a constraint such as 'pred_err:p99 <= 100' (repeatable)")
    how.add_argument("--weights", metavar="W1,W2,...", help="one weight per objective")
    sel.add_argument("--minimize", metavar="METRIC:MEASURE", help="with --where: what to minimise")
    sel.add_argument("--out", type=Path, help="also write the chosen config to this JSON file")
    sub.add_parser("policies", help="list policies with their parameters and domains")
    sub.add_parser("profiles", help="list the shipped cluster profiles")
    return p


SEARCH_OPTIONS = ("trace", "generate", "load", "replicates", "profile", "policy", "objective",
                  "set", "budget", "pop_size", "offspring", "seed")
"""The options that define a search; saved in the run (``cli.json``) so --resume needs none."""


def _search_parser(sub: Any) -> None:
    p = sub.add_parser("search", help="search a policy's settings for a Pareto front",
                       description="Search with SPEA2; with no arguments: a generated workload, "
                                   "pcs-64, WFQ, jct:avg vs pred_err:avg, on a local Dask "
                                   "cluster. The run is published in --run-dir.")
    p.add_argument("--trace", metavar="PATH",
                   help="trace to search on (first half trains, second half tests)")
    p.add_argument("--generate", type=int, default=1000, metavar="N",
                   help="jobs per generated sample (default: 1000)")
    p.add_argument("--load", type=float, default=0.9, help="load of generated samples")
    p.add_argument("--replicates", type=int, default=1,
                   help="generated samples averaged per evaluation (default: 1)")
    p.add_argument("--profile", default="pcs-64", help="cluster profile (default: pcs-64)")
    p.add_argument("--policy", default="wfq", help="policy family to tune (default: wfq)")
    p.add_argument("--objective", action="append", metavar="METRIC:MEASURE",
                   help="objective, repeatable (default: jct:avg and pred_err:avg)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="hold a parameter fixed (repeatable)")
    p.add_argument("--budget", type=int, default=370, help="evaluations (default: 370)")
    p.add_argument("--pop-size", type=int, default=70, help="SPEA2 archive size (default: 70)")
    p.add_argument("--offspring", type=int, default=105, help="offspring per generation")
    p.add_argument("--seed", type=int, default=0, help="search seed (default: 0)")
    p.add_argument("--workers", type=int, default=2,
                   help="Dask LocalCluster worker processes; 0 evaluates serially (default: 2)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="use a running Dask scheduler instead of a local cluster")
    p.add_argument("--run-dir", type=Path,
                   help="where to publish the run (default: runs/<date-time>, with runs/latest "
                        "pointing at it)")
    p.add_argument("--resume", type=Path, metavar="RUN",
                   help="continue the interrupted run in RUN with its own settings")


def _search(args: argparse.Namespace, console: Console) -> None:
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from paretosearch.api import PolicySearch, SearchSettings

    if args.resume is not None:
        args.run_dir = args.resume
        saved = RunStore(args.resume).path / "cli.json"
        if not saved.exists():
            raise ParetoSearchError(f"{args.resume}: no cli.json; not a run of 'paretosearch "
                                    "search' (or it never started)")
        vars(args).update(json.loads(saved.read_text()))
    default_dir = args.run_dir is None
    if default_dir:
        args.run_dir = Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    search = PolicySearch(
        args.trace, profile=args.profile, policy=args.policy, fixed=_overrides(args.set),
        settings=SearchSettings(budget=args.budget, pop_size=args.pop_size,
                                n_offsprings=args.offspring, seed=args.seed),
        run_dir=args.run_dir, workers=args.workers, jobs=args.generate, load=args.load,
        replicates=args.replicates)
    search.SetPreference(*(args.objective or ["jct:avg", "pred_err:avg"]))
    if args.resume is None:
        if (args.run_dir / "run.json").exists():
            raise ParetoSearchError(f"{args.run_dir} already holds a run: resume it with "
                                    f"--resume {args.run_dir}, or pass another --run-dir")
        if default_dir:
            _point_latest(args.run_dir)
        write_json({k: getattr(args, k) for k in SEARCH_OPTIONS}, args.run_dir / "cli.json")
    bar = Progress(TextColumn("[bold]generation {task.fields[gen]}[/bold]"), BarColumn(),
                   TextColumn("{task.completed}/{task.total} evaluations"),
                   TextColumn("hypervolume {task.fields[hv]:.4g}"), TimeRemainingColumn(),
                   console=console, transient=True)
    with bar, _dask_client(args.scheduler) as client:
        search.client = client
        task = bar.add_task("search", total=args.budget, hv=0.0, gen=0)
        search.run(lambda p: bar.update(task, completed=min(p.evaluations, args.budget),
                                        hv=p.hypervolume, gen=p.generation),
                   resume=args.resume is not None)
    _front(args.run_dir, None, console)


def _point_latest(run: Path) -> None:
    """Make ``runs/latest`` point at ``run`` (replaced atomically)."""
    run.mkdir(parents=True, exist_ok=True)
    tmp = run.parent / f".latest-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run.name)
    os.replace(tmp, run.parent / "latest")


@contextlib.contextmanager
def _dask_client(address: str | None) -> Iterator[Any]:
    """A client of a running scheduler, or None (the search starts its own cluster)."""
    if address is None:
        yield None
        return
    from distributed import Client

    with Client(address) as client:  # type: ignore[no-untyped-call]
        yield client


def _front(run: Path, png: Path | None, console: Console) -> None:
    from paretosearch.plots import plot_front

    doc = RunStore(run).read_front()
    front = doc["front"]
    if not front:
        raise ParetoSearchError(f"{run}: the front is empty")
    labels = list(front[0]["objectives"])
    params = list(front[0]["params"])
    status = "" if doc.get("done") else " — search still running or interrupted"
    table = Table(title=f"Pareto front of {run}: {len(front)} configurations{status}")
    table.add_column("#", justify="right")
    for name in labels:
        table.add_column(name, justify="right")
        table.add_column("test", justify="right", style="dim")
    for name in params:
        table.add_column(name, justify="right", style="cyan")
    for i, entry in enumerate(front):
        test = entry.get("test_metrics") or {}
        cells = []
        for name in labels:
            cells += [_fmt(entry["objectives"][name]), _fmt(test.get(name, math.nan))]
        cells += [f"{entry['params'][p]:.4g}" for p in params]
        table.add_row(str(i), *cells)
    for name, rec in (doc.get("baselines") or {}).items():
        cells = [c for n in labels for c in (_fmt(rec[n]), "")]
        table.add_row(name, *cells, *([""] * len(params)), style="red")
    console.print(table)
    path = plot_front(doc, png or RunStore(run).path / "front.png", title=str(run))
    console.print(f"plot written to {path}")


def _select(args: argparse.Namespace, console: Console) -> None:
    from paretosearch import select as choose
    from paretosearch.objectives import parse_objectives

    store = RunStore(args.run)
    front = store.read_front()["front"]
    objectives = parse_objectives(store.read_spec()["objectives"])
    if args.knee:
        i = choose.knee(front, objectives)
    elif args.where:
        if not args.minimize:
            raise ParetoSearchError("--where needs --minimize METRIC:MEASURE")
        i = choose.by_constraints(front, args.where, args.minimize)
    elif args.weights:
        i = choose.by_weights(front, objectives, [float(w) for w in args.weights.split(",")])
    else:
        i = choose.by_index(front, args.index if args.index is not None else 0)
    spec = store.read_spec()
    choice = {"policy": spec["policy"], "params": {**spec["fixed"], **front[i]["params"]},
              "objectives": front[i]["objectives"], "test_metrics": front[i]["test_metrics"],
              "front_index": i, "run": str(args.run)}
    store.write_choice(choice)
    if args.out:
        write_json(choice, args.out)
    console.print_json(json.dumps(choice, default=lambda v: None))
    console.print(f"saved to {store.path / 'chosen.json'}" + (f" and {args.out}" if args.out
                                                                else ""))


def _scaling(args: argparse.Namespace, gpus: int) -> ScalingTable:
    base = parametric_table(gpus)
    if args.scaling_table is None:
        return base
    return ScalingTable.from_csv(args.scaling_table).merged(base)


def _workload(args: argparse.Namespace, gpus: int) -> Workload:
    scaling = _scaling(args, gpus)
    if args.trace is not None:
        wl = read_trace(args.trace, scaling=scaling)
    elif args.cdf is not None:
        if args.cdf_dir is None:
            raise ParetoSearchError("--cdf needs --cdf-dir (the folder of PCS CDF files)")
        wl = generate_from_cdfs(args.cdf_dir, args.cdf, scaling=scaling, n_jobs=args.generate,
                                load=args.load, gpus=gpus, seed=args.seed)
    else:
        wl = generate(args.generate, load=args.load, gpus=gpus, seed=args.seed)
    return wl.head(args.jobs) if args.jobs else wl


def _config(spec: str) -> tuple[str | None, dict[str, Any]]:
    """Read ``--config FILE[:KEY]`` into (policy name or None for PCS entries, params)."""
    path, _, key = spec.partition(":") if not Path(spec).exists() else (spec, "", "")
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ParetoSearchError(f"{path}: cannot read policy config: {exc}") from exc
    if key:
        entries = doc.get("configs", doc) if isinstance(doc, dict) else {}
        if key not in entries:
            raise ParetoSearchError(f"{path}: no config {key!r}; it has "
                                    f"{', '.join(sorted(entries)[:12])}")
        doc = entries[key]
    if isinstance(doc, dict) and "class_thresholds" in doc:
        return None, doc
    if isinstance(doc, dict) and "policy" in doc:
        return str(doc["policy"]), dict(doc.get("params", {}))
    raise ParetoSearchError(f"{spec}: expected {{'policy': NAME, 'params': {{...}}}} or a PCS "
                            "config entry with class_thresholds and class_rates")


def _overrides(pairs: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise InvalidPolicyParams(f"--set {pair!r}: expected NAME=VALUE, e.g. --set W=1.5")
        try:
            out[name] = json.loads(text)
        except json.JSONDecodeError:
            out[name] = text
    return out


def _policy(args: argparse.Namespace, workload: Workload) -> Policy:
    name, params = args.policy, dict[str, Any]()
    if args.config:
        cfg_name, params = _config(args.config)
        if cfg_name is None:  # a PCS entry
            params = WFQ.from_pcs_config(params).to_dict()["params"]
            cfg_name = "wfq"
        name = cfg_name
    params.update(_overrides(args.set))
    return get_policy(name).from_params(params).fit(workload)


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "—"
    return f"{value:,.4g}" if abs(value) < 1e5 else f"{value:,.0f}"


def _simulate(args: argparse.Namespace, console: Console) -> None:
    profile = load_profile(args.profile)
    workload = _workload(args, profile.total_gpus)
    policy = _policy(args, workload)
    result = simulate(workload, profile, policy, predict=args.predict)
    stats = summary(result)
    if args.out:
        write_table(result.records(), args.out)
    if args.json:
        console.print_json(json.dumps({"policy": policy.to_dict(), "profile": profile.name,
                                       "jobs": len(workload), "metrics": stats},
                                      default=lambda v: None if v != v else v))
        return
    table = Table(title=f"{policy.name} on {profile.name} ({profile.total_gpus} GPUs), "
                        f"{len(workload):,} jobs from {workload.source}")
    table.add_column("metric")
    table.add_column("unit", style="dim")
    for m in ("avg", "p50", "p99", "max"):
        table.add_column(m, justify="right")
    for name, values in stats.items():
        if name == "pred_err" and not args.predict:
            continue
        table.add_row(name, METRICS[name].unit, *(_fmt(v) for v in values.values()))
    console.print(table)
    params = {k: v for k, v in policy.to_dict()["params"].items()}
    console.print(f"[dim]params {json.dumps(params, default=str)}[/dim]")
    console.print(f"[dim]{result.events:,} events, {result.playout_events:,} playout events, "
                  f"{result.cpu_s:.3f} CPU-s[/dim]")
    if args.out:
        console.print(f"per-job records written to {args.out}")


def _policies(console: Console) -> None:
    table = Table(title="policies (paretosearch simulate --policy NAME --set PARAM=VALUE)")
    for col in ("policy", "summary", "parameter", "domain", "default", "meaning"):
        table.add_column(col)
    for name in sorted(REGISTRY):
        cls = REGISTRY[name]
        doms, defaults = cls.domains(), cls.defaults()
        if not doms:
            table.add_row(name, cls.summary, "—", "", "", "")
        for i, (param, dom) in enumerate(doms.items()):
            table.add_row(name if i == 0 else "", cls.summary if i == 0 else "", param,
                          dom.describe(), str(defaults.get(param)), dom.help)
    console.print(table)


def _profiles(console: Console) -> None:
    table = Table(title="cluster profiles (paretosearch simulate --profile NAME)")
    for col in ("profile", "GPUs", "types", "restart s", "description"):
        table.add_column(col)
    for name in list_profiles():
        p = load_profile(name)
        types = ", ".join(f"{n} {t}" for t, n in p.gpus_by_type.items())
        table.add_row(name, str(p.total_gpus), types, f"{p.restart_overhead_s:g}", p.description)
    console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``paretosearch`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    # piped or captured output is not cut to 80 columns: tables stay whole
    console = Console() if sys.stdout.isatty() else Console(width=240)
    try:
        if args.command == "simulate":
            _simulate(args, console)
        elif args.command == "search":
            _search(args, console)
        elif args.command == "front":
            _front(args.run, args.png, console)
        elif args.command == "select":
            _select(args, console)
        elif args.command == "policies":
            _policies(console)
        else:
            _profiles(console)
    except ParetoSearchError as exc:
        Console(stderr=True).print(f"[bold red]error:[/bold red] {exc}", highlight=False)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
