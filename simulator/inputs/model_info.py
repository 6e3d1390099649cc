"""Chronus's ``model_info.json``: how fast each model's gang runs when it spans nodes.

The file maps ``{model: {G: {nodes: speed}}}``: the speed of a G-GPU job of that model over
1, 2 or 4 nodes relative to one node. :func:`read_model_info` turns it into a
:class:`~simulator.inputs.scaling.ScalingTable` whose models scale linearly on one node
(Chronus's traces time a job at its own GPU count) and whose ``spread`` follows the rule of
Chronus's progress function (``compute_progress`` with ``convert_to_bin`` in
ChronusArtifact's ``code/alg/scheduler/time_aware_with_lease.py``, written there but
switched off): a gang of 2 GPUs reads the entry for 2, of 3-4 the entry for 4, of 5-8 the
entry for 8 (so the file's entries for 6 go unused, as in Chronus); over 2 nodes it runs at
the entry's ``"2"``, over 3 or more at its ``"4"`` (its ``"2"`` where it has no ``"4"``).
Gangs of 1 or of more than 8 GPUs have no entry: the cluster's ``inter_node_factor`` applies
(Chronus's function returned 1.0 there). Two readings keep the table safe for planning: a
speed above 1 (inception_v3 over 2 nodes: 1.0025) is read as 1, and the speed over 3 or more
nodes is at most the speed over 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from simulator.errors import InvalidWorkload, located
from simulator.inputs.files import read_json
from simulator.inputs.scaling import ScalingTable, amdahl

__all__ = ["MAX_SPREAD_SPEED", "load_scaling", "read_model_info"]

MAX_SPREAD_SPEED = 1.5
"""The largest speed of a spread gang over the same gang on one node the file may give."""

_MAX_COUNT = 10**6
"""The largest GPU or node count a key may name."""


def load_scaling(path: str | Path, max_gpus: int = 64) -> ScalingTable:
    """A speed-up table: a ``.json`` file as Chronus's ``model_info.json``
    (:func:`read_model_info`, tabulated up to ``max_gpus``), any other as a CSV
    (:meth:`ScalingTable.from_csv`)."""
    if str(path).endswith(".json"):
        return read_model_info(path, max_gpus)
    return ScalingTable.from_csv(path)


def read_model_info(path: str | Path, max_gpus: int = 64) -> ScalingTable:
    """The models of ``model_info.json`` at ``path`` (module docstring), linear up to
    ``max_gpus`` GPUs; an error naming the file, the entry and the value otherwise."""
    src = str(path)
    doc = read_json(path, InvalidWorkload, "model_info")
    if not isinstance(doc, dict) or not doc:
        raise InvalidWorkload(f"{src}: expected {{model: {{GPUs: {{nodes: speed}}}}}} with at "
                              f"least one model (got {type(doc).__name__})")
    spread = np.full((len(doc), max_gpus + 1, 2), np.nan)
    for m, (model, sizes) in enumerate(doc.items()):
        speeds = _entries(sizes, src, str(model))
        for g in range(2, min(8, max_gpus) + 1):
            entry = speeds.get(2 if g == 2 else 4 if g <= 4 else 8, {})
            two = entry.get(2, np.nan)
            spread[m, g] = (two, min(entry.get(4, two), two))
    line = amdahl(1.0, max_gpus)
    table = ScalingTable.from_points({str(model): line for model in doc})
    return ScalingTable(table.models, table.speedup, table.max_gpus, spread)


def _entries(sizes: object, src: str, model: str) -> dict[int, dict[int, float]]:
    """One model's ``{G: {nodes: speed}}`` as numbers, each speed read as at most 1."""
    if not isinstance(sizes, dict):
        raise InvalidWorkload(located(src, column=model, value=sizes,
                                      problem="expected {GPUs: {nodes: speed}}"))
    out: dict[int, dict[int, float]] = {}
    for g, nodes in sizes.items():
        gpus = _count(g, model, out, src)
        if not isinstance(nodes, dict):
            raise InvalidWorkload(located(src, column=f"{model}.{g}", value=nodes,
                                          problem="expected {nodes: speed}"))
        out[gpus] = {}
        for k, v in nodes.items():
            where = f"{model}.{g}.{k}"
            count = _count(k, where, out[gpus], src)
            if not (isinstance(v, int | float) and not isinstance(v, bool)
                    and 0 < v <= MAX_SPREAD_SPEED):
                raise InvalidWorkload(located(
                    src, column=where, value=v,
                    problem=f"a speed must be a number > 0 and at most {MAX_SPREAD_SPEED}"))
            out[gpus][count] = min(float(v), 1.0)
    return out


def _count(key: object, where: str, seen: Mapping[int, object], src: str) -> int:
    """A GPU or node count written as a key: decimal digits, not given twice."""
    if not (isinstance(key, str) and key.isascii() and key.isdecimal() and len(key) <= 7
            and 0 < int(key) <= _MAX_COUNT):
        raise InvalidWorkload(located(src, column=where, value=key,
                                      problem=f"a key must be a whole number from 1 to "
                                              f"{_MAX_COUNT:,} as a string"))
    if int(key) in seen:
        raise InvalidWorkload(located(src, column=where, value=key,
                                      problem="the same count is given twice"))
    return int(key)
