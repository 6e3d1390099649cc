"""A catalogue of bad inputs: every loader either loads a file or raises the project's own
error naming the file (and, for the hand-written cases, the row or field and the value) -
never another exception, a hang, or a silent partial result; exports quote or refuse what a
scheduler would parse differently.

The fuzzing mutates real files (PCS, Chronus, Gavel traces from ../shared and the fixtures;
Helios, Philly and workload-schema tables; a shipped profile; a retune spec; the cluster
file; a chosen config; a run's front.json and run.json) cell by cell, line by line and byte by
byte, with hypothesis (derandomized: the same cases in every run).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paretosearch.cli import main
from paretosearch.export import ExportOptions, export
from paretosearch.runs.store import RunStore
from paretosearch.search.cluster import load_cluster_spec
from paretosearch.service.retune_spec import RetuneSpec
from simulator import ScalingTable, generate, load_profile, read_trace
from simulator.errors import ParetoSearchError
from simulator.inputs.files import MAX_YAML_NODES
from simulator.inputs.throughput import ThroughputTable
from tests.helpers.data import PCS, ROOT, SHARED

GAVEL = ThroughputTable.from_gavel_json(SHARED / "data" / "gavel" / "simulation_throughputs.json")
PCS_SCALING = ScalingTable.from_csv(PCS / "scaling_tables.csv")
FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
HOSTILE = ["", "nan", "inf", "-inf", "1e308", "1e309", "-1e308", "-0", "-0.0", "-1", "0", "abc",
           "\x00", "9" * 400, '"', "#x", "<a>&b", "2017-13-45", "0x10", "true", "[]", "{}",
           "5e-324", "１", "\u202e", "a\rb"]


def _head(path: Path, lines: int) -> str:
    return "\n".join(path.read_text().splitlines()[:lines]) + "\n"


def _seeds() -> dict[str, tuple[str, str, Callable[[Path], Any]]]:
    """Loader name: (file name, a valid file's text, how to load it)."""
    wl = generate(15, seed=0).to_frame()
    helios = ("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
              "duration,queue\n" + "".join(f"a{i},u,v,{1 + i % 4},1,1,COMPLETED,{i * 10},0,0,"
                                           f"{30 + i},0\n" for i in range(15)))
    philly = ("timestamp,duration,num_gpus,gpu_time,cluster\n"
              + "".join(f"2017-10-09 07:{i:02d}:55,{60 + i},{1 + i % 3},120,vc\n"
                        for i in range(15)))
    spec = {"trace": "trace.csv", "scaling_table": str(PCS / "scaling_tables.csv"),
            "window": {"seconds": 1e7, "min_jobs": 5, "max_jobs": 300}, "profile": "pcs-64",
            "policy": "wfq", "objectives": ["jct:avg", "pred_err:avg"],
            "search": {"budget": 24, "pop_size": 6, "offspring": 6, "seed": 3}, "out": "out"}
    return {
        "pcs": ("pcs.csv", _head(PCS / "traces" / "trace_0e4a51.csv", 20),
                lambda p: read_trace(p, scaling=PCS_SCALING)),
        "chronus": ("chronus.csv", _head(SHARED / "data" / "chronus" /
                                         "trace_job_Philly_SLO.csv", 20), read_trace),
        "helios": ("helios.csv", helios, read_trace),
        "philly": ("philly.csv", philly, read_trace),
        "schema": ("schema.csv", wl.to_csv(index=False), read_trace),
        "gavel": ("jobs.trace", _head(ROOT / "tests" / "fixtures" / "gavel" /
                                      "continuous_multi.trace", 15),
                  lambda p: read_trace(p, throughputs=GAVEL)),
        "profile": ("pcs-64.yaml", (ROOT / "cluster_profiles" / "pcs-64.yaml").read_text(),
                    load_profile),
        "spec": ("retune.yaml", yaml.safe_dump(spec), RetuneSpec.load),
        "cluster": ("cluster.yaml", (ROOT / "dask-cluster.yaml").read_text(),
                    load_cluster_spec),
    }


SEEDS = _seeds()


def _cell(text: str, data: st.DataObject, sep: str) -> str:
    """One mutation of a delimited file: a cell, a header, a line, a byte."""
    lines = text.splitlines() or [""]
    row = data.draw(st.integers(0, len(lines) - 1))
    cells = lines[row].split(sep)
    op = data.draw(st.sampled_from(["cell", "drop", "extra", "dup", "cut", "byte"]))
    if op == "cell":
        cells[data.draw(st.integers(0, len(cells) - 1))] = data.draw(
            st.sampled_from(HOSTILE) | st.text(max_size=12))
    elif op == "drop":
        del cells[data.draw(st.integers(0, len(cells) - 1))]
    elif op == "extra":
        cells.append(data.draw(st.sampled_from(HOSTILE)))
    elif op == "dup":
        lines.insert(row, lines[row])
    elif op == "cut":
        return text[:data.draw(st.integers(0, len(text)))]
    elif text:
        raw = bytearray(text.encode())
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        return raw.decode("latin-1")
    lines[row] = sep.join(cells)
    return "\n".join(lines) + "\n"


def _yaml_line(text: str, data: st.DataObject) -> str:
    """One mutation of a YAML file: a value, an indent, a line, a cut."""
    lines = text.splitlines() or [""]
    row = data.draw(st.integers(0, len(lines) - 1))
    op = data.draw(st.sampled_from(["value", "indent", "dup", "cut"]))
    if op == "value" and ":" in lines[row]:
        key = lines[row].partition(":")[0]
        lines[row] = f"{key}: " + data.draw(st.sampled_from(
            [*HOSTILE, "!!python/object/apply:os.system ['true']", "*nowhere", "[1, 2",
             "{a: 1}", "null", "~", "- 1", "2017-13-45"]))
    elif op == "indent":
        lines[row] = " " * data.draw(st.integers(1, 3)) + lines[row]
    elif op == "dup":
        lines.insert(row, lines[row])
    else:
        return text[:data.draw(st.integers(0, len(text)))]
    return "\n".join(lines) + "\n"


def _loads_or_names_the_file(load: Callable[[Path], Any], path: Path) -> None:
    try:
        load(path)
    except ParetoSearchError as exc:
        assert str(path) in str(exc) or path.name in str(exc), str(exc)


@pytest.mark.parametrize("kind", sorted(SEEDS))
def test_every_loader_survives_mutated_files(kind: str, tmp_path_factory: Any) -> None:
    name, text, load = SEEDS[kind]
    folder = tmp_path_factory.mktemp(kind)
    if kind == "spec":  # its trace is read only when a retune runs: the spec is the input
        shutil.copy(PCS / "traces" / "trace_0e4a51.csv", folder / "trace.csv")
    (folder / name).write_text(text)
    load(folder / name)  # the unmutated file loads
    mutate = {"gavel": lambda t, d: _cell(t, d, "\t"),
              "profile": _yaml_line, "spec": _yaml_line, "cluster": _yaml_line
              }.get(kind, lambda t, d: _cell(t, d, ","))

    @FUZZ
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        mutated = text
        for _ in range(data.draw(st.integers(1, 3))):
            mutated = mutate(mutated, data)
        path = folder / name
        path.write_bytes(mutated.encode("utf-8", "surrogateescape"))
        _loads_or_names_the_file(load, path)

    check()


def test_a_parquet_workload_with_hostile_cells_names_them(tmp_path: Path) -> None:
    frame = generate(10, seed=1).to_frame()
    for column in ("arrival_s", "gpus", "service_s", "model"):
        for value in (float("nan"), float("inf"), -1.0, 1e308, "x", None):
            bad = frame.copy()
            bad[column] = bad[column].astype(object)
            bad.loc[3, column] = value
            path = tmp_path / "w.parquet"
            try:
                bad.to_parquet(path)
            except (TypeError, ValueError):  # pyarrow will not even write it
                continue
            _loads_or_names_the_file(read_trace, path)


# --- hand-written hostile cases -----------------------------------------------------------

PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n"
SCHEMA = "job_id,arrival_s,gpus,service_s,model\n"
HELIOS = ("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
          "duration,queue\n")
BOMB = ('a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n'
        'c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n'
        'e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n'
        'g: [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n')
PROFILE = (ROOT / "cluster_profiles" / "pcs-64.yaml").read_text()

# (what, file name, content, the error's words: file, row/field and value where it has them)
CASES: list[tuple[str, str, str | bytes, tuple[str, ...]]] = [
    ("schema: NaN arrival", "w.csv", SCHEMA + "0,nan,1,10,linear\n",
     ("row 1", "arrival_s", "nan")),
    ("schema: 1e308 arrival", "w.csv", SCHEMA + "0,1e308,1,10,linear\n1,0,1,10,linear\n", ()),
    ("schema: 1e309 (inf) service", "w.csv", SCHEMA + "0,0,1,1e309,linear\n",
     ("row 1", "service_s", "inf")),
    ("schema: negative zero arrival", "w.csv", SCHEMA + "0,-0.0,1,10,linear\n", ()),
    ("schema: negative service", "w.csv", SCHEMA + "0,0,1,-5,linear\n",
     ("row 1", "service_s", "-5")),
    ("schema: 0 GPUs", "w.csv", SCHEMA + "0,0,0,10,linear\n", ("row 1", "gpus", "0")),
    ("schema: 1.5 GPUs", "w.csv", SCHEMA + "0,0,1.5,10,linear\n", ("row 1", "gpus", "1.5")),
    # ids are labels (a retune's day files reuse them): both jobs are kept, see below
    ("schema: duplicate job ids", "w.csv", SCHEMA + "7,0,1,10,linear\n7,5,1,10,linear\n", ()),
    ("schema: unknown model", "w.csv", SCHEMA + "0,0,1,10,bert\n", ("row 1", "model", "bert")),
    ("schema: 400-digit GPUs", "w.csv", SCHEMA + f"0,0,{'9' * 400},10,linear\n",
     ("row 1", "gpus")),
    ("schema: NUL in a cell", "w.csv", SCHEMA + "0,0,1,1\x000,linear\n", ("row 1", "service_s")),
    ("schema: missing column", "w.csv", "job_id,arrival_s,gpus,model\n0,0,1,linear\n",
     ("service_s",)),
    ("schema: header only", "w.csv", SCHEMA, ()),
    ("schema: empty file", "w.csv", "", ()),
    ("schema: not UTF-8", "w.csv", SCHEMA.encode() + b"0,0,1,10,\xff\xfe\n", ()),
    ("schema: a quote never closed", "w.csv", SCHEMA + '0,0,1,10,"linear\n', ()),
    ("schema: parquet that is not", "w.parquet", b"PAR1 not really", ()),
    ("philly: a time in month 13", "p.csv", PHILLY + "2017-13-45 07:01:55,60,2,120,vc\n",
     ("row 1", "timestamp", "2017-13-45")),
    ("philly: time zones mixed", "p.csv",
     PHILLY + "2017-10-09 07:00:00,60,1,60,vc\n2017-10-09 07:01:00+05:00,60,1,60,vc\n", ()),
    ("philly: negative duration", "p.csv", PHILLY + "2017-10-09 07:00:00,-60,1,60,vc\n",
     ("row 1", "duration", "-60")),
    ("philly: no job ran", "p.csv", PHILLY + "2017-10-09 07:00:00,0,0,0,vc\n",
     ("no job with GPUs",)),
    ("helios: 400-digit submit time", "h.csv",
     HELIOS + f"a,u,v,2,1,1,COMPLETED,{'9' * 400},0,0,30,0\nb,u,v,2,1,1,COMPLETED,0,0,0,30,0\n",
     ()),
    ("helios: GPUs as text", "h.csv", HELIOS + "a,u,v,two,1,1,COMPLETED,0,0,0,30,0\n",
     ("row 1", "gpu_num", "two")),
    ("gavel: 9 columns", "g.trace", "ResNet-18 (batch size 16)\tcmd\tdir\t-x\t1\t100\t0\t1\t1\n",
     ("row 1",)),
    ("gavel: unknown job type", "g.trace", "Bert (batch size 1)\tc\td\t-x\t1\t100\t1\t1\t-1\t0\n",
     ("row 1", "Bert")),
    ("gavel: negative steps", "g.trace",
     "ResNet-50 (batch size 64)\tc\td\t-x\t1\t-100\t1\t1\t-1\t0\n", ("row 1", "-100")),
    ("gavel: NUL bytes", "g.trace", b"\x00\x00\x00\n", ("row 1",)),
    ("profile: a python object tag", "x.yaml",
     "!!python/object/apply:os.system ['touch /tmp/pwned']\n", ("not valid YAML",)),
    ("profile: an alias bomb", "x.yaml", BOMB, (f"past {MAX_YAML_NODES:,} nodes",)),
    ("profile: nested 10,000 deep", "x.yaml", "[" * 10000 + "]" * 10000 + "\n", ()),
    ("profile: a date that is not", "x.yaml", PROFILE + "created: 2017-13-45\n",
     ("not valid YAML",)),
    ("profile: a list, not a mapping", "x.yaml", "- 1\n- 2\n", ()),
    ("profile: 1e308 GPUs", "x.yaml", PROFILE.replace("gpus_per_node: 64",
                                                      "gpus_per_node: 1e308"),
     ("gpus_per_node", "1e308")),
    ("profile: a duplicate key", "x.yaml", PROFILE + "name: again\n", ()),
    ("profile: tabs for indent", "x.yaml", "name: x\n\tnode_groups: []\n",
     ("not valid YAML",)),
    ("spec: an alias bomb", "retune.yaml", BOMB, (f"past {MAX_YAML_NODES:,} nodes",)),
    ("spec: a negative budget", "retune.yaml",
     "trace: t.csv\nout: o\nsearch: {budget: -5}\n", ("budget", "-5")),
    ("spec: a name with a newline", "retune.yaml", 'trace: t.csv\nout: o\npolicy: "wfq\\n#x"\n',
     ("policy",)),
    ("cluster: a python tag", "c.yaml",
     "version: 1\nmodule: !!python/name:os.system\nclass: LocalCluster\n",
     ("not valid YAML",)),
    ("cluster: a module that is not a name", "c.yaml",
     "version: 1\nmodule: 'os; import x'\nclass: LocalCluster\nargs: []\nkwargs: {}\n",
     ("module",)),
    ("cluster: version 2", "c.yaml", "version: 2\nmodule: distributed\nclass: LocalCluster\n",
     ("version", "2")),
]


def _load_any(what: str, path: Path) -> Any:
    load = {"profile": load_profile, "spec": RetuneSpec.load, "cluster": load_cluster_spec,
            "gavel": lambda p: read_trace(p, throughputs=GAVEL)}
    return load.get(what.split(":")[0], read_trace)(path)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("what", "name", "content", "words"), CASES, ids=[c[0] for c in CASES])
