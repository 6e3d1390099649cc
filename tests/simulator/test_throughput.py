"""Gavel's measured throughputs and its continuous-multiple generator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulator import InvalidWorkload
from simulator.inputs.throughput import ThroughputTable, generate_gavel
from tests.helpers.data import SHARED

GAVEL = SHARED / "data" / "gavel" / "simulation_throughputs.json"


@pytest.fixture(scope="module")
def table() -> ThroughputTable:
    return ThroughputTable.from_gavel_json(GAVEL)


def test_table_shape_matches_the_data_readme(table: ThroughputTable) -> None:
    assert table.gpu_types == ("k80", "p100", "v100")
    assert len(table.job_types) == 26  # data README: 26 job types
    scales = [s for _, s in table.entries]
    assert scales.count(1) == 26 and scales.count(8) == 19  # 19 also at 2/4/8 GPUs
    v100 = table.gpu_types.index("v100")
    i = table.index("ResNet-50 (batch size 64)")
    assert table.isolated[i, v100] == pytest.approx(4.394774823323071)
    # the fastest type depends on the job: V100 for most, P100 for the Recommendation models
    ones = [table.index(j) for j in table.job_types]
    best = np.nanargmax(table.isolated[ones], axis=1)
    assert set(best) == {table.gpu_types.index("p100"), v100}
    assert best[table.job_types.index("Recommendation (batch size 512)")] != v100


def test_colocation_matrix(table: ThroughputTable) -> None:
    v100 = table.gpu_types.index("v100")
    pairs = table.colocated[:, :, v100, 0]
    assert np.isfinite(pairs).sum() == 1759  # measured (job, partner) pairs on V100
    a, b = table.index("ResNet-18 (batch size 16)"), table.index("ResNet-18 (batch size 64)")
    assert table.colocated[a, b, v100].tolist() == pytest.approx([32.353384328946916,
                                                                  24.093231895382736])
    # symmetric measurements: what a gets beside b is what b's row says its partner gets
    assert table.colocated[b, a, v100, 1] == pytest.approx(table.colocated[a, b, v100, 0])


def test_scaling_from_measurements(table: ThroughputTable) -> None:
    scaling = table.scaling()
    m = scaling.index("ResNet-50 (batch size 64)")
    v100 = table.gpu_types.index("v100")
    expected = (table.isolated[table.index("ResNet-50 (batch size 64)", 4), v100]
                / table.isolated[table.index("ResNet-50 (batch size 64)", 1), v100])
    assert scaling.speedup[m, 4] == pytest.approx(expected)
    a3c = scaling.index("A3C")  # measured on one GPU only: linear
    assert scaling.speedup[a3c, 1:9].tolist() == pytest.approx(list(range(1, 9)))


def test_continuous_multiple_generator(table: ThroughputTable) -> None:
    wl = generate_gavel(table, 5000, jobs_per_hr=30.0, seed=1)
    assert (np.bincount(wl.gpus, minlength=9)[[1, 2, 4, 8]] / len(wl)) == pytest.approx(
        [0.7, 0.1, 0.15, 0.05], abs=0.02)
    duration = wl.service_s / wl.scaling.speed(wl.model, wl.gpus.astype(float))
    assert duration.min() >= 60 * 10**1.5 - 1e-6 and duration.max() <= 60 * 10**4 + 1e-6
    assert np.mean(duration < 60 * 10**3) == pytest.approx(0.8, abs=0.02)
    assert 3600 * len(wl) / wl.arrival_s[-1] == pytest.approx(30.0, rel=0.05)
    assert len(set(wl.model)) == 26


def test_bad_table_file(tmp_path: Path) -> None:
    bad = tmp_path / "t.json"
    bad.write_text('{"v100": {"not a key": {"null": 1.0}}}')
    with pytest.raises(InvalidWorkload, match="is not '\\(job type, scale factor\\)'"):
        ThroughputTable.from_gavel_json(bad)
