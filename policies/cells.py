"""HiveD's buddy cells for UniSched's policy generator (papers/unisched.md §III-C3, Prop. 1).

1-, 2-, 4- and 8-GPU cells are levels 0-3; a cell never straddles nodes. A node's free GPUs
are its binary decomposition into cells (positions inside a node are not modelled, so that
decomposition is exact). A job's candidates are cell multisets ``(c0, c1, c2, c3)``: the
consolidated one (the smallest single cell holding the gang, or whole 8-cells for larger
gangs: the paper's ``A*``), the exact buddy decomposition, and all 1-GPU cells (the paper's
three examples for a 6-GPU job). Proposition 1 (eq. 14) says when a multiset of cells can be
carved out of the free ones; :func:`place_cells` is its constructive proof. Compiled: the
UniSched kernel calls these, and so can Python.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from simulator.jit import configure_cache, njit

configure_cache()

__all__ = ["CELL_GPUS", "LEVELS", "NEST", "candidates", "fits_cells", "node_cells",
           "place_cells"]

IntArray = npt.NDArray[np.int64]

CELL_GPUS = np.array([1, 2, 4, 8], dtype=np.int64)
"""GPUs of a level-0..3 cell."""
LEVELS = 4
NEST = np.array([[2.0 ** (g - i) if g >= i else 0.0 for i in range(LEVELS)]
                 for g in range(LEVELS)])
"""``NEST[g, i]``: level-i cells inside one level-g cell (0 when g < i): eq. 14's weights."""


@njit
def node_cells(free: Any) -> Any:
    """Free cells of each node, ``(nodes, 4)``: whole 8-cells, then the bits of the rest."""
    out = np.zeros((free.shape[0], LEVELS), dtype=np.int64)
    for k in range(free.shape[0]):
        out[k, 3] = free[k] // 8
        for g in range(3):
            out[k, g] = (free[k] % 8 >> g) & 1
    return out


@njit
def candidates(demand: int, top_level: int = 3) -> Any:
    """Cell multisets ``(P, 4)`` for a gang of ``demand`` GPUs; row 0 is the consolidated one.

    Args:
        demand: GPUs the job runs on.
        top_level: largest cell level the cluster's nodes offer (3 for 8-GPU nodes).
    """
    top = CELL_GPUS[top_level]
    rows = np.zeros((3, LEVELS), dtype=np.int64)
    if demand <= top:
        rows[0, int(np.ceil(np.log2(demand)))] = 1
    else:
        rows[0, top_level] = -(-demand // top)
    rows[1, top_level] = demand // top
    for g in range(top_level):
        rows[1, g] = (demand % top >> g) & 1
    rows[2, 0] = demand
    k = 1
    for c in range(1, 3 if demand <= 16 else 2):  # all 1-GPU cells only up to 16 GPUs
        seen = False
        for q in range(k):
            seen = seen or np.array_equal(rows[c], rows[q])
        if not seen:
            rows[k] = rows[c]
            k += 1
    return rows[:k].copy()


@njit
def fits_cells(taken: Any, free: Any) -> bool:
    """Proposition 1 (eq. 14): ``taken`` cells (4,) can be carved out of ``free`` cells (4,)."""
    for i in range(LEVELS):
        need, have = 0.0, 0.0
        for g in range(LEVELS):
            need += taken[g] * NEST[g, i]
            have += free[g] * NEST[g, i]
        if need > have + 1e-9:
            return False
    return True


@njit
def _take_cell(pool: Any, left: Any, g: int, mine: Any) -> int:
    """Remove one level-``g`` cell from ``pool`` (splitting if needed); its node or -1. The
    job's own nodes (``mine``) first, then the node with the fewest free GPUs."""
    for h in range(g, LEVELS):
        node, own = -1, False
        for k in range(pool.shape[0]):
            if pool[k, h] <= 0:
                continue
            better = (node < 0 or (mine[k] and not own)
                      or (mine[k] == own and left[k] < left[node]))
            if better:
                node, own = k, mine[k]
        if node < 0:
            continue
        pool[node, h] -= 1
        pool[node, g:h] += 1  # 2^h = 2^g + 2^g + 2^(g+1) + ... + 2^(h-1)
        return node
    return -1


@njit
def place_cells(node_free: Any, requests: Any) -> tuple[Any, Any]:
    """Put each job's cells on nodes; the constructive proof of Proposition 1.

    Levels go from the largest down; a request takes a free cell of its level, splitting the
    smallest larger one when none is left. Each job's cells go to nodes it already uses
    when they can, then to the node with the fewest free GPUs that has the cell.

    Args:
        node_free: ``(nodes,)`` free GPUs.
        requests: ``(jobs, 4)`` cells each job needs.

    Returns:
        ``(jobs, nodes)`` GPUs of each job on each node (the cells' full size), and whether
        each job's cells were all placed (eq. 14 rules out a False).
    """
    pool = node_cells(node_free)
    left = node_free.astype(np.int64).copy()
    rows = np.zeros((requests.shape[0], node_free.shape[0]), dtype=np.int64)
    ok = np.ones(requests.shape[0], dtype=np.bool_)
    for g in range(LEVELS - 1, -1, -1):
        for j in range(requests.shape[0]):
            for _ in range(requests[j, g]):
                node = _take_cell(pool, left, g, rows[j] > 0)
                if node < 0:
                    ok[j] = False
                    break
                rows[j, node] += CELL_GPUS[g]
                left[node] -= CELL_GPUS[g]
    return rows, ok
