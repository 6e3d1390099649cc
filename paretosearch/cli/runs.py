"""The ``search``, ``front`` and ``select`` commands: runs of the search service."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from paretosearch.cli.options import add_search_options, config_from
from paretosearch.config import SearchConfig
from paretosearch.io import regular_file, write_json
from paretosearch.runs.records import BaselineWarning, ChosenConfig, FrontDocument, FrontEntry
from paretosearch.runs.store import RunStore
from paretosearch.settings import MAX_SEED
from simulator import ScalingTable, Workload, load_profile, parametric_table, read_trace
from simulator.errors import InvalidPolicyParams, ParetoSearchError
from simulator.inputs.model_info import load_scaling

if TYPE_CHECKING:  # pymoo loads with the search, not with the command line
    from paretosearch.search.spea2 import Progress as SearchProgress

__all__ = ["RUN_COMMANDS", "add_cluster_options", "add_run_commands", "error_console",
           "parse_overrides", "search_progress"]


def error_console() -> Console:
    """Standard error, lines never cut (the terminal wraps; logs keep one line a message)."""
    return Console(stderr=True, soft_wrap=True)


def parse_overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs to a dict; VALUE is read as JSON, else kept as text."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise InvalidPolicyParams(f"--set {pair!r}: expected NAME=VALUE, e.g. --set W=1.5")
        try:
            out[name] = json.loads(text, parse_int=functools.partial(_int64, pair))
        except json.JSONDecodeError:
            out[name] = text
        except RecursionError as exc:
            raise InvalidPolicyParams(f"--set {pair[:80]!r}...: nested too deep") from exc
    return out


def _int64(pair: str, text: str) -> int:
    """An integer of ``--set``'s JSON, if it fits int64 (a policy's integers do)."""
    if not -MAX_SEED - 1 <= int(text) <= MAX_SEED:
        raise InvalidPolicyParams(f"--set {pair!r}: the integer {text} is past int64's range "
                                  f"(±{MAX_SEED:,})")
    return int(text)


def seed_arg(text: str) -> int:
    """``--seed``: an integer from 0 to 2^63 - 1 (argparse's type)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to {MAX_SEED:,}, got "
                                         f"{text!r}")
    return value


TRACE_OPTIONS = ("trace", "scaling_table", "jobs")
"""How ``search`` reads its trace; saved in the run (``cli.json``) so --resume needs no option
(the search's own config is in ``run.json``)."""


def add_trace_options(p: Any) -> None:
    """``--scaling-table`` and ``--jobs``: how ``simulate`` and ``search`` read a trace."""
    p.add_argument("--scaling-table", metavar="PATH",
                   help="per-model speed-up CSV (model,gpus,speedup[,time_per_iter_us]; "
                        "PCS/Philly traces need one), or Chronus's model_info.json (each job "
                        "of a Chronus trace at its model's speed when spread over nodes)")
    p.add_argument("--jobs", type=int, metavar="N", help="keep only the first N jobs")


def add_profile_options(p: Any, default: str) -> None:
    """``--profile`` or ``--cluster``, one or the other, into ``args.profile``."""
    which = p.add_mutually_exclusive_group()
    which.add_argument("--profile", default=default,
                       help=f"cluster profile name or YAML path (default: {default})")
    which.add_argument("--cluster", dest="profile", default=argparse.SUPPRESS, metavar="SPEC",
                       help="a cluster of Gavel's GPU types without a profile file: "
                            "V100:36,P100:36,K80:36 (servers of 4; TYPE:GPUS/PER_SERVER for "
                            "others) or Gavel's -c form 36:36:36")


def scaling_table(path: str | Path | None, gpus: int) -> ScalingTable:
    """Speed-ups by GPU count: the parametric model for a cluster of ``gpus``, overridden
    by the table at ``path`` where it has entries."""
    base = parametric_table(gpus)
    return base if path is None else load_scaling(path, gpus).merged(base)


def _trace(args: argparse.Namespace) -> Workload | None:
    """The search's trace with ``--scaling-table`` and ``--jobs``; None: generated samples."""
    if args.trace is None:
        if args.jobs is not None or args.scaling_table is not None:
            raise ParetoSearchError("--jobs and --scaling-table read a trace: add --trace PATH "
                                    "(generated samples have --generate N jobs)")
        return None
    gpus = load_profile(args.profile).total_gpus
    workload = read_trace(regular_file(args.trace), scaling=scaling_table(args.scaling_table, gpus))
    return workload.head(args.jobs) if args.jobs else workload


