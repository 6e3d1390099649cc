"""The ``paretosearch`` command line: a thin layer over the Python API."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from paretosearch.cli.compile import add_compile_command, compiling, run_compile
from paretosearch.cli.export import EXPORT_COMMANDS, add_export_command
from paretosearch.cli.retune import add_retune_command, run_retune
from paretosearch.cli.runs import (
    RUN_COMMANDS,
    Interrupted,
    add_profile_options,
    add_run_commands,
    add_trace_options,
    error_console,
    parse_overrides,
    scaling_table,
    seed_arg,
)
from paretosearch.config import SearchConfig, policy_of
from paretosearch.io import (
    MAX_DOCUMENT,
    json_text,
    load_json,
    read_bounded,
    regular_file,
    write_table,
)
from paretosearch.runs.records import ChosenConfig
from paretosearch.runs.units import MAXIMISED, column
from paretosearch.samples import generated, marked
from policies import REGISTRY, WFQ, KernelPolicy, RoundPolicy, get_policy
from simulator import (
    ClusterProfile,
    ParetoSearchError,
    Workload,
    generate_from_cdfs,
    list_profiles,
    load_profile,
    read_trace,
    simulate,
    summary,
)
from simulator.inputs.generate import add_stopping_criteria
from simulator.inputs.slo import MIXES
from simulator.inputs.throughput import ThroughputTable, generate_gavel

__all__ = ["main"]

EPILOG = """examples:
  paretosearch simulate                                   # generated workload, pcs-64, WFQ
  paretosearch simulate --policy srsf --generate 2000 --load 0.8
  paretosearch simulate --trace ../shared/data/pcs/traces/trace_0e4a51.csv --jobs 1000 \\
      --scaling-table ../shared/data/pcs/scaling_tables.csv \\
      --config ../shared/data/pcs/configs/pcs_configs.json:0e4a51_bal --predict --out jobs.csv
  paretosearch simulate --policy hadar --profile gavel-hetero-60 --generate 300 \\
      --gavel ../shared/data/gavel/simulation_throughputs.json --jobs-per-hr 6
  paretosearch simulate --policy gavel --profile gavel-108 --trace jobs.trace \\
      --gavel ../shared/data/gavel/simulation_throughputs.json   # a Gavel trace
  paretosearch simulate --policy gavel --cluster V100:24,P100:24,K80:24 --trace jobs.trace \\
      --gavel ../shared/data/gavel/simulation_throughputs.json   # another cluster, no file
  paretosearch simulate --policy unisched --profile unisched-c96 --slo-mix MIX2 --load 1.2
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="paretosearch",
                                description="Multi-objective policy search for GPU clusters.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sim = sub.add_parser("simulate", help="replay a workload under one policy, print metrics",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = sim.add_argument_group("workload (default: the built-in generator)")
    src.add_argument("--trace", type=Path, metavar="PATH",
                     help="a trace CSV (PCS/Philly, Chronus, Helios, Pollux/Sia Philly), a "
                          "CSV/Parquet in the workload schema, or a Gavel .trace (with --gavel)")
    src.add_argument("--generate", type=int, default=SearchConfig.jobs, metavar="N",
                     help="jobs of the built-in Philly-like generator (default: %(default)s)")
    src.add_argument("--load", type=float, default=SearchConfig.load,
                     help="offered load for generated workloads, 1 fills the cluster (default: "
                          "%(default)s, the Philly traces' median on 64 GPUs)")
    src.add_argument("--cdf", metavar="NAME",
                     help="generate from PCS CDF files cdf-*-NAME.csv instead (e.g. "
                          "workload_0e4a51); needs --cdf-dir and a --scaling-table")
    src.add_argument("--cdf-dir", type=Path, metavar="DIR", help="folder of PCS CDF files")
    src.add_argument("--gavel", type=Path, metavar="THROUGHPUTS",
                     help="Gavel's measured throughputs (simulation_throughputs.json), which "
                          "also give per-GPU-type speeds: with --trace, time the jobs of that "
                          "Gavel .trace by them; without, generate Gavel's continuous-multiple "
                          "workload (--generate jobs at --jobs-per-hr)")
    src.add_argument("--jobs-per-hr", type=float, default=4.0,
                     help="arrival rate of --gavel workloads (default: 4)")
    src.add_argument("--slo-mix", choices=sorted(MIXES), metavar="MIX",
                     help=f"give the jobs UniSched deadlines and rewards ({', '.join(MIXES)})")
    src.add_argument("--early-stop", type=float, metavar="SHARE",
                     help="make SHARE of the jobs stop on a target metric before the "
                          "iterations they declare (UniSched: 0.2)")
    src.add_argument("--sharing", action="store_true",
                     help="give the jobs SYNTHETIC GPU-sharing requirements (utilization, "
                          "memory with surges) so that co-locating policies (horus, ojpp, "
                          "unified) can share GPUs; real ones come as workload columns")
    add_trace_options(src)
    src.add_argument("--seed", type=seed_arg, default=0, help="seed of generated workloads")
    pol = sim.add_argument_group("policy and cluster")
    add_profile_options(pol, "pcs-64")
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
    add_run_commands(sub)
    add_export_command(sub)
    add_retune_command(sub)
    add_compile_command(sub)
    sub.add_parser("policies", help="list policies with their parameters and domains")
    sub.add_parser("profiles", help="list the shipped cluster profiles")
    return p


