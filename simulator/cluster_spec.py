"""Cluster profiles from a one-line spec, without a YAML file (``--cluster``).

Two spellings, both of Gavel's GPU types (those of the shipped ``gavel-108`` profile, whose
relative speeds and memory they take):

- ``V100:36,P100:36,K80:36``: GPUs per type, in servers of 4 (Gavel's fixtures), or
  ``TYPE:GPUS/PER_SERVER`` (``V100:32/8``). Types are case-insensitive, each at most once.
- ``36:36:36``: Gavel's ``-c`` flag, V100:P100:K80, in servers of 4.

The profile's types follow Gavel's order (V100, P100, K80; its round grants them in that
order, whatever order the spec lists them in), and its name is the spec in canonical form
(``v100:36,p100:36,k80:36``), which :func:`simulator.profile.load_profile` reads back: a run
that stores its profile by name can be resumed from it.
"""

from __future__ import annotations

import re
from dataclasses import replace

from simulator.errors import InvalidProfile
from simulator.profile import MAX_GPUS, ClusterProfile, NodeGroup, load_profile

__all__ = ["SERVER_GPUS", "is_cluster_spec", "parse_cluster"]

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
    """The profile a cluster spec describes (module docstring).

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
