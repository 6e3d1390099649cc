"""``benchmarks/reproduce/ojpp.py``'s batches: Fig. 3's unquoted entries are drawn anew for
each batch, so a mean over batches is a mean over draws (papers/ojpp.md gives only some
entries)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from simulator.inputs.ojpp_workload import KINDS, ojpp_interference
from tests.helpers.benchmarks import reproduce_script


def test_batch_s_of_every_kind_runs_on_the_s_th_draw_of_the_unquoted_entries() -> None:
    bench = reproduce_script("ojpp")
    args = argparse.Namespace(seeds=3, resnet_unknown=0.5, mem_scale=1.0, surge_scale=1.0)
    wls = bench.batches(args, (0.02, 0.3), 0.25)
    assert len(wls) == 3 * len(KINDS)
    draws = [ojpp_interference((0.02, 0.3), 0.5, seed=s).slowdown for s in range(3)]
    for i, wl in enumerate(wls):
        assert wl.interference is not None
        np.testing.assert_array_equal(wl.interference.slowdown, draws[i % 3])
    quoted = draws[0] == draws[1]  # what the text gives is the same in every draw
    assert 0 < quoted.sum() < quoted.size
    np.testing.assert_array_equal(draws[2][quoted], draws[0][quoted])
    unquoted = draws[0][~quoted]
    assert ((unquoted >= 0.02) & (unquoted <= 0.3)).all()


@pytest.mark.parametrize("flag", ["--seeds", "--online-seeds"])
def test_no_batches_is_a_usage_error(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        reproduce_script("ojpp").main([flag, "0"])
    out = capsys.readouterr()
    assert done.value.code == 2 and out.out == ""
    assert f"{flag}: 0 is not a positive count" in out.err


@pytest.mark.parametrize(("flag", "value", "least"), [
    ("--surge-scale", "-1", ">= 0"), ("--surge-scale", "nan", ">= 0"),
    ("--mem-scale", "0", "> 0"), ("--mem-scales", "1,-2", "> 0")])
def test_a_bad_scale_is_a_usage_error(flag: str, value: str, least: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        reproduce_script("ojpp").main([flag, value])
    out = capsys.readouterr()
    assert done.value.code == 2 and out.out == ""
    assert f"{flag}: must be a finite number {least} (got " in out.err


def test_table_5_by_kind_takes_the_all_kinds_error_over_draws(
        capsys: pytest.CaptureFixture[str]) -> None:
    # kind k's batch s saves 0.1 k + 0.01 s: each draw's mean over the kinds is 0.15 + 0.01 s,
    # so the all-kinds error is that of 0.15, 0.16, 0.17 (0.58 points), not of all 12 batches
    # pooled (3.4 points, the kinds' gaps counted as noise)
    ojpp = reproduce_script("ojpp")
    saved = np.array([0.1 * k + 0.01 * s for k in range(4) for s in range(3)])
    column = np.stack([saved, np.ones(12), np.ones(12)], axis=1)
    ojpp.by_kind(argparse.Namespace(seeds=3, lone="zero"), [column] * 6)
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line}
    assert rows["all"].split()[1] == "16.0±0.6"
    assert rows["mixed"].split()[1] == "1.0±0.6" and rows["average"].split()[1] == "31.0±0.6"