def _workload(args: argparse.Namespace, profile: ClusterProfile) -> Workload:
    gpus = profile.total_gpus
    scaling = scaling_table(args.scaling_table, gpus)
    if args.gavel is not None and args.trace is not None:
        if args.trace.suffix != ".trace" or args.scaling_table is not None:
            raise ParetoSearchError(f"--gavel with --trace reads a Gavel .trace, whose speed-ups "
                                    f"come from the throughputs (got {args.trace}"
                                    + (" and a --scaling-table)" if args.scaling_table else ")"))
        wl = read_trace(regular_file(args.trace),
                        throughputs=ThroughputTable.from_gavel_json(args.gavel))
    elif args.gavel is not None:
        wl = generate_gavel(ThroughputTable.from_gavel_json(args.gavel), args.generate,
                            jobs_per_hr=args.jobs_per_hr, seed=args.seed)
    elif args.trace is not None:
        wl = read_trace(regular_file(args.trace), scaling=scaling)
    elif args.cdf is not None:
        if args.cdf_dir is None:
            raise ParetoSearchError("--cdf needs --cdf-dir (the folder of PCS CDF files)")
        wl = generate_from_cdfs(args.cdf_dir, args.cdf, scaling=scaling, n_jobs=args.generate,
                                load=args.load, gpus=gpus, seed=args.seed)
    else:  # the first training sample of a search with the same seed
        wl = generated(args.generate, args.load, gpus, args.seed)
    wl = wl.head(args.jobs) if args.jobs else wl
    if args.early_stop is not None:
        wl = add_stopping_criteria(wl, args.early_stop, seed=args.seed)
    return marked(wl, profile, slo_mix=args.slo_mix, sharing=args.sharing, seed=args.seed)


def _config(spec: str) -> tuple[str | None, dict[str, Any]]:
    """Read ``--config FILE[:KEY]`` into (policy name or None for PCS entries, params)."""
    path, _, key = spec.partition(":") if not Path(spec).exists() else (spec, "", "")
    try:
        doc = load_json(read_bounded(path, MAX_DOCUMENT))
    except (ParetoSearchError, ValueError, RecursionError) as exc:
        raise ParetoSearchError(f"{path}: cannot read policy config: {exc}") from exc
    if key:
        entries = doc.get("configs", doc) if isinstance(doc, dict) else {}
        if key not in entries:
            raise ParetoSearchError(f"{path}: no config {key!r}; it has "
                                    f"{', '.join(sorted(entries)[:12])}")
        doc = entries[key]
    if isinstance(doc, dict) and "class_thresholds" in doc:
        return None, doc
    if isinstance(doc, dict) and "policy" in doc:  # a chosen config: as deployed
        chosen = ChosenConfig.from_dict(doc, path)
        return chosen.policy, dict(chosen.deployed)
    raise ParetoSearchError(f"{spec}: expected {{'policy': NAME, 'params': {{...}}}} or a PCS "
                            "config entry with class_thresholds and class_rates")