def test_hostile_file(tmp_path: Path, what: str, name: str, content: str | bytes,
                      words: tuple[str, ...]) -> None:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    marker = Path("/tmp/pwned")
    marker.unlink(missing_ok=True)
    try:
        loaded = _load_any(what, path)
    except ParetoSearchError as exc:
        message = " ".join(str(exc).split())
        assert str(path) in message, message
        for word in words:
            assert word in message, (word, message)
    else:  # loaded: then it was a valid file after all, and nothing the case names is in it
        assert not words, f"{what}: loaded {loaded!r}"
        if what.startswith("schema: duplicate"):
            assert loaded.job_id.tolist() == [7, 7] and loaded.arrival_s.tolist() == [0, 5]
    assert not marker.exists()


def test_hostile_cases_are_at_least_forty() -> None:
    assert len(CASES) + len(EXPORT_CASES) >= 40


# --- exports: quote or refuse, never a file a scheduler reads differently -----------------

def _chosen() -> dict[str, Any]:
    params = {"T": 4.5, "W": 1.4, "zeta_min": 0.4, "delta": 0.6}
    return {"policy": "wfq", "params": params,
            "fitted": {**params, "thresholds": [297779.75, None], "rates": [0.8, 0.2]},
            "cluster": {"profile": "pcs-64", "gpus_by_type": {"V100": 64}}}


