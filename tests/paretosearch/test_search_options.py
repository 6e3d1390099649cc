"""What a search is, declared once (``option()`` on the fields of SearchConfig and
SearchSettings): the ``search`` flags and the retune spec's fields are generated from it and
read into the same config."""

from __future__ import annotations

from pathlib import Path

from paretosearch.cli.main import _parser
from paretosearch.cli.options import config_from
from paretosearch.cli.runs import parse_overrides
from paretosearch.config import SearchConfig
from paretosearch.service.retune_spec import RetuneSpec
from paretosearch.settings import SearchSettings, options
from tests.helpers.runs import write_spec

CONFIG = SearchConfig(policy="wfq", profile="pcs-testbed-16", fixed={"W": 2.0},
                      objectives=("jct:p99", "wait:avg"), slo_mix="MIX1", sharing=True,
                      settings=SearchSettings(budget=12, pop_size=3, n_offsprings=4, seed=9,
                                              mode="async"))


def test_every_declared_field_is_a_flag_of_search() -> None:
    commands = next(a for a in _parser()._actions if a.dest == "command").choices
    flags = {s for a in commands["search"]._actions for s in a.option_strings}
    declared = [o.flag for cls in (SearchConfig, SearchSettings) for _, o in options(cls)]
    assert {f for f in declared if f} <= flags and len(declared) == 14


def test_the_flags_and_the_retune_spec_read_into_the_same_config(tmp_path: Path) -> None:
    argv = ["search", "--profile", "pcs-testbed-16", "--set", "W=2.0", "--objective", "jct:p99",
            "--objective", "wait:avg", "--slo-mix", "MIX1", "--sharing", "--budget", "12",
            "--pop-size", "3", "--offspring", "4", "--seed", "9", "--mode", "async"]
    args = _parser().parse_args(argv)
    assert config_from(args, args.profile, {"fixed": parse_overrides}) == CONFIG
    spec = RetuneSpec.load(write_spec(
        tmp_path, profile="pcs-testbed-16", fixed={"W": 2.0}, objectives=["jct:p99", "wait:avg"],
        slo_mix="MIX1", sharing=True,
        search={"budget": 12, "pop_size": 3, "offspring": 4, "seed": 9, "mode": "async"}))
    assert spec.config == CONFIG
    # nothing given: the declared defaults, both ways
    assert config_from(_parser().parse_args(["search"]), "pcs-64", {"fixed": parse_overrides}
                       ) == SearchConfig()
