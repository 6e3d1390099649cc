"""What every policy shares: declared parameter domains, validation, JSON, a registry.

A policy is a frozen dataclass whose fields are its tunable parameters. Each field declares
its domain once, with :func:`param`; validation, the search space, CLI help and JSON
round-trips are all derived from those declarations.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, Self, TypeVar

import numpy as np
import numpy.typing as npt

from simulator.errors import InvalidPolicyParams
from simulator.inputs.profile import ClusterProfile
from simulator.inputs.scaling import ScalingTable
from simulator.inputs.workload import Workload
from simulator.jit import compiled
from simulator.rounds import RoundState
from simulator.view import ClusterView

__all__ = [
    "REGISTRY", "Domain", "EventDriven", "KernelPolicy", "Policy", "RoundPolicy", "get_policy",
    "make_policy", "param", "register",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Domain:
    """The values a parameter may take.

    Attributes:
        kind: ``"float"``, ``"int"`` or ``"choice"``.
        low, high: inclusive bounds for numbers.
        choices: allowed values for ``"choice"``.
        log: search on a log scale.
        searchable: part of the search space (explicit configurations are not).
        help: one line for CLI help and tables.
    """

    kind: str = "float"
    low: float = -math.inf
    high: float = math.inf
    choices: tuple[Any, ...] = ()
    log: bool = False
    searchable: bool = True
    help: str = ""

    def check(self, name: str, value: Any) -> None:
        """Raise :class:`InvalidPolicyParams` if ``value`` is outside the domain."""
        if self.kind == "choice":
            if value not in self.choices:
                raise InvalidPolicyParams(f"parameter {name!r}: expected one of "
                                          f"{list(self.choices)}, got {value!r}")
            return
        numeric = isinstance(value, int | float | np.integer | np.floating)
        if not numeric or isinstance(value, bool) or not math.isfinite(float(value)):
            raise InvalidPolicyParams(f"parameter {name!r}: expected a finite number, "
                                      f"got {value!r}")
        if self.kind == "int" and float(value) != int(value):
            raise InvalidPolicyParams(f"parameter {name!r}: expected an integer, got {value!r}")
        if not self.low <= float(value) <= self.high:
            raise InvalidPolicyParams(f"parameter {name!r}: expected a value in "
                                      f"[{self.low:g}, {self.high:g}], got {value!r}")

    @property
    def searched(self) -> bool:
        """Part of the search space: searchable, and numeric and bounded or a real choice."""
        if self.kind == "choice":
            return self.searchable and len(self.choices) >= 2
        return (self.searchable and self.kind in ("float", "int")
                and math.isfinite(self.low) and math.isfinite(self.high))

    def describe(self) -> str:
        """Human-readable domain, e.g. ``[0.01, 0.9]`` or ``{jct, ftf}``."""
        fixed = "" if self.searched else " not searched"
        if self.kind == "choice":
            return "{" + ", ".join(map(str, self.choices)) + "}" + fixed
        return f"[{self.low:g}, {self.high:g}]" + (" (log)" if self.log else "") + fixed


def param(default: Any, *, low: float = -math.inf, high: float = math.inf, kind: str = "float",
          choices: tuple[Any, ...] = (), log: bool = False, searchable: bool = True,
          help: str = "") -> Any:
    """Declare a policy field together with its domain."""
    dom = Domain(kind=kind, low=low, high=high, choices=choices, log=log, searchable=searchable,
                 help=help)
    return field(default=default, metadata={"domain": dom})


@dataclass(frozen=True)
class Policy:
    """Base of every policy: a frozen value of its declared, validated parameters.

    Subclasses set ``name`` and ``summary`` and declare fields with :func:`param`. They derive
    from :class:`KernelPolicy` (decisions from a compiled kernel on the fluid engine) or
    :class:`RoundPolicy` (decisions in rounds, placed on nodes, on the round engine). A policy
    that needs facts about the workload before it can run (WFQ's classes) overrides
    :meth:`fit`, which returns a new, ready policy; one with parameters that some workloads or
    clusters cannot use (SLO rewards without SLO jobs) overrides :meth:`inapplicable`.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for name, dom in self.domains().items():
            dom.check(name, getattr(self, name))

    def fit(self, workload: Workload) -> Self:
        """Derive workload-dependent settings; the default needs none."""
        return self

    @classmethod
    def inapplicable(cls, workload: Workload, profile: ClusterProfile) -> dict[str, str]:
        """Parameters that cannot change any result on this workload and cluster.

        A search leaves them out (they keep their defaults). Overrides name each one with a
        one-line reason, e.g. ``{"slo_reward": "the workload has no SLO jobs"}``; the default
        is that every parameter matters.
        """
        return {}

    @classmethod
    def kernels(cls) -> tuple[Any, ...]:
        """The policy's own compiled kernels that its engine takes (compiled when first used,
        :func:`simulator.jit.compiled`); none by default."""
        return ()

    @classmethod
    def domains(cls) -> dict[str, Domain]:
        """Each declared parameter's domain, in field order."""
        return {f.name: f.metadata["domain"] for f in fields(cls) if "domain" in f.metadata}

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Each declared parameter's default."""
        return {f.name: f.default for f in fields(cls) if f.default is not MISSING}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready ``{"policy": name, "params": {...}}`` (every field, tunable or not;
        tuples as lists, infinities in them as None)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {"policy": self.name,
                "params": {k: [None if _infinite(x) else x for x in v] if isinstance(v, tuple)
                           else v for k, v in values.items()}}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Self:
        """Build from a ``{name: value}`` mapping (lists as tuples, None in them as infinity);
        unknown names are errors."""
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise InvalidPolicyParams(f"policy {cls.name!r} has no parameter {unknown[0]!r}; "
                                      f"its parameters are {list(known)}")
        for k, v in params.items():
            bad = [x for x in v if x is not None and (isinstance(x, bool) or not isinstance(
                x, int | float))] if isinstance(v, list) else []
            if bad:
                raise InvalidPolicyParams(f"policy {cls.name!r}: {k} holds {bad[0]!r}; give a "
                                          "list of numbers (null for infinity)")
        converted = {k: tuple(math.inf if x is None else x for x in v) if isinstance(v, list)
                     else v for k, v in params.items()}
        return cls(**converted)


@dataclass(frozen=True)
class KernelPolicy(Policy):
    """A policy whose decisions come from a compiled kernel (:class:`simulator.view.Scheduler`).

    Subclasses set ``kernel`` (a numba function, wrapped in ``staticmethod``) and pass their
    values to it through :meth:`kernel_args`; :meth:`allocate` runs the kernel on a view.
    """

    kernel: ClassVar[Any]
    """The compiled allocation kernel (signature in :mod:`simulator.fluid.engine`), as a
    staticmethod."""

    queue_kernel: ClassVar[Any] = None
    """Optional: the same decisions from per-class queues (``QUEUE_SIG`` in
    :mod:`simulator.fluid.engine`), for a policy that serves fixed classes in arrival order; the
    engine then touches only the jobs the kernel hands GPUs to and those that held some."""

    history: ClassVar[str] = "attained"
    """What the kernel's ``attained`` argument carries: ``"attained"`` (work done),
    ``"seen"`` (mean active jobs seen since arrival) or ``"rank"`` (the kernel's own row);
    see :class:`simulator.view.Scheduler`."""

    pcs_clock: ClassVar[bool] = False
    """Whether the fluid engine keeps time on PCS's microsecond clock for this policy (see
    :class:`simulator.view.Scheduler`)."""

    @property
    def playout(self) -> str:
        """How a JCT-prediction playout starts (``PLAYOUTS`` in :mod:`simulator.fluid.engine`):
        as PCS's code does today, unless a policy lets the operator choose."""
        return "2024-06-03"

    @classmethod
    def kernels(cls) -> tuple[Any, ...]:
        """``kernel`` and ``queue_kernel`` (if any)."""
        return tuple(k for k in (cls.kernel, cls.queue_kernel) if k is not None)

    @property
    def tick_s(self) -> float | None:
        """Seconds after an event at which the policy wants to re-decide (None: never)."""
        return None

    def kernel_args(self, scaling: ScalingTable) -> tuple[FloatArray, FloatArray]:
        """The ``(params, aux)`` arrays the kernel reads; none by default."""
        return _NO_PARAMS, _NO_AUX

    def queue_classes(self, workload: Workload) -> tuple[IntArray, int] | None:
        """Each job's class and the number of classes, for ``queue_kernel`` (None: no queues)."""
        return None

    def allocate(self, view: ClusterView) -> FloatArray:
        """GPUs for each job in the view (see :class:`simulator.view.Scheduler`)."""
        params, aux = self.kernel_args(view.scaling)
        out = np.zeros(len(view))
        # the kernel's signature takes writable arrays: hand it copies of the read-only view
        # a view keeps no history of the jobs seen: "seen" is the active jobs now
        # and a "rank" kernel has no previous decision here: every job is new to it
        hist = (view.attained.copy() if self.history == "attained"
                else np.zeros(len(view)) if self.history == "rank"
                else np.full(len(view), float(len(view))))
        compiled(type(self).kernel)(
            params, aux, view.now, float(view.total_gpus), view.arrival_s.copy(),
            view.demand.copy(), view.est_size.copy(), view.est_remaining.copy(), hist,
            view.alloc.copy(), view.model.copy(), view.scaling.speedup, out)
        return out


@dataclass(frozen=True)
class RoundPolicy(Policy):
    """A policy that decides in rounds and places whole GPUs on nodes.

    Implements :class:`simulator.rounds.RoundScheduler`: subclasses define ``round_s`` (a
    field or property) and :meth:`plan`; they override ``reacts`` to also decide at every arrival
    and completion. State that must outlive one decision goes in ``state.memo``. A policy that
    sets ``shares_gpus`` places workers on devices, possibly several jobs per device: its plan
    is a ``(jobs, devices)`` 0/1 array (:mod:`simulator.rounds.sharing`).
    """

    shares_gpus: ClassVar[bool] = False

    @property
    def reacts(self) -> bool:
        """Also decide at every arrival and completion (default: only at round boundaries)."""
        return False

    @property
    def round_s(self) -> float:
        """Seconds between decisions."""
        raise NotImplementedError

    @property
    def short_rounds(self) -> bool:
        """A round also ends when no job holds GPUs any more, and one that starts nothing
        lasts until the next arrival (Gavel's simulator); default False."""
        return False

    def plan(self, state: RoundState) -> IntArray:
        """GPUs of each active job on each node: a ``(jobs, nodes)`` integer array."""
        raise NotImplementedError


@dataclass(frozen=True)
class EventDriven(RoundPolicy):
    """A round policy with no rounds: it decides at every arrival and completion only."""

    @property
    def reacts(self) -> bool:
        """Decide at arrivals and completions."""
        return True

    @property
    def round_s(self) -> float:
        """No rounds."""
        return math.inf


PolicyClass = type[KernelPolicy] | type[RoundPolicy]

REGISTRY: dict[str, PolicyClass] = {}
"""Every policy by name."""

P = TypeVar("P", bound=PolicyClass)


def register(cls: P) -> P:
    """Class decorator adding a policy to :data:`REGISTRY` under ``cls.name``."""
    if not cls.name or cls.name in REGISTRY:
        raise ValueError(f"policy name {cls.name!r} is empty or taken")
    REGISTRY[cls.name] = cls
    return cls


def get_policy(name: str) -> PolicyClass:
    """The policy class registered as ``name`` (case-insensitive)."""
    key = name.lower()
    if key not in REGISTRY:
        raise InvalidPolicyParams(f"unknown policy {name!r}; known policies: "
                                  f"{', '.join(sorted(REGISTRY))}")
    return REGISTRY[key]


def make_policy(name: str, params: Mapping[str, Any] | None = None
                ) -> KernelPolicy | RoundPolicy:
    """Build policy ``name`` from defaults overridden by ``params``."""
    return get_policy(name).from_params(dict(params or {}))


_NO_PARAMS = np.zeros(0)
_NO_AUX = np.zeros((0, 0))
_NO_AUX.flags.writeable = False


def _infinite(x: object) -> bool:
    return isinstance(x, float) and math.isinf(x)

