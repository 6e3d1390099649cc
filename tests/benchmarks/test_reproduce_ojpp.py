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


def test_a_negative_surge_scale_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        reproduce_script("ojpp").main(["--surge-scale", "-1"])
    assert done.value.code == 2
    assert "--surge-scale: -1 is negative" in capsys.readouterr().err
