"""Shared fixtures: the real data in ../shared (never copied into the project)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from simulator import ClusterProfile, ScalingTable, Workload, load_profile, read_pcs_trace
from tests.helpers.data import PCS


@pytest.fixture(scope="session")
def pcs_scaling() -> ScalingTable:
    return ScalingTable.from_csv(PCS / "scaling_tables.csv")


@pytest.fixture(scope="session")
def pcs_configs() -> dict[str, Any]:
    configs: dict[str, Any] = json.loads((PCS / "configs" / "pcs_configs.json").read_text())
    return configs["configs"]


@pytest.fixture(scope="session")
def pcs64() -> ClusterProfile:
    return load_profile("pcs-64")


@pytest.fixture(scope="session")
def pcs_trace(pcs_scaling: ScalingTable) -> Any:
    cache: dict[str, Workload] = {}

    def load(name: str, n: int = 1000) -> Workload:
        if name not in cache:
            cache[name] = read_pcs_trace(PCS / "traces" / f"trace_{name}.csv", scaling=pcs_scaling)
        return cache[name].head(n)

    return load


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of 'paretosearch search' with a chosen config, made once per module:
    copy it before changing it."""
    from paretosearch.cli import main

    run = tmp_path_factory.mktemp("small_run") / "run"
    assert main(["search", "--generate", "120", "--budget", "8", "--pop-size", "4",
                 "--offspring", "4", "--workers", "0", "--run-dir", str(run)]) == 0
    assert main(["select", str(run), "--knee"]) == 0
    return run
