"""Cluster profiles: validated YAML data describing GPUs, nodes, network and overheads, or a
one-line cluster spec (``V100:36,P100:36,K80:36``, :func:`parse_cluster`).

Schema (every key is checked; unknown keys are errors)::

    name: pcs-64                      # must match the file name
    description: one line for listings
    provenance: where the numbers come from
    node_groups:                      # one or more
      - {count: 8, gpus_per_node: 8, gpu_type: v100, gpu_memory_gib: 32}
    gpu_types:                        # every gpu_type used above, with its relative speed
      v100: {relative_speed: 1.0}     # optional: slowdown_fit: [a, b, c] (Horus §3.2: JCT ratio
                                      # a u^2 + b u + c above 100 % cumulative utilization),
                                      # slowdown_linear: [slope, intercept] (slowdown below;
                                      # default: from 0 to f(1) - 1)
    network: {inter_node_factor: 1.0} # speed multiplier of a gang spread over nodes, (0, 1]
    overheads: {restart_overhead_s: 0, suspend_overhead_s: 0}
    sharing: {collision_slowdown: 1.0} # optional: extra slowdown while two or more workers on
                                       # a device surge at once (OJPP eq. 4); default 1.0
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from simulator.errors import InvalidProfile, located
from simulator.inputs.colocation import SlowdownCurve
from simulator.inputs.files import read_yaml

__all__ = ["MAX_GPUS", "PROFILE_DIR", "SERVER_GPUS", "ClusterProfile", "NodeGroup",
           "is_cluster_spec", "list_profiles", "load_profile", "parse_cluster"]

PROFILE_DIR = Path(__file__).resolve().parents[2] / "cluster_profiles"
MAX_GPUS = 10**7
"""The most GPUs a cluster may have: the simulator holds arrays of one entry per GPU, and no
cluster has ten million (a bound, so that a typo of 10^13 is refused, not allocated)."""
"""Where the shipped profiles live (``cluster_profiles/`` at the project root)."""


@dataclass(frozen=True)
class NodeGroup:
    """``count`` identical nodes with ``gpus_per_node`` GPUs of one type each."""

    count: int
    gpus_per_node: int
    gpu_type: str
    gpu_memory_gib: float


@dataclass(frozen=True)
class ClusterProfile:
    """A validated cluster description. Load with :func:`load_profile`."""

    name: str
    description: str
    provenance: str
    node_groups: tuple[NodeGroup, ...]
    relative_speed: dict[str, float]
    inter_node_factor: float
    restart_overhead_s: float
    suspend_overhead_s: float
    slowdown_curves: dict[str, SlowdownCurve] = field(default_factory=dict)
    """Per GPU type, Horus's utilization-slowdown fit (types without one have none)."""
    collision_slowdown: float = 1.0

    @property
    def total_gpus(self) -> int:
        """GPUs in the whole cluster."""
        return sum(g.count * g.gpus_per_node for g in self.node_groups)

    @property
    def gpus_by_type(self) -> dict[str, int]:
        """GPU count per GPU type, in profile order."""
        out: dict[str, int] = {}
        for g in self.node_groups:
            out[g.gpu_type] = out.get(g.gpu_type, 0) + g.count * g.gpus_per_node
        return out


_TOP = {"name", "description", "provenance", "node_groups", "gpu_types", "network", "overheads",
        "sharing"}
_GROUP = {"count", "gpus_per_node", "gpu_type", "gpu_memory_gib"}


class _Checker:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, field: str, value: object, problem: str) -> InvalidProfile:
        return InvalidProfile(located(self.source, column=field, value=value, problem=problem))

    def mapping(self, obj: object, field: str, allowed: set[str]) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise self.fail(field, obj, "must be a mapping")
        unknown = sorted(set(obj) - allowed)
        if unknown:
            raise self.fail(f"{field}.{unknown[0]}" if field else unknown[0], None,
                            f"unknown key; allowed keys are {sorted(allowed)}")
        return obj

    def number(self, obj: dict[str, Any], key: str, field: str, *, low: float,
               high: float = float("inf"), integer: bool = False, strict: bool = True) -> float:
        if key not in obj:
            raise self.fail(f"{field}.{key}", None, "required key is missing")
        v = obj[key]
        kind = int if integer else (int, float)
        ok = isinstance(v, kind) and not isinstance(v, bool)
        ok = ok and math.isfinite(v) and (v > low if strict else v >= low) and v <= high
        if not ok:
            rule = f"{'>' if strict else '>='} {low}" + (f" and <= {high}" if high < 1e300 else "")
            raise self.fail(f"{field}.{key}", v,
                            f"must be {'an integer' if integer else 'a number'} {rule}")
        return float(v)

    def numbers(self, obj: dict[str, Any], key: str, field: str, n: int) -> Any:
        v = obj[key]
        ok = isinstance(v, list) and len(v) == n and all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in v)
        if not ok:
            raise self.fail(f"{field}.{key}", v, f"must be a list of {n} numbers")
        return tuple(float(x) for x in v)


