"""The hostile catalogue (issue 41), continued: what an input file's bytes can hold. Every
loader refuses a folder, a FIFO or a device given as its file (at once, naming it); JSON
documents refuse NaN, infinities, numbers past a float's range and keys given twice, naming the
field; YAML documents refuse keys given twice, tags that build objects, alias bombs, NUL bytes
and text that is not UTF-8; a trace with a byte-order mark or CRLF line ends reads as the same
trace. Each case asserts the verdict; none may hang (a timeout) or print a traceback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from paretosearch.cli import main
from paretosearch.service.retune import _read_production
from policies.learned.predictors import UtilizationPredictor
from policies.learned.profiling_data import read_utilization_profiles
from simulator.errors import ParetoSearchError
from simulator.inputs.generate import read_cdf
from simulator.inputs.profile import load_profile
from simulator.inputs.scaling import ScalingTable
from simulator.inputs.throughput import ThroughputTable
from simulator.inputs.traces import read_gavel_trace, read_helios, read_trace
from simulator.inputs.workload import read_pcs_trace, read_table
from tests.helpers.data import ROOT, SHARED
from tests.helpers.runs import write_spec, write_trace
from tests.paretosearch.test_hostile_catalogue import TINY_SEARCH, _chosen

pytestmark = pytest.mark.timeout(120)

SCALING = SHARED / "data" / "pcs" / "scaling_tables.csv"

# --- every loader: a folder, a FIFO or a device is refused at once, naming the file -----------

LOADERS: dict[str, Callable[[Path], Any]] = {
    "trace": read_trace, "workload table": read_table, "Helios log": read_helios,
    "PCS trace": lambda p: read_pcs_trace(p, scaling=ScalingTable.from_csv(SCALING)),
    "Gavel trace": lambda p: read_gavel_trace(p, None),  # type: ignore[arg-type]
    "throughput table": ThroughputTable.from_gavel_json, "scaling table": ScalingTable.from_csv,
    "CDF file": read_cdf, "profile": load_profile, "saved predictor": UtilizationPredictor.load,
    "profiling data": read_utilization_profiles,
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["folder", "fifo", "device"])
@pytest.mark.parametrize("loader", LOADERS)
def test_every_loader_refuses_what_is_not_a_file(tmp_path: Path, loader: str, kind: str) -> None:
    path = Path("/dev/zero") if kind == "device" else tmp_path / "input.csv"
    if loader == "profile" and kind != "device":
        path = path.with_suffix(".yaml")
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    with pytest.raises(ParetoSearchError) as caught:
        LOADERS[loader](path)
    said = str(caught.value)
    assert str(path) in said, said
    assert "not a regular file" in said or "unsupported trace format" in said or (
        "unknown cluster profile" in said), said


# --- JSON documents: numbers that are not finite, keys given twice, named ---------------------

NOT_FINITE = [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"),
              ("1e400", "1e400")]


def _document(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "chosen.json"
    path.write_text(text)
    return path


def _verdict(argv: list[str], capsys: pytest.CaptureFixture[str], *said: str) -> None:
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert all(s in err for s in said), err


def _with_w(value: str) -> str:
    doc = _chosen()
    doc["params"]["W"] = 12345.25
    return json.dumps(doc).replace("12345.25", value)


@pytest.mark.parametrize(("literal", "shown"), NOT_FINITE, ids=[n[0] for n in NOT_FINITE])
@pytest.mark.parametrize("command", ["simulate", "export", "production"])
def test_a_number_that_is_not_finite_in_a_json_document_is_named(
        tmp_path: Path, command: str, literal: str, shown: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = _document(tmp_path, _with_w(literal))
    if command == "production":
        with pytest.raises(ParetoSearchError, match="is not finite") as caught:
            _read_production(path)
        assert str(path) in str(caught.value) and "params.W" in str(caught.value)
        return
    argv = (["simulate", "--generate", "40", "--config", str(path)] if command == "simulate"
            else ["export", str(path), "--format", "slurm"])
    _verdict(argv, capsys, str(path), "field params.W", shown, "is not finite")


@pytest.mark.parametrize("command", ["simulate", "export"])
def test_a_key_given_twice_in_a_json_document_is_named(tmp_path: Path, command: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = _document(tmp_path, json.dumps(_chosen())[:-1] + ', "policy": "fifo"}')
    argv = (["simulate", "--generate", "40", "--config", str(path)] if command == "simulate"
            else ["export", str(path), "--format", "slurm"])
    _verdict(argv, capsys, str(path), "'policy' is given twice")


@pytest.fixture
def run_copy(small_run: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(small_run, run, symlinks=True)
    return run


@pytest.mark.parametrize("damage", ["NaN", "1e400", "twice", "deep"])
@pytest.mark.parametrize("name", ["front.json", "run.json", "chosen.json"])
def test_a_run_document_with_such_numbers_or_keys_is_named(
        run_copy: Path, name: str, damage: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = run_copy / name
    text = path.read_text()
    if damage == "twice":
        text = text.rstrip().removesuffix("}") + f', "{next(iter(json.loads(text)))}": 1}}'
    elif damage == "deep":
        text = "[" * 100_000 + "]" * 100_000
    else:  # the first number of the document
        i = next(i for i, c in enumerate(text) if c.isdigit() and text[i - 1] in " [:")
        j = i + next(n for n, c in enumerate(text[i:]) if c not in "0123456789.e-+")
        text = text[:i] + damage + text[j:]
    path.write_text(text)
    command = {"chosen.json": ["export", str(run_copy), "--format", "slurm"],
               "front.json": ["front", str(run_copy)],
               "run.json": ["search", "--resume", str(run_copy), "--workers", "0"]}[name]
    _verdict(command, capsys, name)


# --- YAML documents: one reader for profiles, specs and cluster files -------------------------

def _profile_text() -> str:
    return (ROOT / "cluster_profiles" / "pcs-64.yaml").read_text()


YAML: list[tuple[str, Callable[[str], str | bytes], str]] = [
    ("a key twice", lambda t: t + "\nname: pcs-64\n", "'name' is given twice"),
    ("a python tag", lambda t: t.replace("gpus_per_node: 64",
                                         "gpus_per_node: !!python/object/apply:os.system [id]"),
     "python/object/apply"),
    ("a python name tag", lambda t: "x: !!python/name:os.system\n" + t, "python/name"),
    ("an alias bomb", lambda t: "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10) if p else ', '.join('x' * 10)}]\n"
        for p, c in zip(["", "a", "b", "c", "d", "e"], "abcdef", strict=True)) + t,
     "alias bomb"),
    ("a NUL byte", lambda t: t.encode().replace(b"name", b"na\x00me", 1), "#x0000"),
    ("latin-1 text", lambda t: t.encode().replace(b"name: pcs-64", b"name: pcs-64 # \xe9"),
     "not UTF-8"),
    ("nested 100,000 deep", lambda t: "x: " + "[" * 100_000 + "]" * 100_000 + "\n" + t,
     "not valid YAML"),
    ("gpus .nan", lambda t: t.replace("gpus_per_node: 64", "gpus_per_node: .nan"),
     "node_groups[0].gpus_per_node"),
    ("gpus .inf", lambda t: t.replace("gpus_per_node: 64", "gpus_per_node: .inf"),
     "node_groups[0].gpus_per_node"),
    ("a speed .nan", lambda t: t.replace("relative_speed: 1.0", "relative_speed: .nan"),
     "relative_speed"),
    ("memory -16", lambda t: t.replace("gpu_memory_gib: 16", "gpu_memory_gib: -16"),
     "gpu_memory_gib"),
    ("a restart .inf", lambda t: t.replace("restart_overhead_s: 0", "restart_overhead_s: .inf"),
     "overheads.restart_overhead_s': must be a number >= 0 (got inf)"),
    ("a suspend .nan", lambda t: t.replace("suspend_overhead_s: 0", "suspend_overhead_s: .nan"),
     "overheads.suspend_overhead_s"),
    ("network .inf", lambda t: t.replace("inter_node_factor: 1.0", "inter_node_factor: .inf"),
     "network.inter_node_factor"),
]


@pytest.mark.parametrize(("change", "said"), [y[1:] for y in YAML], ids=[y[0] for y in YAML])
def test_a_hostile_profile_is_named(tmp_path: Path, change: Callable[[str], str | bytes],
                                    said: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pcs-64.yaml"
    text = change(_profile_text())
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    _verdict(["simulate", "--generate", "40", "--profile", str(path)], capsys, str(path), said)


@pytest.mark.parametrize("document", ["spec", "cluster file"])
@pytest.mark.parametrize("change", ["twice", "tag"])
def test_a_spec_or_cluster_file_with_a_key_twice_or_a_tag_is_named(
        tmp_path: Path, document: str, change: str, capsys: pytest.CaptureFixture[str]) -> None:
    write_trace(tmp_path / "trace.csv", 200)
    if document == "spec":
        path = write_spec(tmp_path)
        argv = ["retune", "--spec", str(path)]
    else:
        path = tmp_path / "dask-cluster.yaml"
        path.write_text("module: distributed\nclass: LocalCluster\nkwargs: {n_workers: 1}\n")
        argv = [*TINY_SEARCH, "--cluster-config", str(path), "--run-dir", str(tmp_path / "r")]
    text = path.read_text()
    path.write_text(text + ("workers: 1\n" if document == "spec" else "class: Popen\n")
                    if change == "twice" else "x: !!python/object/apply:os.system [id]\n" + text)
    _verdict(argv, capsys, str(path), "given twice" if change == "twice" else "python/object")
    assert not (tmp_path / "r").exists()


# --- traces: the same trace however its text is framed; bytes that are not text, named --------

def _simulate_json(trace: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["simulate", "--trace", str(trace), "--scaling-table", str(SCALING),
                 "--policy", "fifo", "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc["metrics"]


@pytest.mark.parametrize("frame", ["bom", "crlf"])
def test_a_trace_with_a_bom_or_crlf_is_the_same_trace(tmp_path: Path, frame: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    plain = write_trace(tmp_path / "plain.csv", 60)
    framed = tmp_path / "framed.csv"
    text = plain.read_text()
    framed.write_bytes(b"\xef\xbb\xbf" + text.encode() if frame == "bom"
                       else text.replace("\n", "\r\n").encode())
    assert _simulate_json(framed, capsys) == _simulate_json(plain, capsys)


@pytest.mark.parametrize(("damage", "said"), [
    (lambda b: b.replace(b"\n1,", b"\n1\xe9,", 1), "utf-8"),
    (lambda b: b.replace(b",", b"\x00,", 1), "app_id"),
    (lambda b: b + b"x" * 3_000_000 + b"\n", "row 61"),
], ids=["latin-1", "a NUL byte", "a 3 MB line"])
def test_a_trace_that_is_not_text_is_named(tmp_path: Path, damage: Callable[[bytes], bytes],
                                           said: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_trace(tmp_path / "trace.csv", 60)
    path.write_bytes(damage(path.read_bytes()))
    _verdict(["simulate", "--trace", str(path), "--scaling-table", str(SCALING), "--policy",
              "fifo"], capsys, str(path), said)


# --- runs/latest: ours to move when it is a link, someone else's otherwise --------------------

@pytest.mark.parametrize("kind", ["file", "fifo", "dangling"])
def test_runs_latest_that_is_not_our_link_is_kept(tmp_path: Path, kind: str,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    latest = tmp_path / "runs" / "latest"
    latest.parent.mkdir()
    if kind == "file":
        latest.write_text("mine")
    elif kind == "fifo":
        os.mkfifo(latest)
    else:
        latest.symlink_to("nowhere")
    code = main([*TINY_SEARCH, "--workers", "0"])
    if kind == "dangling":  # a link: moved to the new run, as documented
        assert code == 0 and (latest / "front.json").is_file()
        return
    assert code == 2
    assert "runs/latest: cannot point it at" in capsys.readouterr().err
    assert latest.read_text() == "mine" if kind == "file" else not latest.is_symlink()



# --- a throughput table (Gavel's JSON): shape and rates checked, naming the entry -------------

GAVEL_JSON = SHARED / "data" / "gavel" / "simulation_throughputs.json"
THROUGHPUTS: list[tuple[str, str, str]] = [
    ("a list", "[]", "a JSON object of GPU types"),
    ("jobs as a list", '{"k80": []}', "column 'k80'"),
    ("a job as a number", '{"k80": {"(\'a\', 1)": 5}}', "column \"k80.('a', 1)\""),
    ("no null rate", '{"k80": {"(\'a\', 1)": {}}}', "column \"k80.('a', 1)\""),
    ("a rate as text", '{"k80": {"(\'a\', 1)": {"null": "x"}}}', ".null\": must be a finite"),
    ("a negative rate", '{"k80": {"(\'a\', 1)": {"null": -1}}}', "(got -1)"),
    ("a NaN rate", '{"k80": {"(\'a\', 1)": {"null": NaN}}}', "(got nan)"),
    ("a 1e400 rate", '{"k80": {"(\'a\', 1)": {"null": 1e400}}}', "(got inf)"),
    ("a pair as a number", '{"k80": {"(\'a\', 1)": {"null": 1, "(\'a\', 1)": 7}}}', "as [a, b]"),
    ("a pair with text", '{"k80": {"(\'a\', 1)": {"null": 1, "(\'a\', 1)": [1, "b"]}}}',
     "as [a, b]"),
    ("nested 100,000 deep", "[" * 100_000 + "]" * 100_000, "cannot read the throughput table"),
]


@pytest.mark.parametrize(("text", "said"), [t[1:] for t in THROUGHPUTS],
                         ids=[t[0] for t in THROUGHPUTS])
def test_a_malformed_throughput_table_is_named(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "throughputs.json"
    path.write_text(text)
    with pytest.raises(ParetoSearchError) as caught:
        ThroughputTable.from_gavel_json(path)
    assert str(path) in str(caught.value) and said in str(caught.value), str(caught.value)


def test_gavels_own_throughput_table_still_loads() -> None:
    table = ThroughputTable.from_gavel_json(GAVEL_JSON)
    assert table.gpu_types == ("k80", "p100", "v100")


@pytest.mark.parametrize("frame", ["bom", "crlf"])
def test_a_gavel_trace_with_a_bom_or_crlf_is_the_same_trace(tmp_path: Path, frame: str) -> None:
    text = (ROOT / "tests" / "fixtures" / "gavel" / "continuous_multi.trace").read_bytes()
    plain, framed = tmp_path / "plain.trace", tmp_path / "framed.trace"
    plain.write_bytes(text)
    framed.write_bytes(b"\xef\xbb\xbf" + text if frame == "bom" else text.replace(b"\n", b"\r\n"))
    table = ThroughputTable.from_gavel_json(GAVEL_JSON)
    one, other = read_gavel_trace(framed, table), read_gavel_trace(plain, table)
    for name in ("job_id", "arrival_s", "gpus", "service_s", "model"):
        assert (getattr(one, name) == getattr(other, name)).all(), name


# --- a scaling table: each cell named by its row and column, the value as written ------------

SCALING_CELLS = [("gpus", "nan", "row 2, column 'gpus'"), ("gpus", "1.5", "(got 1.5)"),
                 ("gpus", "1e400", "row 2, column 'gpus'"), ("speedup", "abc", "(got 'abc')"),
                 ("speedup", "inf", "row 2, column 'speedup'"),
                 ("time_per_iter_us", "-2", "row 2, column 'time_per_iter_us'"),
                 ("time_per_iter_us", "1e400", "row 2, column 'time_per_iter_us'")]


@pytest.mark.parametrize(("column", "cell", "said"), SCALING_CELLS,
                         ids=[f"{c} {v}" for c, v, _ in SCALING_CELLS])
def test_a_bad_scaling_table_cell_is_named_at_its_row(tmp_path: Path, column: str, cell: str,
                                                      said: str) -> None:
    lines = SCALING.read_text().splitlines()
    header = lines[0].split(",")
    row = lines[2].split(",")
    row[header.index(column)] = cell
    path = tmp_path / "scaling.csv"
    path.write_text("\n".join([lines[0], lines[1], ",".join(row), *lines[3:]]) + "\n")
    with pytest.raises(ParetoSearchError) as caught:
        ScalingTable.from_csv(path)
    assert str(path) in str(caught.value) and said in str(caught.value), str(caught.value)


@pytest.mark.parametrize(("rows", "said"), [
    ("1,0.5\n2,inf", "row 2, column 'cdf': must be a finite number (got inf)"),
    ("1,nan\n2,1", "row 1, column 'cdf': must be a finite number (got nan)"),
    ("1,0.5\n1e400,1", "row 2, column 'value': must be a finite number (got inf)"),
], ids=["an infinite cdf", "a NaN cdf", "a 1e400 value"])
def test_a_bad_cdf_cell_is_named_with_its_own_value(tmp_path: Path, rows: str, said: str) -> None:
    path = tmp_path / "cdf.csv"
    path.write_text(f"value,cdf\n{rows}\n")
    with pytest.raises(ParetoSearchError, match=re.escape(said)):
        read_cdf(path)