def _policy(args: argparse.Namespace, workload: Workload) -> KernelPolicy | RoundPolicy:
    name, params = args.policy, dict[str, Any]()
    if args.config:
        cfg_name, params = _config(args.config)
        if cfg_name is None:  # a PCS entry
            params = WFQ.from_pcs_config(params).to_dict()["params"]
            cfg_name = "wfq"
        name = cfg_name
    overrides = parse_overrides(args.set)
    family = get_policy(name)
    unknown = sorted(set(overrides) - {f.name for f in fields(family)})
    if unknown:  # the fitted fields (WFQ's thresholds, rates) are set, but not offered
        raise ParetoSearchError(f"--set {unknown[0]}=...: policy {family.name!r} has no "
                                f"parameter {unknown[0]!r}; its parameters are "
                                f"{', '.join(family.domains()) or 'none'}")
    return policy_of(name, {**params, **overrides}).fit(workload)


def _simulate(args: argparse.Namespace, console: Console) -> None:
    profile = load_profile(args.profile)
    workload = _workload(args, profile)
    policy = _policy(args, workload)
    result = simulate(workload, profile, policy, predict=args.predict)
    stats = summary(result)
    dropped = int((~result.kept).sum())
    if args.out:
        write_table(result.records(), args.out)
    if args.json:
        # valid JSON: NaN and infinity as null (json_text)
        console.print_json(json_text({"policy": policy.to_dict(), "profile": profile.name,
                                      "jobs": len(workload), "dropped": dropped,
                                      "metrics": stats}))
        return
    kept = f" ({len(workload) - dropped:,} kept, {dropped:,} dropped)" if dropped else ""
    table = Table(title=f"{policy.name} on {profile.name} ({profile.total_gpus} GPUs), "
                        f"{len(workload):,} jobs{kept} from {' '.join(workload.source.split())}")
    table.add_column("metric")
    table.add_column("unit", style="dim")
    for m in ("avg", "p50", "p99", "max"):
        table.add_column(m, justify="right")
    for name, values in stats.items():
        if all(v != v for v in values.values()):  # NaN throughout: does not apply to this run
            continue
        row = column(name, values.values())  # one unit and number format per metric
        table.add_row(name + (f" {MAXIMISED}" if row.maximize else ""), row.unit,
                      *(row.cell(v) for v in values.values()))
    console.print(table)
    if dropped:
        console.print(f"{dropped:,} jobs dropped by the policy (Gavel: 5 failed tasks in a row) "
                      f"are left out of the per-job metrics, as in Gavel's averages; --out "
                      f"marks them in its dropped column")
    console.print(f"[dim]{MAXIMISED}: larger is better; times in hours where they pass "
                  "5,000 s, shares in %; --json prints the stored values (s, fractions)[/dim]")
    params = {k: v for k, v in policy.to_dict()["params"].items()}
    console.print(f"[dim]params {json.dumps(params, default=str)}[/dim]")
    console.print(f"[dim]{result.events:,} events, {result.playout_events:,} playout events, "
                  f"{result.cpu_s:.3f} CPU-s[/dim]")
    if args.out:
        console.print(f"per-job records written to {args.out}")


