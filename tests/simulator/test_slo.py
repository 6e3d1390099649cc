"""SLO jobs: trace formats with deadlines, the UniSched deadline generator, slo_miss, eq. 3."""

from __future__ import annotations

from itertools import combinations, pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies import FIFO, SRSF
from policies.unisched.policy import expected_sr_overhead
from simulator import InvalidWorkload, Workload, generate, load_profile, simulate
from simulator.inputs.generate import EARLY_STOP_CUT, add_slos, add_stopping_criteria
from simulator.inputs.slo import BEST_EFFORT, SOFT, STRICT, reward_obtained
from simulator.inputs.traces import (
    read_chronus,
    read_helios,
    read_philly_jobs,
    read_tiresias,
    read_trace,
)
from simulator.metrics import METRICS
from tests.helpers.data import SHARED

CHRONUS = SHARED / "data" / "chronus" / "trace_job_Philly_MIX1.csv"


def test_chronus_mix1() -> None:
    wl = read_chronus(CHRONUS)
    raw = pd.read_csv(CHRONUS)
    ran = (raw.num_gpu > 0) & (raw.duration > 0)
    assert len(wl) == int(ran.sum()) and "dropped" in wl.source
    assert (np.diff(wl.arrival_s) >= 0).all()
    assert wl.slos is not None
    best = raw[ran].best_effort == 1
    assert (wl.slos.job_class == BEST_EFFORT).sum() == int(best.sum())
    row = raw[ran & (raw.job_type == "strict")].iloc[0]
    i = int(np.flatnonzero(wl.job_id == row.job_id)[0])
    # Chronus counts minutes
    assert wl.slos.deadlines_s[i, 0] == 60 * float(row.expect_time_list)
    assert wl.slos.rewards[i, 0] == 100.0  # Chronus's 10 rescaled to UniSched's 100
    assert wl.service_s[i] == 60 * row.duration * row.num_gpu
    assert wl.arrival_s.max() == 60 * raw[ran].submit_time.max()
    in_seconds = read_chronus(CHRONUS, time_unit_s=1.0)
    assert in_seconds.slos is not None
    assert in_seconds.slos.deadlines_s[i, 0] == float(row.expect_time_list)


def test_read_trace_recognises_every_format(tmp_path: Path) -> None:
    assert read_trace(CHRONUS).slos is not None
    philly = tmp_path / "p.csv"
    philly.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                      "2017-10-09 07:01:55,60,2,120,vc\n")
    assert read_trace(philly).service_s.tolist() == [120.0]
    helios = tmp_path / "h.csv"
    helios.write_text("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,"
                      "end_time,duration,queue\na,u,v,2,1,1,COMPLETED,0,0,0,30,0\n")
    assert read_trace(helios).service_s.tolist() == [60.0]


def test_philly_job_csv(tmp_path: Path) -> None:
    path = tmp_path / "philly.csv"
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                    "2017-10-09 07:01:55,3600,4,14400,vc1\n"
                    "2017-10-09 07:00:00,120,1,120,vc2\n"
                    "2017-10-09 08:00:00,0,2,0,vc3\n")
    wl = read_philly_jobs(path)
    assert list(wl.arrival_s) == [0.0, 115.0]  # sorted, seconds after the first
    assert list(wl.service_s) == [120.0, 14400.0] and list(wl.gpus) == [1, 4]
    assert "1 jobs without GPUs or duration dropped" in wl.source
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\nyesterday,10,1,10,vc\n")
    with pytest.raises(InvalidWorkload, match=r"row 1, column 'timestamp'.*'yesterday'"):
        read_philly_jobs(path)