def _parse(doc: object, source: str) -> ClusterProfile:
    c = _Checker(source)
    top = c.mapping(doc, "", _TOP)
    for key in ("name", "description", "provenance"):
        if not isinstance(top.get(key), str) or not top[key].strip():
            raise c.fail(key, top.get(key), "required text is missing or empty")
    groups_raw = top.get("node_groups")
    if not isinstance(groups_raw, list) or not groups_raw:
        raise c.fail("node_groups", groups_raw, "must be a non-empty list")
    groups = []
    for i, g in enumerate(groups_raw):
        field = f"node_groups[{i}]"
        m = c.mapping(g, field, _GROUP)
        if not isinstance(m.get("gpu_type"), str):
            raise c.fail(f"{field}.gpu_type", m.get("gpu_type"), "must be a GPU type name")
        groups.append(NodeGroup(
            int(c.number(m, "count", field, low=0, high=MAX_GPUS, integer=True)),
            int(c.number(m, "gpus_per_node", field, low=0, high=MAX_GPUS, integer=True)),
            m["gpu_type"],
            c.number(m, "gpu_memory_gib", field, low=0)))
    total = sum(g.count * g.gpus_per_node for g in groups)
    if total > MAX_GPUS:
        raise c.fail("node_groups", f"{total:,} GPUs", f"a cluster has at most {MAX_GPUS:,}")
    types = c.mapping(top.get("gpu_types", {}), "gpu_types", {g.gpu_type for g in groups})
    speeds, curves = {}, {}
    for g in groups:
        where = f"gpu_types.{g.gpu_type}"
        spec = c.mapping(types.get(g.gpu_type), where,
                         {"relative_speed", "slowdown_fit", "slowdown_linear"})
        speeds[g.gpu_type] = c.number(spec, "relative_speed", where, low=0)
        if "slowdown_fit" in spec:
            linear = (c.numbers(spec, "slowdown_linear", where, 2)
                      if "slowdown_linear" in spec else None)
            curves[g.gpu_type] = SlowdownCurve(c.numbers(spec, "slowdown_fit", where, 3),
                                               linear)
    share = c.mapping(top.get("sharing", {}), "sharing", {"collision_slowdown"})
    net = c.mapping(top.get("network", {}), "network", {"inter_node_factor"})
    over = c.mapping(top.get("overheads", {}), "overheads",
                     {"restart_overhead_s", "suspend_overhead_s"})
    return ClusterProfile(
        name=top["name"], description=top["description"], provenance=top["provenance"],
        node_groups=tuple(groups), relative_speed=speeds,
        inter_node_factor=(c.number(net, "inter_node_factor", "network", low=0, high=1)
                           if "inter_node_factor" in net else 1.0),
        restart_overhead_s=c.number(over, "restart_overhead_s", "overheads", low=0,
                                    strict=False) if "restart_overhead_s" in over else 0.0,
        suspend_overhead_s=c.number(over, "suspend_overhead_s", "overheads", low=0,
                                    strict=False) if "suspend_overhead_s" in over else 0.0,
        slowdown_curves=curves,
        collision_slowdown=c.number(share, "collision_slowdown", "sharing", low=0, strict=False)
        if "collision_slowdown" in share else 1.0,
    )


def load_profile(name_or_path: str | Path) -> ClusterProfile:
    """Load a shipped profile by name (``"pcs-64"``), any profile YAML by path, or a cluster
    spec (``"v100:36,p100:36,k80:36"``, below).

    Raises:
        InvalidProfile: unknown name, unreadable file, unknown keys or impossible values.
    """
    if isinstance(name_or_path, str) and is_cluster_spec(name_or_path):
        return parse_cluster(name_or_path)
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = PROFILE_DIR / f"{name_or_path}.yaml"
        if not path.exists():
            raise InvalidProfile(f"unknown cluster profile {str(name_or_path)!r}; shipped "
                                 f"profiles: {', '.join(list_profiles())} (or give a YAML path)")
    doc = read_yaml(path, InvalidProfile, "cluster profile")
    profile = _parse(doc, str(path))
    if profile.name != path.stem:  # runs and exports record the name: it must say which file
        raise InvalidProfile(located(str(path), column="name", value=profile.name,
                                     problem=f"must match the file name {path.stem!r}"))
    return profile