def _policies(console: Console) -> None:
    """A short table per policy (its parameters, domains, defaults, meanings), at most 100
    columns wide even when piped."""
    narrow = console if console.width <= 100 else Console(
        file=console.file, width=100, force_terminal=console.is_terminal)
    narrow.print("policies (paretosearch simulate --policy NAME --set PARAM=VALUE; "
                 "paretosearch search --policy NAME)", highlight=False)
    for name in sorted(REGISTRY):
        cls = REGISTRY[name]
        doms, defaults = cls.domains(), cls.defaults()
        if not doms:
            narrow.print(f"\n[bold]{name}[/bold]: {cls.summary} (no parameters)",
                         highlight=False)
            continue
        table = Table(title=f"[bold]{name}[/bold]: {cls.summary}", title_justify="left",
                      box=None, padding=(0, 2, 0, 0))
        for col in ("parameter", "domain", "default", "meaning"):
            table.add_column(col, overflow="fold")
        for param, dom in doms.items():
            table.add_row(param, dom.describe(), str(defaults.get(param)), dom.help)
        narrow.print()
        narrow.print(table)


def _profiles(console: Console) -> None:
    table = Table(title="cluster profiles (paretosearch simulate --profile NAME)")
    for col in ("profile", "GPUs", "types", "restart s", "description"):
        table.add_column(col)
    for name in list_profiles():
        p = load_profile(name)
        types = ", ".join(f"{n} {t}" for t, n in p.gpus_by_type.items())
        table.add_row(name, str(p.total_gpus), types, f"{p.restart_overhead_s:g}", p.description)
    console.print(table)


def _log_to_stderr(*, verbose: bool) -> None:
    """Our log (warnings; with --verbose also what happens) to standard error. Dask keeps its
    own logging configuration."""
    log = logging.getLogger("paretosearch")
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO if verbose else logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``paretosearch`` console script; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    hint = _set_without_equals(argv)
    if hint:
        error_console().print(f"[bold red]error:[/bold red] {hint}", highlight=False)
        return 2
    args = _parser().parse_args(argv)
    _log_to_stderr(verbose=getattr(args, "verbose", False))
    # piped or captured output is not cut to 80 columns: tables stay whole
    console = Console() if sys.stdout.isatty() else Console(width=240)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        with compiling(args):
            return _run(args, console)


def _set_without_equals(argv: Sequence[str]) -> str | None:
    """What to write instead of ``--set NAME VALUE`` (argparse would only say that VALUE is
    an unrecognised argument, under the top-level usage), or None."""
    for i, arg in enumerate(argv[:-1]):
        name = argv[i + 1]
        if arg == "--set" and "=" not in name and not name.startswith("-"):
            value = argv[i + 2] if i + 2 < len(argv) and not argv[i + 2].startswith("--") \
                else "VALUE"
            return (f"--set {name}: expected NAME=VALUE in one word: write "
                    f"--set {name}={value}")
    return None


def _show_warning(message: Warning | str, *_: object, **__: object) -> None:
    """Warnings as one plain line on stderr, as errors are (not Python's file:line form)."""
    error_console().print(f"[yellow]warning:[/yellow] {escape(str(message))}", highlight=False)


def _run(args: argparse.Namespace, console: Console) -> int:
    try:
        if args.command == "simulate":
            _simulate(args, console)
        elif args.command == "retune":
            return run_retune(args, console)
        elif args.command == "compile":
            run_compile(args, console)
        elif args.command in RUN_COMMANDS:
            RUN_COMMANDS[args.command](args, console)
        elif args.command in EXPORT_COMMANDS:
            EXPORT_COMMANDS[args.command](args, console)
        elif args.command == "policies":
            _policies(console)
        else:
            _profiles(console)
    except ParetoSearchError as exc:
        error_console().print(f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False)
        return 2
    except Interrupted as exc:
        error_console().print(f"[yellow]interrupted:[/yellow] {escape(str(exc))}", highlight=False)
        return 130  # as a shell reports a command stopped by SIGINT
    return 0