EXPORT_CASES: list[tuple[str, dict[str, Any], dict[str, str]]] = [
    ("a GPU type with a newline", {"cluster": {"gpus_by_type": {"V100\nPreemptMode=OFF": 64}}},
     {}),
    ("a GPU type with '#'", {"cluster": {"gpus_by_type": {"V100#x": 64}}}, {}),
    ("a GPU type with '<' and '&'", {"cluster": {"gpus_by_type": {"<V100>&": 64}}}, {}),
    ("a GPU type with ': '", {"cluster": {"gpus_by_type": {"a: b": 64}}}, {}),
    ("nodes with '#'", {}, {"nodes": "gpu[01-16]#x"}),
    ("nodes with a newline", {}, {"nodes": "gpu01\nPartitionName=evil"}),
    ("nodes with '='", {}, {"nodes": "gpu01 Default=YES"}),
    ("a namespace with '&'", {}, {"namespace": "a&b"}),
    ("a namespace with a newline", {}, {"namespace": "a\nb"}),
]


@pytest.mark.parametrize(("what", "change", "options"), EXPORT_CASES,
                         ids=[c[0] for c in EXPORT_CASES])
def test_exports_refuse_names_a_scheduler_would_read_otherwise(
        what: str, change: dict[str, Any], options: dict[str, str]) -> None:
    doc = {**_chosen(), **change}
    for fmt in ("kueue", "volcano", "slurm", "yarn"):
        with pytest.raises(ParetoSearchError) as caught:
            export(doc, fmt, options=ExportOptions(**options), source="chosen.json")
        assert "expected" in str(caught.value), str(caught.value)


