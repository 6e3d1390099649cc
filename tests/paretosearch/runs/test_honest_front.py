"""Publishing honestly (issue 40): each front entry names the baselines that dominate it on
the test sample, the CLI, the plot and the report mark those entries, choices skip them, and
a baseline that beats the whole front (or, on the training sample, part of it) is said so in
words.

The fronts are written by hand, so which baseline dominates which entry is worked out here
from the numbers (the oracle), not by the code under test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from matplotlib.colors import to_rgba

from paretosearch.cli import main
from paretosearch.runs.plots import DOMINATED_COLOR, draw_front
from paretosearch.runs.records import FrontEntry, front_warnings, mark_dominated
from paretosearch.runs.report_html import write_html_report
from paretosearch.runs.store import RunStore

LABELS = ("jct:avg", "pred_err:avg")


def _entry(W: float, train: tuple[float, float], test: tuple[float, float]) -> FrontEntry:
    record = dict(zip(LABELS, train, strict=True))
    return FrontEntry({"W": W}, record, record, dict(zip(LABELS, test, strict=True)))


# train: the knee of the three is #1 (objectives scaled to [0, 1]: distances 1, 0.67, 1)
FRONT = [_entry(1.0, (100.0, 10.0), (300.0, 12.0)), _entry(2.0, (150.0, 5.0), (160.0, 6.0)),
         _entry(3.0, (200.0, 1.0), (210.0, 2.0))]
BASELINES = {"srsf": {"jct:avg": 120.0, "pred_err:avg": 20.0},
             "fifo": {"jct:avg": 500.0, "pred_err:avg": 0.0}}
# on test, srsf (155, 5.5) beats #0 (300, 12) and #1 (160, 6) but not #2 (its error is 2);
# fifo (400, 0) beats none (every entry is faster)
BASELINES_TEST = {"srsf": {"jct:avg": 155.0, "pred_err:avg": 5.5},
                  "fifo": {"jct:avg": 400.0, "pred_err:avg": 0.0}}


def _run(tmp_path: Path, baselines_test: dict[str, Any], *, recorded: bool = True) -> Path:
    """A finished run written by hand; ``recorded``: its entries hold ``dominated_by`` (else
    as a run published before they did)."""
    run = tmp_path / "run"
    run.mkdir()
    spec = {"policy": "wfq", "profile": "pcs-64", "fixed": {}, "objectives": list(LABELS),
            "cluster": {"profile": "pcs-64", "gpus_by_type": {"generic": 64}},
            "settings": {"seed": 0}, "train": ["train"], "test": ["test"]}
    front = mark_dominated(FRONT, baselines_test) if recorded else FRONT
    entries = [e.to_dict() for e in front]
    if not recorded:
        for e in entries:
            del e["dominated_by"]
    (run / "run.json").write_text(json.dumps(spec))
    (run / "front.json").write_text(json.dumps({
        "front": entries, "baselines": BASELINES, "baselines_test": baselines_test,
        "hypervolume": [{"evaluations": 10, "hypervolume": 0.4}], "done": True}))
    return run


def test_each_entry_names_the_baselines_that_dominate_it_on_test() -> None:
    marked = mark_dominated(FRONT, BASELINES_TEST)
    assert [e.dominated_by for e in marked] == [("srsf",), ("srsf",), ()]
    assert [e.dominated for e in marked] == [True, True, False]
    assert mark_dominated(FRONT, {}) == FRONT  # no baseline on test: nothing known
    undefined = _entry(4.0, (90.0, 20.0), (float("nan"), 1.0))
    assert mark_dominated([undefined], BASELINES_TEST)[0].dominated_by == ()
    # a round trip through JSON keeps it
    assert FrontEntry.from_dict(json.loads(json.dumps(marked[0].to_dict()))) == marked[0]


def test_warnings_cover_both_samples() -> None:
    marked = mark_dominated(FRONT, BASELINES_TEST)
    assert front_warnings(marked, BASELINES, BASELINES_TEST) == [
        "2 of 3 configurations are dominated on the test sample by a baseline (marked); "
        "'select' skips them unless told --include-dominated"]
    beats_all = {"afs": {"jct:avg": 90.0, "pred_err:avg": 0.5}}
    said = front_warnings(mark_dominated(FRONT, beats_all), beats_all, beats_all)
    assert said[0].startswith("the baseline afs dominates the whole front on the training")
    assert said[1].startswith("on the test sample, afs dominates every configuration")
    assert len(said) == 2
    # a baseline that beats part of the front on train: the family, as searched, loses there
    # (afs (140, 4) beats #1 (150, 5) only; srsf (120, 20) none)
    part = {**BASELINES, "afs": {"jct:avg": 140.0, "pred_err:avg": 4.0}}
    said = front_warnings(FRONT, part, {})
    assert said == ["1 of 3 configurations are dominated already on the training sample, by "
                    "afs: this policy family, as searched, does not reach those baselines' "
                    "trade-offs there. Search with a larger budget, or deploy the baseline if "
                    "its trade-off suits"]


def test_a_front_written_before_the_field_is_judged_on_reading(tmp_path: Path) -> None:
    doc = RunStore(_run(tmp_path, BASELINES_TEST, recorded=False)).read_front()
    assert [e.dominated_by for e in doc.front] == [("srsf",), ("srsf",), ()]


def test_select_skips_dominated_entries_and_says_which(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path, BASELINES_TEST)
    out = tmp_path / "c.json"
    assert main(["select", str(run), "--knee", "--out", str(out)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert json.loads(out.read_text())["front_index"] == 2  # the only one srsf does not beat
    assert "skipped, as a baseline dominates them on the test sample: #0 (srsf); #1 (srsf)" \
        in err
    for how in (["--weights", "1,1"], ["--where", "pred_err:avg <= 100", "--minimize", "jct"]):
        assert main(["select", str(run), *how, "--out", str(out)]) == 0
        assert json.loads(out.read_text())["front_index"] == 2
    capsys.readouterr()
    assert main(["select", str(run), "--knee", "--include-dominated", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["front_index"] == 1  # the knee of all three
    err = " ".join(capsys.readouterr().err.split())
    assert "skipped" not in err and "#1 is dominated on the test sample by srsf" in err


def test_front_marks_entries_and_says_when_a_baseline_wins_on_test(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    beats_all = {**BASELINES_TEST, "afs": {"jct:avg": 100.0, "pred_err:avg": 1.0}}
    run = _run(tmp_path, beats_all)
    assert main(["front", str(run)]) == 0
    captured = capsys.readouterr()
    out, err = captured.out, " ".join(captured.err.split())
    assert "dominated on test by" in out and "srsf, afs" in out
    assert "on the test sample, afs dominates every configuration of the front" in err
    # every entry is dominated: a choice considers them all, and the warning stands
    assert main(["select", str(run), "--knee", "--out", str(tmp_path / "c.json")]) == 0
    assert json.loads((tmp_path / "c.json").read_text())["front_index"] == 1
    page = write_html_report(run).read_text()
    assert "on the test sample, afs dominates every configuration" in page
    assert "dominated on test by srsf, afs" in page  # hover text and the table


def test_the_plot_greys_dominated_entries(tmp_path: Path) -> None:
    doc = RunStore(_run(tmp_path, BASELINES_TEST)).read_front()
    fig = draw_front(doc)
    try:
        grey = to_rgba(DOMINATED_COLOR)
        fills = [tuple(c.get_facecolor()[0]) for c in fig.axes[0].collections]
        # #0 and #1 grey on train (filled); #2 stays blue
        assert fills.count(grey) == 2 and fills.count(to_rgba("tab:blue")) == 1
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_rounding_is_no_domination_and_a_sample_that_ties_everyone_is_said() -> None:
    # trace 6214e9, first 1,000 jobs: on its second half no job waits, and every policy's avg
    # JCT is the same schedule's, summed in another order (Themis's in its last bits lower)
    test = {"jct:avg": 1503.3300000000008, "pred_err:avg": 0.0}
    themis = {"themis": {"jct:avg": 1503.329999999998, "pred_err:avg": 0.0}}
    front = [_entry(1.0, (772344.7, 50.5), tuple(test.values())),
             _entry(2.0, (4146619.5, 0.0), tuple(test.values()))]
    marked = mark_dominated(front, themis)
    assert [e.dominated_by for e in marked] == [(), ()]
    said = front_warnings(marked, {}, themis)
    assert len(said) == 1 and said[0].startswith("the test sample does not tell the policies "
                                                 "apart")
    # a real difference still counts, however small against the values
    slightly = {"themis": {"jct:avg": 1503.32, "pred_err:avg": 0.0}}
    assert [e.dominated_by for e in mark_dominated(front, slightly)] == [("themis",)] * 2
    assert not any("does not tell" in w for w in front_warnings(front, {}, slightly))