def _search_parser(sub: Any) -> None:
    p = sub.add_parser("search", help="search a policy's settings for a Pareto front",
                       description="Search with SPEA2; with no arguments: a generated workload, "
                                   "pcs-64, WFQ, jct:avg vs pred_err:p99, on a local Dask "
                                   "cluster. The run is published in --run-dir.")
    p.add_argument("--trace", metavar="PATH",
                   help="trace to search on (first half trains, second half tests)")
    add_trace_options(p)
    add_profile_options(p, str(SearchConfig.profile))
    add_search_options(p, {"seed": seed_arg})
    p.add_argument("--workers", type=int,
                   help="Dask LocalCluster worker processes; 0 evaluates serially (default: "
                        "./dask-cluster.yaml or $PARETOSEARCH_DASK_CLUSTER if set, else 2)")
    add_cluster_options(p, "--workers")
    p.add_argument("--run-dir", type=Path,
                   help="where to publish the run (default: runs/<date-time>, with runs/latest "
                        "pointing at it)")
    p.add_argument("--resume", type=Path, metavar="RUN",
                   help="continue the interrupted run in RUN with its own settings")


def add_cluster_options(p: argparse.ArgumentParser, workers: str) -> None:
    """``--scheduler`` and ``--cluster-config``: where evaluations run (``workers`` names the
    size of the local cluster used when neither is set)."""
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="use the running Dask scheduler at ADDRESS (tls://..., or tcp://... "
                        "on this machine); wins over DASK_SCHEDULER_ADDRESS and any cluster "
                        "file")
    p.add_argument("--allow-plain-tcp", action="store_true",
                   help="allow a tcp:// scheduler on another machine (anyone who can reach it "
                        "can join as a worker; see docs/security.md)")
    p.add_argument("--cluster-config", type=Path, metavar="PATH",
                   help="start the Dask cluster described in PATH (dask-ctl format; examples "
                        "in deploy/) unless a scheduler address is given or in "
                        "DASK_SCHEDULER_ADDRESS (default: $PARETOSEARCH_DASK_CLUSTER, else "
                        "./dask-cluster.yaml if it exists, these two unless "
                        f"{workers} is given; else a local cluster of {workers})")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="log what happens (which Dask cluster, a resume, a failure's cause)")


class Interrupted(Exception):
    """The user stopped a command (Ctrl-C); the message says how to go on."""


@contextlib.contextmanager
def search_progress(console: Console, budget: int) -> Iterator[Callable[[Any], None]]:
    """Progress over a search's generations, yielding the ``on_generation`` callback: a bar
    on a terminal; elsewhere (a pipe, cron's mail, a log file) one line per generation."""
    console.print(f"[dim]searching: {budget} evaluations. The first generation also starts "
                  "the Dask workers and loads or compiles the simulator (seconds to minutes "
                  "on first use)[/dim]")
    if not console.is_terminal:
        start = time.perf_counter()
        yield lambda p: console.print(
            f"generation {p.generation}: {p.evaluations}/{budget} evaluations, "
            f"{_hypervolume_note(p)}, {time.perf_counter() - start:.0f} s", highlight=False)
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("[bold]generation {task.fields[gen]}[/bold]"), BarColumn(),
                   TextColumn("{task.completed}/{task.total} evaluations"),
                   TextColumn("{task.fields[hv]}"), TimeRemainingColumn(),
                   console=console, transient=True)
    with bar:
        task = bar.add_task("search", total=budget, hv="", gen=0)
        yield lambda p: bar.update(task, completed=p.evaluations, hv=_hypervolume_note(p),
                                   gen=p.generation)


def _hypervolume_note(p: SearchProgress) -> str:
    """The progress's hypervolume in words: the share of the box fixed by the first
    generation, and why it fell where it is below its best so far."""
    note = f"hypervolume {p.hypervolume:.3f} of the first generation's box"
    if p.hypervolume < p.best_hypervolume - 1e-12:
        note += (f" (best so far {p.best_hypervolume:.3f}: SPEA2's archive has a fixed size, "
                 "and truncating it dropped a point that held volume)")
    return note


