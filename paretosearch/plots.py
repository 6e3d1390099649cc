"""Pictures of a front: objectives against each other, with the baselines as reference points.

Two objectives give one scatter (as in the PCS paper's Fig. 3 and 5b); more give a grid of
pairwise panels. Points are the front on the training sample (filled) and the same
configurations re-evaluated on the test sample (hollow); baselines are labelled crosses.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Any

from paretosearch.io import atomic_write

__all__ = ["plot_front"]


def plot_front(doc: dict[str, Any], path: str | Path, *, title: str = "") -> Path:
    """Draw ``front.json``'s content to a PNG at ``path`` (written atomically)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    front = doc["front"]
    labels = list(front[0]["objectives"])
    pairs = list(combinations(range(len(labels)), 2)) or [(0, 0)]
    cols = min(3, len(pairs))
    rows = -(-len(pairs) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 4.5 * rows), squeeze=False)
    baselines = doc.get("baselines") or {}
    for ax, (i, j) in zip(axes.flat, pairs, strict=False):
        xi, yj = labels[i], labels[j]
        ax.scatter([e["metrics"][xi] for e in front], [e["metrics"][yj] for e in front],
                   color="tab:blue", label="front (train)", zorder=3)
        tests = [e["test_metrics"] for e in front if e.get("test_metrics")]
        if tests:
            ax.scatter([t[xi] for t in tests], [t[yj] for t in tests], facecolors="none",
                       edgecolors="tab:blue", label="front (test)", zorder=2)
        for name, rec in baselines.items():
            if rec.get(xi) is None or rec.get(yj) is None:  # the metric does not apply to it
                continue
            ax.scatter(rec[xi], rec[yj], marker="x", color="tab:red", zorder=4)
            ax.annotate(name, (rec[xi], rec[yj]), textcoords="offset points", xytext=(4, 4),
                        fontsize=8, color="tab:red")
        ax.set_xlabel(xi)
        ax.set_ylabel(yj)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(pairs):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()

    def write(tmp: Path) -> None:
        fig.savefig(tmp, format="png", dpi=110)

    try:
        return atomic_write(path, write)
    finally:
        plt.close(fig)
