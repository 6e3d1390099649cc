"""The hostile catalogue (issue 41): inputs an attacker controls, each with its verdict (workers,
schedulers and cluster files: ``test_hostile_workers.py``; options, sizes and input files that
are not files: ``test_hostile_options.py``; journals: ``test_hostile_journals.py``; text and
numbers in every input file: ``test_hostile_files.py``).

Every case asserts one of: refused with the project's error naming the file, field or value
(exit 2 in the CLI); or handled as documented (docs/security.md). Never a traceback, a hang
(each case has a timeout), garbage accepted, code run or data lost. The hostile Dask worker
is a real ``dask worker`` process; links and FIFOs are real files.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from paretosearch.cli import main
from paretosearch.export import export
from paretosearch.runs.report_html import script_json, write_html_report
from paretosearch.runs.store import RunStore
from paretosearch.search.cache import EvaluationCache
from paretosearch.service.retune import Exit, RetuneSpec, _read_production, _warm_seeds
from simulator.errors import ParetoSearchError
from tests.helpers.data import ROOT
from tests.helpers.runs import write_spec, write_trace

pytestmark = pytest.mark.timeout(120)

TINY_SEARCH = ["search", "--generate", "40", "--budget", "4", "--pop-size", "2",
               "--offspring", "2", "--seed", "1"]


# --- 3. writes in a run folder or OUT: never through a link, never into a FIFO -----------------

def _plant(path: Path, kind: str, outside: Path) -> None:
    """Put a link to a file outside (``link``), a dangling link (``dangling``), a FIFO
    (``fifo``) or a folder (``folder``) where paretosearch writes a file."""
    path.unlink(missing_ok=True)
    if kind == "link":
        path.symlink_to(outside)
    elif kind == "dangling":
        path.symlink_to(outside.with_name("nowhere"))
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()


KINDS = ["link", "dangling", "fifo", "folder"]


@pytest.fixture
def run_copy(small_run: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(small_run, run, symlinks=True)
    return run


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the run that must come through untouched."""
    path = tmp_path / "precious.json"
    path.write_text('{"keep": true}\n')
    return path


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["evaluations.jsonl", "started.jsonl"])
def test_a_journal_is_never_appended_through_a_link(run_copy: Path, outside: Path, name: str,
                                                    kind: str) -> None:
    _plant(run_copy / name, kind, outside)
    store = RunStore(run_copy)
    with pytest.raises(ParetoSearchError, match=re.escape(name)):
        if name == "started.jsonl":
            store.append_started(0, {"T": 1.0})
        else:
            store.append("k", {"T": 1.0}, {"jct:avg": 1.0})
    assert outside.read_text() == '{"keep": true}\n'


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["optuna.log", "run.lock"])
def test_a_resume_never_writes_through_a_link(run_copy: Path, outside: Path, name: str,
                                              kind: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    _plant(run_copy / name, kind, outside)
    assert main(["search", "--resume", str(run_copy), "--workers", "0"]) == 2
    assert name in capsys.readouterr().err
    assert outside.read_text() == '{"keep": true}\n'


@pytest.mark.parametrize("kind", ["link", "dangling", "fifo"])
def test_the_retune_lock_is_never_written_through_a_link(tmp_path: Path, outside: Path,
                                                         kind: str,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    write_trace(tmp_path / "trace.csv", 200)
    spec = write_spec(tmp_path)
    (tmp_path / "out").mkdir()
    _plant(tmp_path / "out" / "retune.lock", kind, outside)
    assert main(["retune", "--spec", str(spec)]) == Exit.FAILED
    assert "retune.lock" in capsys.readouterr().err
    assert outside.read_text() == '{"keep": true}\n'


@pytest.mark.parametrize("kind", ["link", "dangling", "file"])
def test_export_never_writes_through_a_linked_export_folder(run_copy: Path, tmp_path: Path,
                                                            kind: str,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if kind == "link":
        (run_copy / "export").symlink_to(elsewhere)
    elif kind == "dangling":
        (run_copy / "export").symlink_to(tmp_path / "nowhere")
    else:
        (run_copy / "export").write_text("not a folder")
    assert main(["export", str(run_copy), "--format", "slurm"]) == 2
    assert "export" in capsys.readouterr().err
    assert not any(elsewhere.iterdir()) and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_the_evaluation_cache_is_never_opened_through_a_link(tmp_path: Path, outside: Path,
                                                             kind: str) -> None:
    _plant(tmp_path / "cache.sqlite", kind, outside)
    with pytest.raises(ParetoSearchError, match=r"cache\.sqlite"):
        EvaluationCache(tmp_path / "cache.sqlite")
    assert outside.read_text() == '{"keep": true}\n'


def test_a_second_resume_of_a_live_run_is_refused(run_copy: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    before = (run_copy / "evaluations.jsonl").read_bytes()
    with RunStore(run_copy).writing():  # a search writing the run (another open file)
        assert main(["search", "--resume", str(run_copy), "--workers", "0"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"a search (pid {os.getpid()}) is writing this run now" in err
    assert (run_copy / "evaluations.jsonl").read_bytes() == before


def test_a_run_lock_held_by_another_process_is_named(run_copy: Path) -> None:
    code = ("import sys, time; from paretosearch.runs.store import RunStore\n"
            "with RunStore(sys.argv[1]).writing():\n"
            "    print('held', flush=True); time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(run_copy)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(ParetoSearchError, match=f"pid {holder.pid}"), \
                RunStore(run_copy).writing():
            pass
    finally:
        holder.kill()
        holder.wait()
    with RunStore(run_copy).writing():  # released with its process
        pass


# --- 4. the HTML report: escaped for where it lands ------------------------------------------

class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.scripts: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        if self.tags and self.tags[-1] == "script":
            self.scripts.append(data)


RUN_NAMES = ["x</script><svg onload=alert(1)>", "a&b<c>\"d'", "$(touch pwned)", "x; rm -rf ~",
             "line\u2028break\u2029", "<!--", "`id`"]


@pytest.mark.parametrize("name", RUN_NAMES)
def test_a_hostile_run_name_stays_text_in_the_report(small_run: Path, tmp_path: Path,
                                                     name: str) -> None:
    run = tmp_path / name
    shutil.copytree(small_run, run)
    page = write_html_report(run).read_text()
    parsed = _Elements()
    parsed.feed(page)
    assert not {"svg", "img", "iframe"} & set(parsed.tags)
    (commands,) = [json.loads(s.split("=", 1)[1].rstrip().rstrip(";"))
                   for s in parsed.scripts if s.startswith("var COMMANDS")]
    for command in commands:
        for line in command.split("\n"):
            assert shlex.split(line)[2] == str(run)  # one word in a shell, whatever it holds


@pytest.mark.parametrize("value", ["</script>", "<!--", "&amp;", "\u2028", "\u2029", "]]>"])
def test_script_json_has_nothing_a_script_element_reads(value: str) -> None:
    text = script_json([value, {"k": value}])
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == [value, {"k": value}]


# --- 6. exports refuse what no scheduler can hold, before writing anything --------------------

def _chosen(**change: Any) -> dict[str, Any]:
    params = {"T": 4.5, "W": 1.4, "zeta_min": 0.4, "delta": 0.6}
    doc = {"policy": "wfq", "params": params,
           "fitted": {**params, "thresholds": [297779.75, None], "rates": [0.8, 0.2]},
           "cluster": {"profile": "pcs-64", "gpus_by_type": {"V100": 64}}}
    for key, value in change.items():
        if key in ("thresholds", "rates"):
            doc["fitted"] = {**doc["fitted"], key: value}
        else:
            doc["cluster"] = {**doc["cluster"], "gpus_by_type": value}
    return doc


IMPOSSIBLE: list[tuple[str, dict[str, Any], str]] = [
    ("10^30 GPUs", {"gpus": {"V100": 10**30}}, "gpus_by_type"),
    ("10^7+1 GPUs", {"gpus": {"V100": 10**7 + 1}}, "gpus_by_type"),
    ("zero GPUs", {"gpus": {"V100": 0}}, "gpus_by_type"),
    ("negative GPUs", {"gpus": {"V100": -64}}, "gpus_by_type"),
    ("fractional GPUs", {"gpus": {"V100": 1.5}}, "gpus_by_type"),
    ("boolean GPUs", {"gpus": {"V100": True}}, "gpus_by_type"),
    ("GPUs as text", {"gpus": {"V100": "64"}}, "gpus_by_type"),
    ("no GPU types", {"gpus": {}}, "gpus_by_type"),
    ("a NaN threshold", {"thresholds": [math.nan, None]}, "thresholds"),
    ("a negative threshold", {"thresholds": [-5.0, None]}, "thresholds"),
    ("a zero threshold", {"thresholds": [0.0, None]}, "thresholds"),
    ("descending thresholds", {"thresholds": [500.0, 100.0, None]}, "thresholds"),
    ("an infinite middle threshold", {"thresholds": [math.inf, 5.0, None]}, "thresholds"),
    ("threshold text", {"thresholds": ["a", None]}, "thresholds"),
    ("a boolean threshold", {"thresholds": [True, None]}, "thresholds"),
    ("a 2^63 threshold", {"thresholds": [2**63, None]}, "thresholds"),
    ("a 10^400 threshold", {"thresholds": [10**400, None]}, "thresholds"),
    ("a NaN rate", {"rates": [math.nan, 0.2]}, "rates"),
    ("a negative rate", {"rates": [-0.8, 0.2]}, "rates"),
]


@pytest.mark.parametrize(("change", "field"), [(c, f) for _, c, f in IMPOSSIBLE],
                         ids=[n for n, _, _ in IMPOSSIBLE])
@pytest.mark.parametrize("fmt", ["kueue", "slurm"])
def test_exports_refuse_impossible_configs(change: dict[str, Any], field: str, fmt: str) -> None:
    with pytest.raises(ParetoSearchError) as caught:
        export(_chosen(**change), fmt, source="chosen.json")
    message = str(caught.value)
    assert "chosen.json" in message and (field in message or "fitted" in message), message


@pytest.mark.parametrize("fmt", ["kueue", "volcano", "slurm", "yarn"])
def test_integer_thresholds_export_as_the_same_bounds(fmt: str) -> None:
    as_int, as_float = (export(_chosen(thresholds=[th, None]), fmt).files
                        for th in (297779, 297779.0))
    assert as_int == as_float  # JSON writes 297779.0 as 297779; both are one bound


@pytest.mark.parametrize("change", [{"thresholds": [math.nan, None]}, {"gpus": {"V100": 10**30}}],
                         ids=["NaN threshold", "10^30 GPUs"])
def test_a_refused_export_writes_nothing(tmp_path: Path, change: dict[str, Any],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "chosen.json"
    config.write_text(json.dumps(_chosen(**change)))  # NaN written as JSON's NaN
    assert main(["export", str(config), "--format", "kueue"]) == 2
    assert "chosen.json" in capsys.readouterr().err
    assert not (tmp_path / "export").exists() or not any((tmp_path / "export").rglob("*.yaml"))


# --- 5. documents the nightly job reads: bounded, shape-checked, named ------------------------

PRODUCTION: list[tuple[str, str | bytes, str]] = [
    ("not UTF-8", b"\xff\xfe{", "not JSON"), ("not JSON", "{", "not JSON"),
    ("deep nesting", "[" * 100_000 + "]" * 100_000, "not JSON"),
    ("a list", "[]", "'policy'"), ("policy as a list", '{"policy": ["wfq"], "params": {}}',
                                   "'policy'"),
    ("params as a list", '{"policy": "wfq", "params": [1, 2]}', "'params'"),
    ("fitted as text", '{"policy": "wfq", "fitted": "x", "params": {}}', "'fitted'"),
    ("an unknown policy", '{"policy": "nope", "params": {}}', "not a known policy"),
    ("mixed-type thresholds", '{"policy": "wfq", "fitted": {"thresholds": [1, "a"]}}',
     "thresholds"),
    ("thresholds as a mapping", '{"policy": "wfq", "fitted": {"thresholds": {"a": 1}}}',
     "thresholds"),
    ("a parameter out of range", '{"policy": "wfq", "params": {"W": -1e308}}', "'W'"),
]


@pytest.mark.parametrize(("content", "message"), [(c, m) for _, c, m in PRODUCTION],
                         ids=[n for n, _, _ in PRODUCTION])
def test_a_bad_production_config_is_named(tmp_path: Path, content: str | bytes,
                                          message: str) -> None:
    path = tmp_path / "chosen.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ParetoSearchError, match=re.escape(message)) as caught:
        _read_production(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("kind", ["fifo", "folder", "missing"])
def test_a_production_config_that_is_not_a_file_is_refused_at_once(tmp_path: Path,
                                                                   kind: str) -> None:
    path = tmp_path / "chosen.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    with pytest.raises(ParetoSearchError, match="production config"):
        _read_production(path)


SPECS: list[tuple[str, dict[str, Any], str]] = [
    ("policy as a list", {"policy": ["wfq"]}, "policy"),
    ("fixed as a list", {"fixed": [1, 2]}, "fixed"),
    ("fixed thresholds of mixed types", {"fixed": {"thresholds": [1, "a"]}}, "fixed"),
    ("objectives as text", {"objectives": "jct:avg"}, "objectives"),
    ("an unknown objective", {"objectives": ["nope:avg"]}, "nope"),
    ("a negative budget", {"search": {"budget": -1}}, "budget"),
    ("a NaN window", {"window": {"seconds": math.nan, "min_jobs": 5, "max_jobs": 10}}, "window"),
    ("workers as text", {"workers": "two"}, "workers"),
    ("an unknown key", {"evil": 1}, "evil"),
]


@pytest.mark.parametrize(("fields", "name"), [(f, n) for _, f, n in SPECS],
                         ids=[n for n, _, _ in SPECS])
def test_a_bad_retune_spec_is_named(tmp_path: Path, fields: dict[str, Any], name: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    write_trace(tmp_path / "trace.csv", 200)
    spec = write_spec(tmp_path, **fields)
    assert main(["retune", "--spec", str(spec)]) == Exit.BAD_INPUT
    err = " ".join(capsys.readouterr().err.split())
    assert "retune.yaml" in err and name in err, err


def test_a_deeply_nested_retune_spec_is_named(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "retune.yaml"
    spec.write_text("fixed: " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert main(["retune", "--spec", str(spec)]) == Exit.BAD_INPUT
    assert "retune.yaml" in capsys.readouterr().err


CACHE_ROWS = ["x", "[]", '{"jct:avg": "1"}', '{"jct:avg": Infinity}', '{"jct:avg": true}',
              "[" * 10_000 + "]" * 10_000, '{"jct:avg": [1]}', "null"]


@pytest.mark.parametrize("row", CACHE_ROWS, ids=[r[:20] for r in CACHE_ROWS])
def test_a_damaged_cache_row_is_evaluated_again(tmp_path: Path, row: str,
                                                caplog: pytest.LogCaptureFixture) -> None:
    cache = EvaluationCache(tmp_path / "cache.sqlite")
    cache.put("key", {"jct:avg": 1.0})
    assert cache.get("key") == {"jct:avg": 1.0}
    with cache._db:
        cache._db.execute("UPDATE evaluations SET record = ? WHERE key = 'key'", (row,))
    assert cache.get("key") is None
    assert "damaged" in caplog.text and "cache.sqlite" in caplog.text


@pytest.mark.parametrize("damage", ["front.json", "records.parquet", "run.json"])
def test_a_damaged_previous_run_means_a_named_cold_start(run_copy: Path, damage: str) -> None:
    (run_copy / damage).write_bytes(b"\x00garbage")
    spec = RetuneSpec.load(write_spec(run_copy.parent, policy="wfq"))
    with pytest.warns(UserWarning, match=f"{run_copy}: cannot warm-start"):
        assert _warm_seeds(run_copy, spec) == []


CHOSEN = [("a list", "[]", "a JSON object expected"), ("not JSON", "{", "not valid JSON"),
          ("no params", '{"policy": "wfq"}', "'params': missing"),
          ("params as a list", '{"policy": "wfq", "params": [1, 2]}', "'params'"),
          ("a params value as a list", '{"params": {"T": [1]}}', "'params.T'"),
          ("deep nesting", '{"params": ' + "[" * 100_000 + "]" * 100_000 + "}", "not valid JSON")]


@pytest.mark.parametrize(("content", "message"), [(c, m) for _, c, m in CHOSEN],
                         ids=[n for n, _, _ in CHOSEN])
@pytest.mark.parametrize("command", ["front", "report"])
def test_front_and_report_name_a_malformed_chosen_config(run_copy: Path, command: str,
                                                         content: str, message: str,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    (run_copy / "chosen.json").write_text(content)
    assert main([command, str(run_copy)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{run_copy / 'chosen.json'}" in err and message in err, err


@pytest.mark.parametrize("fixed", [{"evil": [1]}, {"W": "x"}, {"rates": [{}, 1],
                                                             "thresholds": [1, None]}],
                         ids=["an unknown name", "a value as text", "rates as an object"])
def test_garbage_fixed_values_in_run_json_never_reach_chosen_json(
        run_copy: Path, fixed: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    spec = json.loads((run_copy / "run.json").read_text())
    (run_copy / "run.json").write_text(json.dumps({**spec, "fixed": fixed}))
    before = (run_copy / "chosen.json").read_bytes()
    assert main(["select", str(run_copy), "--index", "0"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{run_copy / 'run.json'}, column 'fixed'" in err, err
    assert (run_copy / "chosen.json").read_bytes() == before


# --- 9. output that is what it says -----------------------------------------------------------

def _no_constants(name: str) -> None:
    raise AssertionError(f"{name} is not JSON")


def test_simulate_json_is_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--generate", "40", "--policy", "fifo", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out, parse_constant=_no_constants)
    assert doc["jobs"] == 40


@pytest.mark.parametrize(("row", "column"), [("0,1e308,1,10,linear", "arrival_s"),
                                             ("0,0,1,1e308,linear", "service_s"),
                                             ("0,0,1,1e13,linear", "service_s")])
def test_times_past_the_simulators_range_are_named(tmp_path: Path, row: str, column: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "w.csv"
    trace.write_text(f"job_id,arrival_s,gpus,service_s,model\n{row}\n")
    assert main(["simulate", "--trace", str(trace), "--policy", "fifo", "--json"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{trace}, row 1, column '{column}'" in err and "at most 1e+12 s" in err, err


@pytest.mark.parametrize(("rows", "column"), [
    ("m,1,1,100\nm,2,1e308,50\n", "speedup"),
    ("m,1,1,100\nm,2,2,1e-300\n", "time_per_iter_us")])
def test_speed_ups_past_the_simulators_range_are_named(
        tmp_path: Path, rows: str, column: str, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "scaling.csv"
    table.write_text("model,gpus,speedup,time_per_iter_us\n" + rows)
    assert main(["simulate", "--generate", "40", "--scaling-table", str(table), "--json"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{table}, row 2, column '{column}'" in err and "at most 1,000,000" in err, err


def test_select_json_is_json(small_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = small_run.parent / "chosen-copy.json"
    assert main(["select", str(small_run), "--knee", "--out", str(out)]) == 0
    json.loads(out.read_text(), parse_constant=_no_constants)


@pytest.mark.parametrize("how", [["--knee"], ["--weights", "1,1"], ["--weights", "1,0"],
                                 ["--weights", "0,1"]], ids=" ".join)
@pytest.mark.parametrize("entry", [0, 1, 2])
def test_select_never_picks_an_entry_with_a_nan_objective(run_copy: Path, how: list[str],
                                                          entry: int) -> None:
    front = json.loads((run_copy / "front.json").read_text())
    for part in ("objectives", "metrics"):
        front["front"][entry][part]["jct:avg"] = None  # how JSON writes NaN
    (run_copy / "front.json").write_text(json.dumps(front))
    out = run_copy / "picked.json"
    assert main(["select", str(run_copy), *how, "--include-dominated", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["front_index"] != entry


# --- 10. errors keep their bracketed values ---------------------------------------------------

@pytest.mark.parametrize("cell", ["[white on white]2", "[nan, inf]", "[/]", "[bold]x[/bold]"])
def test_bracketed_values_survive_the_error_console(tmp_path: Path, cell: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "chosen.json"
    config.write_text(json.dumps(_chosen(gpus={"V100": cell})))
    assert main(["export", str(config), "--format", "slurm"]) == 2
    assert cell in capsys.readouterr().err


def test_runs_latest_that_is_a_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "latest").mkdir(parents=True)
    (tmp_path / "runs" / "latest" / "keep.txt").write_text("mine")
    assert main([*TINY_SEARCH, "--workers", "0"]) == 2
    assert "runs/latest: cannot point it at" in capsys.readouterr().err
    assert (tmp_path / "runs" / "latest" / "keep.txt").read_text() == "mine"


def test_the_catalogue_has_at_least_150_cases(request: pytest.FixtureRequest) -> None:
    """Counted over every ``test_hostile_*`` module, when all of them run (unselected)."""
    modules = {p.stem for p in Path(__file__).parent.glob("test_hostile_*.py")}
    items = [i for i in request.session.items if i.module.__name__.rpartition(".")[2] in modules]
    if {i.module.__name__.rpartition(".")[2] for i in items} == modules and (
            not request.config.option.keyword):
        assert len(items) >= 150