def _config(args: argparse.Namespace) -> SearchConfig:
    """The search the options ask for."""
    return config_from(args, args.profile, {"fixed": parse_overrides})


def _resumed(args: argparse.Namespace) -> SearchConfig:
    """The interrupted run's config (``run.json``; ``cli.json`` for runs written before
    run.json kept it), its trace options set in ``args``."""
    store = RunStore(args.resume)
    if not (store.path / "cli.json").exists():
        raise ParetoSearchError(f"{args.resume}: no cli.json; not a run of 'paretosearch "
                                "search' (or it never started)")
    saved = store.read_json("cli.json")
    vars(args).update({k: saved.get(k) for k in TRACE_OPTIONS})
    definition = store.read_spec()
    if definition.config is None and "config" in saved:
        return SearchConfig.from_dict(saved["config"], str(store.path / "cli.json"))
    return definition.search_config(str(store.path / "run.json"))


def _search(args: argparse.Namespace, console: Console) -> None:
    from paretosearch.search.cluster import ctrl_c, open_client
    from paretosearch.service.api import PolicySearch

    config = _config(args) if args.resume is None else _resumed(args)
    args.run_dir = args.resume or args.run_dir
    default_dir = args.run_dir is None
    workers = 2 if args.workers is None else args.workers  # named: no cluster file found
    if default_dir:
        args.run_dir = Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    workload = _trace(args)
    if args.resume is None and (args.run_dir / "run.json").exists():
        raise ParetoSearchError(f"{args.run_dir} already holds a run: resume it with "
                                f"--resume {args.run_dir}, or pass another --run-dir")
    try:
        with search_progress(console, config.settings.budget) as progress, \
                open_client(args.scheduler, args.cluster_config, workers=workers,
                            files=args.workers is None,
                            plain_tcp=args.allow_plain_tcp) as client:
            search = PolicySearch(workload, config, store=args.run_dir, client=client,
                                  workers=workers)
            if args.resume is None:  # a search that cannot be made writes nothing
                write_json({k: getattr(args, k) for k in TRACE_OPTIONS},
                           args.run_dir / "cli.json")
                if default_dir:
                    _point_latest(args.run_dir)
            with warnings.catch_warnings():  # _front says the same, from front.json
                warnings.simplefilter("ignore", BaselineWarning)
                search.run(progress, resume=args.resume is not None)
    except BaseException as exc:  # Ctrl-C, or an error while unwinding from it
        if not ctrl_c(exc):
            raise
        raise Interrupted(f"stopped; every finished evaluation is saved in {args.run_dir}. "
                          f"Go on with: paretosearch search --resume {args.run_dir}") from None
    _front(args.run_dir, None, console)


def _point_latest(run: Path) -> None:
    """Make ``runs/latest`` point at ``run`` (replaced atomically); anything there but a link
    (a file, a FIFO, a folder: someone else's) is refused, never replaced."""
    latest = run.parent / "latest"
    if os.path.lexists(latest) and not latest.is_symlink():
        kind = "a folder" if latest.is_dir() else "a file" if latest.is_file() else "not a link"
        raise ParetoSearchError(f"{latest}: cannot point it at {run.name} ({kind}); it should "
                                "be a link that paretosearch moves: remove it, or pass --run-dir")
    run.mkdir(parents=True, exist_ok=True)
    tmp = run.parent / f".latest-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run.name)
    try:
        os.replace(tmp, run.parent / "latest")
    except OSError as exc:  # a folder (or a file nobody may replace) named latest
        tmp.unlink(missing_ok=True)
        raise ParetoSearchError(f"{run.parent / 'latest'}: cannot point it at {run.name} "
                                f"({exc.strerror}); it should be a link that paretosearch "
                                "moves: remove it, or pass --run-dir") from exc


