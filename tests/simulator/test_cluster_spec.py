"""Cluster profiles from ``--cluster`` specs: Gavel's cluster without a file, read back from
the name a run stores, and bad specs named."""

from __future__ import annotations

import pytest

from simulator import InvalidProfile, load_profile


@pytest.mark.parametrize("spec", ["36:36:36", "V100:36,P100:36,K80:36", "k80:36,v100:36,p100:36",
                                  "v100:36/4, p100:36, K80:36/4"])
def test_gavels_cluster_is_gavel_108(spec: str) -> None:
    shipped, built = load_profile("gavel-108"), load_profile(spec)
    assert built.node_groups == shipped.node_groups  # same servers, types in Gavel's order
    assert built.relative_speed == shipped.relative_speed
    assert built.restart_overhead_s == 0 and built.inter_node_factor == 1
    assert built.name == "v100:36,p100:36,k80:36"


def test_the_name_reads_back_the_same_cluster() -> None:
    built = load_profile("K80:8,V100:32/8")
    assert built.name == "v100:32/8,k80:8"
    assert built.gpus_by_type == {"v100": 32, "k80": 8}
    assert [(g.count, g.gpus_per_node) for g in built.node_groups] == [(4, 8), (2, 4)]
    assert load_profile(built.name) == built


@pytest.mark.parametrize(("spec", "message"), [
    ("V100:x", "v100 GPU count 'x' must be a positive integer"),
    ("V100:0", "v100 GPU count '0' must be a positive integer"),
    ("V100:8/0", "v100 GPUs per server '0' must be a positive integer"),
    ("36:36:3a", "k80 GPU count '3a' must be a positive integer"),
    ("36:36", "Gavel's form has 3 GPU counts"),
    ("A100:8", "unknown GPU type 'a100'; known: v100, p100, k80"),
    ("V100:8,v100:4", "GPU type 'v100' given twice"),
    ("V100:30", "30 v100 GPUs do not fill servers of 4"),
    ("V100=8", None),  # no colon: not a spec but an unknown profile name
    ("V100:8;P100:8", "v100 GPU count '8;P100:8' must be a positive integer"),
    ("V100", None),
])
def test_bad_specs_name_the_value(spec: str, message: str | None) -> None:
    with pytest.raises(InvalidProfile) as err:
        load_profile(spec)
    text = str(err.value)
    assert (f"--cluster {spec!r}: {message}" in text if message
            else f"unknown cluster profile {spec!r}" in text)
