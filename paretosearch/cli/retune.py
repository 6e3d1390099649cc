"""The ``retune`` command: the nightly job (see :mod:`paretosearch.service.retune`)."""

from __future__ import annotations

import argparse
import logging
import warnings
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from paretosearch.cli.runs import (
    Interrupted,
    add_cluster_options,
    error_console,
    print_front_warnings,
    search_progress,
)
from paretosearch.runs.records import BaselineWarning
from paretosearch.runs.report import drift_rows
from paretosearch.runs.retune_summary import RetuneStart, RetuneSummary
from paretosearch.runs.store import RunStore
from paretosearch.runs.units import column
from simulator.errors import ParetoSearchError

__all__ = ["add_retune_command", "run_retune"]

EXIT_CODES = """exit codes:
  0  published a new run; the production config is not dominated (or none is set)
  2  bad spec, trace or production config (the message says what to fix); nothing done
  3  the window holds fewer jobs than window.min_jobs; nothing published
  4  another retune holds OUT/retune.lock; nothing done
  5  published, and the new front dominates the production config on both samples:
     review OUT/current/report.md and export a new config
  6  failed while running (disk full, unwritable folder, lost cluster); nothing published,
     OUT/current untouched; run again to resume without repeating finished evaluations
  130 stopped by Ctrl-C or SIGINT; nothing published; the next retune resumes the run

examples:
  paretosearch retune --spec deploy/retune.yaml
  DASK_SCHEDULER_ADDRESS=tls://scheduler:8786 paretosearch retune --spec retune.yaml
  # crontab: every night at 02:30
  30 2 * * *  cd /srv/paretosearch && .venv/bin/paretosearch retune --spec retune.yaml
"""


def add_retune_command(sub: Any) -> None:
    """Add ``retune`` to the CLI's subcommands."""
    p = sub.add_parser(
        "retune", help="the nightly job: search the newest window of a trace, publish, report",
        description="Search again on the newest window of a growing trace, warm-started from "
                    "the run OUT/current points at; re-evaluate the production config and "
                    "report drift; publish OUT/runs/<id> with report.md / report.png and move "
                    "OUT/current to it atomically.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spec", type=Path, required=True, metavar="YAML",
                   help="the retune spec (see deploy/retune.yaml)")
    add_cluster_options(p, "the spec's 'workers'")


def run_retune(args: argparse.Namespace, console: Console) -> int:
    """Run ``retune``; returns its exit code (see ``paretosearch retune --help``)."""
    from paretosearch.search.cluster import open_client
    from paretosearch.service.retune import (
        Exit,
        RetuneFailed,
        RetuneLocked,
        RetuneSpec,
        TooFewJobs,
        retune,
    )

    err = error_console()
    try:
        spec = RetuneSpec.load(args.spec)
        with search_progress(console, spec.config.settings.budget) as progress:
            def started(start: RetuneStart) -> None:
                warm, passed = start.warm_start, start.not_resumed
                console.print(f"{'resuming' if start.resumed else 'new run'} "
                              f"{start.run}: {start.window.jobs:,} jobs in the window; "
                              + (f"warm start from {warm.source} ({warm.configs} configs)"
                                 if warm.source else "cold start"))
                if passed:
                    console.print(f"not resumed: {passed.run} ({passed.why}), left as it is")

            with warnings.catch_warnings():  # _print says the same, from front.json
                warnings.simplefilter("ignore", BaselineWarning)
                outcome = retune(spec, on_start=started, on_generation=progress,
                                 connect=lambda: open_client(args.scheduler, args.cluster_config,
                                                             workers=spec.workers,
                                                             files=not spec.workers_named,
                                                             plain_tcp=args.allow_plain_tcp))
    except KeyboardInterrupt:
        raise Interrupted(f"stopped; nothing was published and 'current' was not moved. The "
                          f"next 'paretosearch retune --spec {args.spec}' resumes this run from "
                          "its finished evaluations") from None
    except TooFewJobs as exc:
        err.print(f"[yellow]skipped:[/yellow] {escape(str(exc))}", highlight=False)
        return Exit.TOO_FEW_JOBS
    except RetuneLocked as exc:
        err.print(f"[yellow]locked:[/yellow] {escape(str(exc))}", highlight=False)
        return Exit.LOCKED
    except RetuneFailed as exc:
        logging.getLogger(__name__).info("the cause", exc_info=exc.__cause__)
        err.print(f"[bold red]failed:[/bold red] {escape(str(exc))}", highlight=False)
        return Exit.FAILED
    except ParetoSearchError as exc:
        err.print(f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False)
        return Exit.BAD_INPUT
    _print(outcome.summary, console)
    return outcome.exit


def _print(summary: RetuneSummary, console: Console) -> None:
    console.print(f"published {summary.start.run} ({summary.front_size} configurations on the "
                  f"front; {summary.evaluations_run} evaluations run, "
                  f"{summary.evaluations_from_cache} from the cache; {summary.wall_s:,.0f} s)")
    prod = summary.production
    if prod is None:
        console.print("no production config in the spec: no drift report")
    else:
        table = Table(title=f"production config {prod.source} on the new window")
        for col in ("objective", "train", "best dominating (train)", "gain", "test",
                    "since last run"):
            table.add_column(col, justify="right")
        since = prod.since_previous.objectives if prod.since_previous else {}
        (_, _, train_rows), _ = drift_rows(prod, summary.objectives)
        for lab, row in zip(summary.objectives, train_rows, strict=True):
            # objective, production, best dominating, gain: in the objective's unit
            change = since[lab].change if lab in since else None
            shown = column(lab, [prod.train[lab], prod.test[lab]])
            table.add_row(*row, shown.cell(prod.test[lab]),
                          "—" if change is None else f"{100 * change:+.1f} %")
        console.print(table)
        for sample, d in (("train", prod.drift_train), ("test", prod.drift_test)):
            console.print(f"{sample}: " + (f"[bold yellow]dominated[/bold yellow] by "
                                           f"{len(d.dominated_by)} configurations "
                                           f"(safest switch: front #{d.best})"
                                           if d.dominated else "not dominated"))
    print_front_warnings(RunStore(summary.start.run).read_front())
    console.print(f"report: {Path(summary.start.run) / 'report.md'}")