@pytest.mark.parametrize("run", ["runs/x\nPartitionName=evil Nodes=ALL",
                                 "runs/a--b---c-->d", "runs/<x>&y #z"])
def test_strings_of_a_document_stay_inside_the_export_comments(run: str) -> None:
    doc = {**_chosen(), "run": run, "front_index": 0,
           "objectives": {"jct:avg\nPreemptType=preempt/none": 1.0}}
    slurm = export(doc, "slurm").files["slurm-paretosearch.conf"]
    injected = [line for line in slurm.splitlines() if "evil" in line or "jct:avg" in line
                or "<x>" in line or "--" in line]
    assert injected and all(line.startswith("# ") for line in injected)  # comments, all
    for text in export(doc, "yarn").files.values():
        import xml.etree.ElementTree as ET
        ET.fromstring(text.split("-->\n", 1)[1])  # the document parses after its comment
        comment = text.split("<!--", 1)[1].split("-->", 1)[0]
        assert "--" not in comment  # XML forbids it inside a comment
    for fmt in ("kueue", "volcano"):
        (text,) = export(doc, fmt).files.values()
        docs = list(yaml.safe_load_all(text))
        assert all(isinstance(d, dict) and "kind" in d for d in docs)  # no injected document


def test_a_hostile_front_or_chosen_config_is_named(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"policy": "wfq", "objectives": ["jct:avg"]}))
    for front in ('{"front": [', "[]", '{"front": "x"', "\x00", "1e999999",
                  "[" * 100000 + "]" * 100000):
        (run / "front.json").write_text(front)
        with pytest.raises(ParetoSearchError, match=r"front\.json"):
            RunStore(run).read_front()
    for chosen in ("[]", '{"policy": "wfq"}', '{"policy": "nope", "params": {}}', "\ufeff{"):
        (run / "chosen.json").write_text(chosen)
        capsys.readouterr()
        assert main(["export", str(run), "--format", "slurm"]) == 2
        assert "chosen.json" in capsys.readouterr().err


