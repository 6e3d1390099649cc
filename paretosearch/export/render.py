"""What the renderers share: their options, their result, the text every export starts with."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from paretosearch.export.plan import WEIGHT_SCALE, ExportError, Plan

__all__ = [
    "KUEUE_VERSIONS", "Export", "ExportOptions", "header", "size_bound", "weight_losses",
]

KUEUE_VERSIONS = ("v1beta2", "v1beta1")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_HOSTLIST = re.compile(r"^[A-Za-z0-9_.,\-\[\]]+$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PREFIX = re.compile(r"^[a-z][-a-z0-9]{0,39}$")


@dataclass(frozen=True)
class ExportOptions:
    """Target settings the plan does not decide.

    Attributes:
        kueue_version: ``v1beta2`` (Kueue's storage version) or ``v1beta1``.
        namespace: the Kubernetes namespace of Kueue's LocalQueues.
        nodes: Slurm node list of every partition (``ALL``: every node).
        max_classes: merge adjacent size classes down to this many queues (None: keep all).
        prefix: put before every queue name (``team-a-`` gives ``team-a-class0``, ...).
    """

    kueue_version: str = "v1beta2"
    namespace: str = "default"
    nodes: str = "ALL"
    max_classes: int | None = None
    prefix: str = ""

    def __post_init__(self) -> None:
        if self.kueue_version not in KUEUE_VERSIONS:
            raise ExportError(f"Kueue version: expected one of {', '.join(KUEUE_VERSIONS)}, "
                              f"got {self.kueue_version!r}")
        if not _DNS_LABEL.match(self.namespace):
            raise ExportError(f"namespace: expected a Kubernetes name (lower-case letters, "
                              f"digits and '-', at most 63), got {self.namespace!r}")
        if not _HOSTLIST.match(self.nodes):
            raise ExportError(f"nodes: expected a Slurm node list such as gpu[01-16] or ALL "
                              f"(letters, digits, '_.-,[]'), got {self.nodes!r}")
        if self.max_classes is not None and self.max_classes < 1:
            raise ExportError(f"max classes: expected at least 1, got {self.max_classes}")
        if self.prefix and not _PREFIX.match(self.prefix):
            raise ExportError(f"prefix: expected lower-case letters, digits and '-', starting "
                              f"with a letter, at most 40 (a name in every target), got "
                              f"{self.prefix!r}")


@dataclass(frozen=True)
class Export:
    """One target's files (name to text) and what it could not express."""

    format: str
    files: Mapping[str, str]
    cannot_express: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    """What the operator should look at before deploying (also in each file's header)."""


def header(plan: Plan, target: str, notes: Sequence[str], lost: Sequence[str],
           warnings: Sequence[str] = ()) -> list[str]:
    """The text every export starts with (renderers add comment markers): where the config
    came from, how jobs choose their queue, the tiers, warnings, setup notes, what is not
    expressed."""
    src = plan.source
    origin = (f" (run {src['run']}, front entry {src.get('front_index')}, config "
              f"{str(src.get('config_sha256'))[:12]})" if src.get("run") else "")
    objectives = ", ".join(f"{k}={v:.6g}" if isinstance(v, int | float) else f"{k}={v}"
                           for k, v in (src.get("objectives") or {}).items())
    lines = [f"paretosearch export of {plan.policy}{origin} for {target}",
             *([f"objectives: {objectives}"] if objectives else []),
             "cluster: " + ", ".join(f"{n} {t}" for t, n in plan.gpus_by_type.items())
             + " (fastest type first)"]
    if len(plan.classes) > 1:
        lines.append("queues by job size (estimated GPU-seconds: GPUs x expected run time on the "
                     "reference GPU type):")
        for c, low in zip(plan.classes, (0.0, *(c.max_size_gpu_s for c in plan.classes)),
                          strict=False):
            lines.append(f"  {c.name}: {_size_range(low, c.max_size_gpu_s)}, "
                         f"share {c.weight:.4g} of the GPUs")
    for t in plan.tiers:
        lines.append(f"tier {t.name}: priority {t.priority}, lease {t.lease_s:g} s, "
                     f"{'preemptible' if t.preemptible else 'never preempted'}")
    lines += [f"WARNING: {w}" for w in warnings]
    lines += ["notes:", *(f"  - {n}" for n in notes)] if notes else []
    lines += [f"cannot express in {target}:", *(f"  - {item}" for item in lost)]
    # one line each, whatever a document's strings hold: a newline would end the comment
    return [_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", line) for line in lines]


def size_bound(value: float) -> str:
    """A class's size bound written exactly (routing must not round it), or ``unbounded``."""
    if not math.isfinite(value):
        return "unbounded"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _size_range(low: float, high: float) -> str:
    """The range exactly (routing must not round it), with GPU-hours for people."""
    if not math.isfinite(high):
        return f"size > {size_bound(low)} ({_hours(low)})"
    if low > 0:
        return f"{size_bound(low)} < size <= {size_bound(high)} ({_hours(low)} to {_hours(high)})"
    return f"size <= {size_bound(high)} ({_hours(high)})"


def _hours(gpu_s: float) -> str:
    return f"{gpu_s / 3600:.3g} GPU-h"


def weight_losses(plan: Plan, target: str, *, quotas_by_type: bool = False) -> list[str]:
    """What every target with one weight per queue loses (``quotas_by_type``: it keeps the
    per-type weights in per-type quotas)."""
    out = []
    if len(plan.classes) > 1:
        out.append(f"{target} has no routing by job size: submitters pick the queue for their "
                   "job's size (the size table at the top of each file)")
    if any(len(set(c.weight_by_type.values())) > 1 for c in plan.classes):
        kept = " (the per-type shares are in the nominal quotas)" if quotas_by_type else ""
        out.append(f"class weights differ per GPU type; {target} has one weight per queue: "
                   f"used each class's share of all GPUs{kept}")
    top = max(c.weight for c in plan.classes)
    raised = [c.name for c in plan.classes if round(WEIGHT_SCALE * c.weight / top) < 1]
    if raised:
        out.append(f"weights below 1/{WEIGHT_SCALE} of the largest raised to 1/{WEIGHT_SCALE}: "
                   f"{', '.join(raised)}")
    return out