def list_profiles() -> list[str]:
    """Names of the shipped profiles."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


# Cluster profiles from a one-line spec, without a YAML file (``--cluster``).
#
# Two spellings, both of Gavel's GPU types (those of the shipped ``gavel-108`` profile, whose
# relative speeds and memory they take):
#
# - ``V100:36,P100:36,K80:36``: GPUs per type, in servers of 4 (Gavel's fixtures), or
#   ``TYPE:GPUS/PER_SERVER`` (``V100:32/8``). Types are case-insensitive, each at most once.
# - ``36:36:36``: Gavel's ``-c`` flag, V100:P100:K80, in servers of 4.
#
# The profile's types follow Gavel's order (V100, P100, K80; its round grants them in that
# order, whatever order the spec lists them in), and its name is the spec in canonical form
# (``v100:36,p100:36,k80:36``), which :func:`load_profile` reads back: a run that stores its
# profile by name can be resumed from it.

SERVER_GPUS = 4
"""GPUs per server unless the spec says otherwise (Gavel's ``--num_gpus_per_server 4:4:4``)."""
_ITEM = re.compile(r"([A-Za-z][A-Za-z0-9_-]*):(\S+?)(?:/(\S+))?")
_EXAMPLE = "e.g. V100:36,P100:36,K80:36, V100:32/8 or Gavel's 36:36:36"


def is_cluster_spec(name: str) -> bool:
    """Whether a profile name is a cluster spec (shipped names and paths have no colon)."""
    return ":" in name and not name.endswith((".yaml", ".yml"))


def _count(spec: str, what: str, text: str) -> int:
    if not re.fullmatch(r"[0-9]{1,9}", text) or not 0 < int(text) <= MAX_GPUS:
        raise InvalidProfile(f"--cluster {spec!r}: {what} {text!r} must be a positive "
                             f"integer of at most {MAX_GPUS:,} ({_EXAMPLE})")
    return int(text)


def parse_cluster(spec: str) -> ClusterProfile:
    """The profile a cluster spec describes (the comment above).

    Raises:
        InvalidProfile: the spec, naming the value at fault and the forms accepted.
    """
    base = load_profile("gavel-108")
    known = {g.gpu_type: g for g in base.node_groups}
    order = list(known)
    text = spec.strip()
    if text[:1].isdigit():  # Gavel's -c
        counts = text.split(":")
        if len(counts) != len(order):
            raise InvalidProfile(f"--cluster {spec!r}: Gavel's form has {len(order)} GPU counts, "
                                 f"{':'.join(t.upper() for t in order)} ({_EXAMPLE})")
        items: list[tuple[str, str, str | None]] = [
            (t, n, None) for t, n in zip(order, counts, strict=True)]
    else:
        items = []
        for part in text.split(","):
            m = _ITEM.fullmatch(part.strip())
            if m is None:
                raise InvalidProfile(f"--cluster {spec!r}: {part.strip()!r} is not TYPE:GPUS or "
                                     f"TYPE:GPUS/PER_SERVER ({_EXAMPLE})")
            items.append((m.group(1).lower(), m.group(2), m.group(3)))
    sizes: dict[str, tuple[int, int]] = {}
    for gpu_type, gpus, per in items:
        if gpu_type not in known:
            raise InvalidProfile(f"--cluster {spec!r}: unknown GPU type {gpu_type!r}; known: "
                                 f"{', '.join(order)} (write a profile YAML for others)")
        if gpu_type in sizes:
            raise InvalidProfile(f"--cluster {spec!r}: GPU type {gpu_type!r} given twice")
        n = _count(spec, f"{gpu_type} GPU count", gpus)
        server = SERVER_GPUS if per is None else _count(spec, f"{gpu_type} GPUs per server", per)
        if n % server:
            raise InvalidProfile(f"--cluster {spec!r}: {n} {gpu_type} GPUs do not fill servers "
                                 f"of {server}; give a multiple of {server} or "
                                 f"{gpu_type}:{n}/PER_SERVER")
        sizes[gpu_type] = (n, server)
    groups = tuple(NodeGroup(n // server, server, t, known[t].gpu_memory_gib)
                   for t in order if t in sizes for n, server in [sizes[t]])
    name = ",".join(f"{g.gpu_type}:{g.count * g.gpus_per_node}"
                    + ("" if g.gpus_per_node == SERVER_GPUS else f"/{g.gpus_per_node}")
                    for g in groups)
    return replace(
        base, name=name, node_groups=groups,
        description=" + ".join(f"{g.count * g.gpus_per_node} {g.gpu_type.upper()}"
                               for g in groups) + " from --cluster",
        provenance=f"--cluster {name}: GPU types as gavel-108 has them",
        relative_speed={g.gpu_type: base.relative_speed[g.gpu_type] for g in groups})