def test_helios_cluster_log(tmp_path: Path) -> None:
    path = tmp_path / "cluster_log.csv"
    header = ("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
              "duration,queue\n")
    path.write_text(header +
                    "a,u1,vc1,8,32,1,COMPLETED,2020-04-01 00:00:10,x,y,600,5\n"
                    "b,u2,vc1,0,4,1,COMPLETED,2020-04-01 00:00:00,x,y,50,0\n"
                    "c,u3,vc2,1,4,1,FAILED,2020-04-01 00:01:00,x,y,30,1\n")
    wl = read_helios(path)
    assert list(wl.gpus) == [8, 1] and list(wl.arrival_s) == [10.0, 60.0]
    assert list(wl.service_s) == [4800.0, 30.0]
    path.write_text(header + "a,u1,vc1,-1,32,1,COMPLETED,2020-04-01 00:00:10,x,y,600,5\n")
    with pytest.raises(InvalidWorkload, match=r"row 1, column 'gpu_num'.*must be >= 0"):
        read_helios(path)
    path.write_text("job_id,gpu_num\n1,2\n")
    with pytest.raises(InvalidWorkload, match="column 'submit_time'"):
        read_helios(path)


def test_tiresias_trace(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    header = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
    path.write_text(header + "7,8,30,133,vgg11,147,0\n"
                             "3,2,0,157,inception4,127,30\n"
                             "5,0,10,1,vgg19,50,20\n"
                             "9,1,30,5,alexnet,10,0\n")
    for wl in (read_tiresias(path), read_trace(path)):
        assert list(wl.job_id) == [3, 7, 9]  # by submit time, ties in file order
        assert list(wl.arrival_s) == [0.0, 30.0, 30.0] and list(wl.gpus) == [2, 8, 1]
        assert list(wl.service_s) == [254.0, 1176.0, 10.0]
        assert "1 jobs without GPUs or duration dropped" in wl.source
    path.write_text(header + "1,1,0,5,vgg19,ten,0\n")
    with pytest.raises(InvalidWorkload,
                       match=r"row 1, column 'duration': must be a number \(got 'ten'\)"):
        read_tiresias(path)
    path.write_text("job_id,num_gpu,duration\n1,2,3\n")
    with pytest.raises(InvalidWorkload, match="column 'submit_time'"):
        read_tiresias(path)


def test_generated_deadlines_follow_unisched() -> None:
    wl = add_slos(generate(4000, seed=3), "MIX2", seed=4)
    slos = wl.slos
    assert slos is not None
    shares = np.bincount(slos.job_class, minlength=3) / len(wl)
    assert shares == pytest.approx([0.3, 0.35, 0.35], abs=0.03)
    duration = wl.service_s / wl.scaling.speed(wl.model, wl.gpus.astype(float))
    first = slos.deadlines_s[:, 0] / duration
    slo = slos.is_slo
    assert (first[slo] >= 1.1).all() and (first[slo] <= 2.0).all()
    soft = slos.job_class == SOFT
    assert np.allclose(slos.deadlines_s[soft] / slos.deadlines_s[soft, :1], [1, 1.1, 1.2, 1.5])
    assert np.allclose(slos.rewards[soft], [100, 80, 50, 20])
    strict = slos.job_class == STRICT
    assert np.isnan(slos.deadlines_s[strict, 1:]).all()
    with pytest.raises(InvalidWorkload, match="unknown SLO mix"):
        add_slos(wl, "MIX3")


def test_slo_miss_by_hand() -> None:
    frame = pd.DataFrame({
        "arrival_s": [0.0, 0.0, 0.0, 0.0], "gpus": [1, 1, 1, 1],
        "service_s": [100.0, 100.0, 100.0, 100.0],
        "job_class": ["strict", "soft", "soft", "best_effort"],
        "deadlines_s": ["150", "50-105-300-400", "10-20-30-40", ""],
        "rewards": ["100", "100-80-50-20", "100-80-50-20", ""]})
    wl = Workload.from_frame(frame)
    jct = np.array([100.0, 100.0, 100.0, 100.0])
    assert wl.slos is not None
    got = reward_obtained(wl.slos, jct)
    assert got[:3].tolist() == [100.0, 80.0, 0.0] and np.isnan(got[3])
    result = simulate(wl, load_profile("pcs-64"), SRSF())  # 4 jobs, 64 GPUs: JCT = 100 s
    miss = METRICS["slo_miss"].compute(result)
    assert np.nanmean(miss) == pytest.approx(1 - (100 + 80 + 0) / 300)
    be = METRICS["be_jct"].compute(result)
    assert np.isnan(be[:3]).all() and be[3] == pytest.approx(100.0)
    back = Workload.from_frame(wl.to_frame())
    assert back.digest() == wl.digest()


@pytest.mark.parametrize(("cells", "message"), [
    (("urgent", "", ""), "unknown class"),
    (("strict", "", ""), "increasing deadlines > 0"),
    (("soft", "20-10", "100-80"), "increasing deadlines > 0"),
    (("soft", "10-20", "80-100"), "non-increasing"),
    (("strict", "ten", "100"), "numbers separated by '-'"),
])
def test_bad_slo_cells(cells: tuple[str, str, str], message: str) -> None:
    frame = pd.DataFrame({"arrival_s": [0.0], "gpus": [1], "service_s": [5.0],
                          "job_class": [cells[0]], "deadlines_s": [cells[1]],
                          "rewards": [cells[2]]})
    with pytest.raises(InvalidWorkload, match=message):
        Workload.from_frame(frame)


def _brute_force(n: int, m: int, t_sr: float) -> float:
    """Average suspensions over every way to place n leases among m slots."""
    total, count = 0.0, 0
    for chosen in combinations(range(m), n):
        runs = 1 + sum(1 for a, b in pairwise(chosen) if b != a + 1)
        total += (runs - 1) * t_sr
        count += 1
    return total / count


@given(n=st.integers(1, 9), extra=st.integers(0, 8), t_sr=st.floats(0.5, 120.0))
def test_eq3_matches_brute_force(n: int, extra: int, t_sr: float) -> None:
    m = n + extra
    assert expected_sr_overhead(n, m, t_sr) == pytest.approx(_brute_force(n, m, t_sr))


def test_eq3_edges() -> None:
    assert expected_sr_overhead(5, 5, 30.0) == 0.0  # no slack: runs straight through
    assert expected_sr_overhead(4, 10, 30.0, best_effort=True) == 60.0  # n / 2 suspensions
    with pytest.raises(ValueError, match="cannot fit"):
        expected_sr_overhead(5, 4, 1.0)


def test_early_stopping_jobs_declare_more_than_they_run() -> None:
    wl = generate(3000, seed=4)
    stop = add_stopping_criteria(wl, 0.2, seed=1)
    np.testing.assert_array_equal(stop.service_s, wl.service_s)  # the trace is what ran
    early = stop.estimated_service_s > wl.estimated_service_s
    assert abs(early.mean() - 0.2) < 0.03  # 600 +- 3 sigma of a binomial(3000, 0.2)
    skipped = 1 - wl.service_s[early] / stop.estimated_service_s[early]
    assert skipped.max() <= max(EARLY_STOP_CUT) + 1e-12 and skipped.min() > 0
    # both targets are drawn: some jobs skip more than the best-metric target allows
    assert (skipped > EARLY_STOP_CUT[0]).any()
    np.testing.assert_array_equal(stop.estimated_service_s[~early],
                                  wl.estimated_service_s[~early])
    again = add_stopping_criteria(wl, 0.2, seed=1)
    np.testing.assert_array_equal(again.estimated_service_s, stop.estimated_service_s)
    # FIFO ignores sizes: same schedule; its JCT predictions now overshoot for early stoppers
    prof = load_profile("pcs-64")
    base = simulate(wl.head(300), prof, FIFO())
    res = simulate(stop.head(300), prof, FIFO(), predict=True)
    np.testing.assert_allclose(res.finish_s, base.finish_s)
    assert (res.jct_pred_s[early[:300]] >= res.jct_s[early[:300]] - 1e-6).all()
    with pytest.raises(InvalidWorkload, match="performance_share"):
        add_stopping_criteria(wl, 1.5)