# --- a run's documents, mutated: front, select and export read them as data ----------------

def _mutate_json(doc: Any, data: st.DataObject) -> Any:
    """``doc`` with one value somewhere replaced by a hostile one, or one key dropped."""
    if isinstance(doc, dict) and doc and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(doc)))
        if data.draw(st.integers(0, 3)) == 0:
            return {k: v for k, v in doc.items() if k != key}
        return {**doc, key: _mutate_json(doc[key], data)}
    if isinstance(doc, list) and doc and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(doc) - 1))
        return [*doc[:i], _mutate_json(doc[i], data), *doc[i + 1:]]
    return data.draw(st.sampled_from([None, "", "x\n#<&", -0.0, 1e308, -1, 0, 2**70, True, [],
                                      {}, [[[]]], "nan", {"a": None}]))


@pytest.mark.parametrize("name", ["front.json", "run.json", "chosen.json"])
def test_mutated_run_documents_are_named_or_read(name: str, small_run: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    original = json.loads((run / name).read_text())
    commands = {"front.json": [["front", str(run)], ["select", str(run), "--index", "0",
                                                     "--out", str(tmp_path / "c.json")]],
                "run.json": [["select", str(run), "--knee", "--out", str(tmp_path / "c.json")],
                             ["export", str(run), "--index", "0", "--format", "slurm"]],
                "chosen.json": [["export", str(run), "--format", fmt]
                                for fmt in ("kueue", "volcano", "slurm", "yarn", "json")]}[name]

    @settings(max_examples=20, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        (run / name).write_text(json.dumps(_mutate_json(original, data)))
        for command in commands:
            capsys.readouterr()
            code = main(command)  # anything but our own error escapes as an exception
            assert code in (0, 2)
            if code == 2:
                err = " ".join(capsys.readouterr().err.split())
                assert name in err or str(run) in err, err

    check()