def _front(run: Path, png: Path | None, console: Console) -> None:
    from paretosearch.runs.plots import Marked, plot_front
    from paretosearch.runs.units import MAXIMISED, front_columns, param_cells

    store = RunStore(run)
    doc = store.read_front()
    front = doc.front
    if not front:
        raise ParetoSearchError(f"{run}: the front is empty")
    chosen = store.chosen_index(front)
    labels = list(front[0].objectives)
    params = list(front[0].params)
    status = "" if doc.done else " — search still running or interrupted"
    resolved = run.resolve()  # the run itself, not a link such as runs/latest that moves on
    columns = front_columns(doc, labels)
    table = Table(title=f"run {escape(resolved.name)}: Pareto front of {' vs '.join(labels)}, "
                        f"{len(front)} configurations{status}")
    table.add_column("#", justify="right")
    for name in labels:
        table.add_column(columns[name].header, justify="right", overflow="fold")
        table.add_column("test", justify="right", style="dim")
    judged = any(e.dominated_by is not None for e in front)
    if judged:
        table.add_column("dominated on test by", style="red")
    for name in params:
        table.add_column(name, justify="right", style="cyan", overflow="fold")
    shown = {p: param_cells([e.params[p] for e in front]) for p in params}
    for i, entry in enumerate(front):
        test = entry.test_metrics or {}
        cells = []
        for name in labels:
            cells += [columns[name].cell(entry.objectives[name]),
                      columns[name].cell(test.get(name))]
        cells += [", ".join(entry.dominated_by or ())] if judged else []
        cells += [shown[p][i] for p in params]
        table.add_row(f"{i} chosen" if i == chosen else str(i), *cells,
                      style="bold" if i == chosen else "dim" if entry.dominated else None)
    for name, rec in doc.baselines.items():
        test = doc.baselines_test.get(name) or {}
        cells = [c for n in labels for c in (columns[n].cell(rec.get(n)),
                                             columns[n].cell(test.get(n)))]
        table.add_row(name, *cells, *([""] * (len(params) + judged)), style="red")
    console.print(table)
    console.print("[dim]#: the number in the plot and the report; test: the same "
                  "configuration on the held-out test sample; red: baselines"
                  + ("; dim: a baseline dominates the entry on the test sample" if judged
                     else "")
                  + (f"; {MAXIMISED}: larger is better" if any(
                      columns[n].maximize for n in labels) else "")
                  + f". Run folder: {escape(str(resolved))}[/dim]", highlight=False)
    print_front_warnings(doc)
    for name, why in doc.dropped.items():
        console.print(f"{name}: dropped from the search ({why}); kept at its default")
    marked = None if chosen is None else Marked(
        "chosen", front[chosen].metrics, front[chosen].test_metrics)
    path = plot_front(doc, png or store.path / "front.png",
                      title=f"run {resolved.name}: {' vs '.join(labels)}", marked=marked)
    console.print(f"plot written to {path}")


def print_front_warnings(doc: FrontDocument) -> None:
    """``front.json``'s warnings (:meth:`FrontDocument.warnings`), one line each on standard
    error."""
    for message in doc.warnings():
        error_console().print(f"[yellow]warning:[/yellow] {message}", highlight=False)


def _report(run: Path, out: Path | None) -> Path:
    from paretosearch.runs.report_html import write_html_report

    return write_html_report(run, out)


def _select(args: argparse.Namespace, console: Console) -> None:
    from paretosearch.objectives import parse_objectives
    from paretosearch.runs import select as choose

    store = RunStore(args.run)
    front = store.read_front().front
    spec = store.read_spec()
    objectives = parse_objectives(spec.objectives)
    if args.where and not args.minimize:
        raise ParetoSearchError("--where needs --minimize METRIC:MEASURE")
    if args.index is not None:
        i = choose.by_index(front, args.index)
    else:
        pick: Callable[[Sequence[FrontEntry]], int] = (
            functools.partial(choose.knee, objectives=objectives) if args.knee else
            functools.partial(choose.by_constraints, where=args.where, minimize=args.minimize)
            if args.where else functools.partial(
                choose.by_weights, objectives=objectives,
                weights=_weights(args.weights)))
        i, skipped = choose.among(front, pick, include_dominated=args.include_dominated)
        _say_skipped(front, skipped)
    if front[i].dominated:
        error_console().print(f"[yellow]warning:[/yellow] #{i} is dominated on the test sample "
                              f"by {', '.join(front[i].dominated_by or ())}", highlight=False)
    choice = store.front_choice(i)
    store.write_choice(choice)
    if args.out:
        write_json(choice.to_dict(), args.out)
    _print_choice(store, choice, console)
    console.print(f"the full record (policy, parameters, fitted fields, every metric on both "
                  f"samples, config_sha256) is in {store.path.resolve() / 'chosen.json'}"
                  + (f" and {args.out}" if args.out else ""), highlight=False, markup=False)


