"""How hard to search, and how (:class:`SearchSettings`): apart from the optimiser
(:mod:`paretosearch.search.spea2`), so that reading or checking settings imports no pymoo."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

from simulator.errors import ParetoSearchError

__all__ = ["COVERED", "MAX_SEED", "MODES", "Option", "SearchSettings", "option", "options"]

COVERED = 8
"""Spaces of up to this many parameters open with a larger space-filling sample
(:meth:`SearchSettings.first_sample`; why: README, "The search")."""

MODES = ("generational", "async")
"""How the search waits for evaluations (:class:`SearchSettings`)."""
MAX_SEED = 2**63 - 1
"""The largest seed: runs record it as an int64."""


@dataclass(frozen=True)
class Option:
    """How one field of a search is asked for, declared with the field (:func:`option`):
    the ``paretosearch search`` flag and the retune spec key (``search.budget``: in the
    spec's ``search`` mapping) that set it, None where it is not asked for there. The flags
    (:mod:`paretosearch.cli.options`) and the spec's fields
    (:meth:`~paretosearch.service.retune_spec.RetuneSpec.load`) are generated from these;
    the checks are the dataclass's own."""

    flag: str | None = None
    key: str | None = None
    help: str = ""
    metavar: str | None = None
    choices: tuple[str, ...] = ()


def option(default: Any = MISSING, *, factory: Callable[[], Any] | None = None,
           **how: Any) -> Any:
    """Declare a field of a search together with how it is asked for (:class:`Option`)."""
    meta = {"option": Option(**how)}
    return (field(default_factory=factory, metadata=meta) if factory is not None
            else field(default=default, metadata=meta))


def options(cls: type) -> list[tuple[Field[Any], Option]]:
    """The declared fields of ``cls`` (a search's dataclass), each with its :class:`Option`,
    in declaration order."""
    return [(f, f.metadata["option"]) for f in fields(cls) if "option" in f.metadata]


@dataclass(frozen=True)
class SearchSettings:
    """How hard to search, and how.

    ``budget`` evaluations in all, exactly (the last generation is cut to fit). SPEA2 keeps
    an archive of ``pop_size`` and breeds ``n_offsprings`` candidates a generation: left
    out, the archive is a tenth of the budget (10 to 70), the offspring as many, and the
    search opens with a space-filling sample of a fifth of the budget and at least 40
    points; in a space of up to :data:`COVERED` parameters, two thirds of a small budget up
    to 70 (a few dimensions are better covered than bred from a thin archive; in more,
    breeding pays sooner): :meth:`first_sample`.
    PCS's settings (70 and 105, the first sample one archive) are :meth:`pcs`.
    ``mode="generational"`` (a generation at a time; same seed, same front, whatever the
    workers) or ``"async"`` (steady state: a new candidate the moment a worker frees up; the
    front depends on the order evaluations finish, :class:`_SteadyState`).
    """

    budget: int = option(370, flag="--budget", key="search.budget",
                         help="evaluations, exactly (default: %(default)s)")
    pop_size: int = option(0, flag="--pop-size", key="search.pop_size",
                           help="SPEA2 archive size (default: a tenth of the budget, 10 to 70; "
                                "PCS's settings: --pop-size 70 --offspring 105)")
    n_offsprings: int = option(0, flag="--offspring", key="search.offspring",
                               help="candidates per generation (default: as --pop-size)")
    seed: int = option(0, flag="--seed", key="search.seed",
                       help="search seed (default: %(default)s)")
    mode: str = option(
        "generational", flag="--mode", key="search.mode", choices=MODES,
        help="generational: a generation at a time, the same front for the same seed whatever "
             "the workers (default); async: a new offspring the moment a worker frees up, "
             "which keeps many workers busy, the front depending on the order evaluations "
             "finish")
    first: int = 0
    """Size of the space-filling first sample (0: :meth:`first_sample` sizes it; where
    ``pop_size`` is given, the archive)."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ParetoSearchError(f"search mode {self.mode!r}: use one of {', '.join(MODES)}")
        for name, low in (("budget", 1), ("pop_size", 0), ("n_offsprings", 0), ("first", 0),
                          ("seed", 0)):
            if getattr(self, name) < low:
                raise ParetoSearchError(f"search {name} must be >= {low} "
                                        f"(got {getattr(self, name)})")
        if self.seed > MAX_SEED:
            raise ParetoSearchError(f"search seed must be at most {MAX_SEED:,} (int64; got "
                                    f"{self.seed})")

    # sizes left out stay 0 (saved and read back, settings are the same settings); these
    # give the sizes a search uses
    @property
    def archive(self) -> int:
        """The archive's size: ``pop_size``, else a tenth of the budget (10 to 70)."""
        return max(2, self.pop_size or min(70, max(10, self.budget // 10)))

    @property
    def offspring(self) -> int:
        """Candidates bred a generation: ``n_offsprings``, else as many as the archive."""
        return self.n_offsprings or self.archive

    def first_sample(self, n_params: int) -> int:
        """Size of the space-filling first sample in a space of ``n_params`` parameters:
        ``first`` where set; else the archive where ``pop_size`` is set (PCS's way); else a
        fifth of the budget, at least 40 points and the archive, and in a space of up to
        :data:`COVERED` parameters two thirds of the budget up to 70. At most the budget."""
        first = self.first or self.pop_size or max(
            self.archive, self.budget // 5, 40,
            min(70, 2 * self.budget // 3) if n_params <= COVERED else 0)
        return min(max(first, 2), self.budget)

    @classmethod
    def pcs(cls, budget: int = 370, seed: int = 0, mode: str = "generational"
            ) -> SearchSettings:
        """PCS's settings (§5.1): archive 70, 105 offspring a generation."""
        return cls(budget=budget, pop_size=70, n_offsprings=105, seed=seed, mode=mode)
