"""Cluster profiles: the shipped six (and more) load; bad YAML is named precisely."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulator import InvalidProfile, list_profiles, load_profile
from simulator.inputs.profile import PROFILE_DIR

EXPECTED = {  # SPEC §1
    "pcs-64": 64, "pcs-testbed-16": 16, "gavel-hetero-60": 60, "unisched-c96": 768,
    "unisched-c120": 960, "horus-128x8": 1024, "horus-testbed-3x4": 12, "ojpp-1080ti": 64,
}


@pytest.mark.parametrize(("name", "gpus"), EXPECTED.items())
def test_shipped_profiles(name: str, gpus: int) -> None:
    profile = load_profile(name)
    assert profile.total_gpus == gpus
    assert profile.provenance.strip()
    text = (PROFILE_DIR / f"{name}.yaml").read_text()
    assert text.startswith("#")  # each file says where its numbers come from


def test_gavel_profile_is_heterogeneous() -> None:
    assert load_profile("gavel-hetero-60").gpus_by_type == {"v100": 20, "p100": 20, "k80": 20}
    assert load_profile("gavel-hetero-60").restart_overhead_s == 10  # Hadar §V-A


def test_listing_covers_spec() -> None:
    assert set(EXPECTED) <= set(list_profiles())


def _write(tmp_path: Path, change: dict[str, object]) -> Path:
    doc = yaml.safe_load((PROFILE_DIR / "pcs-64.yaml").read_text())
    doc.update(change)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(("change", "message"), [
    ({"colour": "blue"}, "'colour': unknown key"),
    ({"node_groups": [{"count": 0, "gpus_per_node": 8, "gpu_type": "generic",
                       "gpu_memory_gib": 16}]}, "node_groups[0].count': must be an integer > 0"),
    ({"node_groups": [{"count": 2, "gpus_per_node": 8, "gpu_type": "generic",
                       "gpu_memory_gib": 16, "cpus": 4}]}, "node_groups[0].cpus': unknown key"),
    ({"network": {"inter_node_factor": 1.5}}, "network.inter_node_factor': must be a number"),
    ({"overheads": {"restart_overhead_s": -1}}, "restart_overhead_s': must be a number >= 0"),
    ({"gpu_types": {}}, "gpu_types.generic"),
    ({"provenance": ""}, "'provenance': required text"),
])
def test_bad_profiles_are_named(tmp_path: Path, change: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidProfile) as err:
        load_profile(_write(tmp_path, change))
    assert message in str(err.value)
    assert "p.yaml" in str(err.value)


def test_unknown_profile_lists_the_known_ones() -> None:
    with pytest.raises(InvalidProfile, match="pcs-64"):
        load_profile("pcs-65")