def _print_choice(store: RunStore, choice: ChosenConfig, console: Console) -> None:
    """A short summary of the chosen configuration: its row, objectives in the front
    table's units on both samples, and its parameters."""
    from paretosearch.runs.units import front_columns

    labels = list(choice.objectives)
    columns = front_columns(store.read_front(), labels)
    table = Table(title=f"chosen: #{choice.front_index} of run "
                        f"{escape(store.path.resolve().name)}",
                  title_justify="left", box=None)
    for col in ("objective", "train", "test"):
        table.add_column(col, justify="left" if col == "objective" else "right")
    test = choice.test_metrics or {}
    for lab in labels:
        c = columns[lab]
        table.add_row(c.header, c.cell(choice.objectives[lab]), c.cell(test.get(lab)))
    console.print(table)
    console.print("parameters: " + ", ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in choice.params.items()), highlight=False, markup=False)


def _say_skipped(front: Sequence[FrontEntry], skipped: Sequence[int]) -> None:
    """Name the entries a choice passed over as dominated on the test sample (on standard
    error: standard output holds the chosen config)."""
    if skipped:
        names = "; ".join(f"#{i} ({', '.join(front[i].dominated_by or ())})" for i in skipped)
        error_console().print(f"skipped, as a baseline dominates them on the test sample: "
                              f"{names} (--include-dominated to consider them)", highlight=False)


def _weights(text: str) -> list[float]:
    """``--weights W1,W2,...`` as numbers (each checked by :func:`choose.by_weights`)."""
    try:
        return [float(w) for w in text.split(",")]
    except ValueError:
        raise ParetoSearchError(f"--weights {text!r}: expected numbers separated by commas, "
                                "one per objective, e.g. --weights 1,2") from None


def add_run_commands(sub: Any) -> None:
    """Add ``search``, ``front``, ``report`` and ``select`` to the CLI's subcommands."""
    _search_parser(sub)
    front = sub.add_parser("front", help="print a run's Pareto front and plot it to PNG")
    front.add_argument("run", type=Path, help="the run directory")
    front.add_argument("--png", type=Path, help="where to write the plot (default: RUN/front.png)")
    rep = sub.add_parser(
        "report", help="write a run's interactive HTML report (one file, opens offline)",
        description="One self-contained HTML page of a run: the front to explore (hover for a "
                    "configuration's parameters and metrics, click for its select / export "
                    "commands), the baselines on both samples, the hypervolume per generation, "
                    "the parameters not searched, and a retune's production drift.")
    rep.add_argument("run", type=Path, help="the run directory")
    rep.add_argument("--out", type=Path, help="where to write it (default: RUN/report.html)")
    sel = sub.add_parser("select", help="choose one configuration from a run's front")
    sel.add_argument("run", type=Path, help="the run directory")
    how = sel.add_mutually_exclusive_group(required=True)
    how.add_argument("--index", type=int, help="the front entry with this index")
    how.add_argument("--knee", action="store_true", help="the knee point")
    how.add_argument("--where", action="append", metavar="EXPR",
                     help="a constraint such as 'pred_err:p99 <= 100' (repeatable)")
    how.add_argument("--weights", metavar="W1,W2,...", help="one weight per objective")
    sel.add_argument("--minimize", metavar="METRIC:MEASURE", help="with --where: what to minimise")
    sel.add_argument("--include-dominated", action="store_true",
                     help="with --knee, --where or --weights: also consider the entries a "
                          "baseline dominates on the test sample (skipped by default)")
    sel.add_argument("--out", type=Path, help="also write the chosen config to this JSON file")


RUN_COMMANDS: dict[str, Callable[[argparse.Namespace, Console], None]] = {
    "search": _search,
    "front": lambda args, console: _front(args.run, args.png, console),
    "select": _select,
    "report": lambda args, console: console.print(
        f"report written to {_report(args.run, args.out)}"),
}
"""Each run command's handler."""
