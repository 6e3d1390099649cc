"""Fresh workers on a real cluster manager: a search's Dask workers as Slurm jobs.

A one-node Slurm on localhost (munged, slurmctld, slurmd: :mod:`tests.helpers.slurm`) runs
the workers that ``deploy/dask-cluster.slurm.yaml``'s class (``dask_jobqueue.SLURMCluster``)
submits as batch jobs, each a new process that imports the project and loads its kernels from
the shared cache; the search reaches the front a ``LocalCluster`` reaches at the same seed
(generational mode: the front does not depend on the workers).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from paretosearch.search.cluster import load_cluster_spec, open_client
from paretosearch.service.api import PolicySearch, SearchConfig
from paretosearch.settings import SearchSettings
from simulator.jit import cache_dir
from tests.helpers.data import ROOT
from tests.helpers.slurm import SBATCH, SLURMD, needs_slurm, reserved_port, slurm

pytest.importorskip("dask_jobqueue")

JOBS = 60
SETTINGS = SearchSettings(budget=12, pop_size=4, n_offsprings=4, seed=3, mode="generational")
OBJECTIVES = ("jct:avg", "jct:p99")
NODE = "node1"


def _front(client: Any, workers: int = 0) -> list[tuple[Any, ...]]:
    search = PolicySearch(config=SearchConfig(settings=SETTINGS, jobs=JOBS), client=client,
                          workers=workers)
    search.SetPreference(*OBJECTIVES)
    return [(e.params, e.objectives) for e in search.run()]


def _slurm_cluster_file(tmp: Path) -> Path:
    """The deploy example with what this one small node needs changed: the partition, one
    core and one worker a job, the environment (this checkout, its kernel cache)."""
    spec = load_cluster_spec(ROOT / "deploy" / "dask-cluster.slurm.yaml")
    kwargs = {k: v for k, v in spec.kwargs.items() if k != "account"}
    kwargs.update(
        queue="debug", cores=1, processes=1, memory="1GiB", n_workers=2, walltime="00:30:00",
        job_extra_directives=[], log_directory=str(tmp / "logs"),
        local_directory=str(tmp / "scratch"), python=sys.executable,
        job_script_prologue=[f"export PYTHONPATH={ROOT}",
                             f"export PARETOSEARCH_CACHE_DIR={cache_dir()}"],
        scheduler_options={"host": "127.0.0.1", "dashboard_address": ":0"})
    path = tmp / "slurm.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "module": spec.module,
                                    "class": spec.class_name, "args": [], "kwargs": kwargs}))
    return path


@pytest.fixture
def one_node_slurm(tmp_path: Path) -> Iterator[None]:
    if not (SLURMD and SBATCH):
        pytest.skip("slurmd or sbatch not installed (apt-get install slurmd slurm-client)")
    if os.geteuid() != 0:
        pytest.skip("slurmd runs jobs as their users: it must run as root")
    lines = [f"NodeName={NODE} NodeAddr=127.0.0.1 CPUs=2 RealMemory=4000 State=UNKNOWN",
             f"PartitionName=debug Nodes={NODE} Default=YES MaxTime=INFINITE State=UP",
             "SlurmdParameters=config_overrides", "ReturnToService=2", "MpiDefault=none",
             "JobAcctGatherType=jobacct_gather/none", "SchedulerType=sched/builtin"]
    (tmp_path / "slurm").mkdir()
    with (reserved_port() as port, reserved_port() as slurmd_port,
          slurm(tmp_path / "slurm", port, lines, slurmd_port=slurmd_port, node=NODE)):
        yield


@needs_slurm
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:the baseline")  # a tiny budget: beside the point here
@pytest.mark.dask
def test_search_on_slurm_workers_reaches_the_local_front(one_node_slurm: None,
                                                         tmp_path: Path) -> None:
    local = _front(None, workers=2)  # PolicySearch's embedded LocalCluster
    with open_client(config=_slurm_cluster_file(tmp_path)) as client:
        assert type(client.cluster).__name__ == "SLURMCluster"
        client.wait_for_workers(2, timeout=300)
        jobs = set(client.cluster.workers)
        on_slurm = _front(client)
    assert len(jobs) == 2
    assert on_slurm == local
