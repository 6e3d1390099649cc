"""HiveD's buddy cells for UniSched's policy generator (papers/unisched.md §III-C3, Prop. 1).

1-, 2-, 4- and 8-GPU cells are levels 0-3; a cell never straddles nodes. A node's free GPUs
are its binary decomposition into cells (positions inside a node are not modelled, so that
decomposition is exact). A job's candidates are cell multisets ``(c0, c1, c2, c3)``: the
consolidated one (the smallest single cell holding the gang, or whole 8-cells for larger
gangs: the paper's ``A*``), the exact buddy decomposition, and all 1-GPU cells (the paper's
three examples for a 6-GPU job). Proposition 1 (eq. 14) says when a multiset of cells can be
carved out of the free ones; :func:`place_cells` is its constructive proof.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["CELL_GPUS", "LEVELS", "NEST", "candidates", "fits_cells", "node_cells",
           "place_cells"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

CELL_GPUS = np.array([1, 2, 4, 8], dtype=np.int64)
"""GPUs of a level-0..3 cell."""
LEVELS = 4
NEST = np.array([[2.0 ** (g - i) if g >= i else 0.0 for i in range(LEVELS)]
                 for g in range(LEVELS)])
"""``NEST[g, i]``: level-i cells inside one level-g cell (0 when g < i): eq. 14's weights."""


def node_cells(free: IntArray) -> IntArray:
    """Free cells of each node, ``(nodes, 4)``: whole 8-cells, then the bits of the rest."""
    free = np.asarray(free, dtype=np.int64)
    out = np.zeros((free.shape[0], LEVELS), dtype=np.int64)
    out[:, 3] = free // 8
    for g in range(3):
        out[:, g] = (free % 8 >> g) & 1
    return out


def candidates(demand: int, top_level: int = 3) -> IntArray:
    """Cell multisets ``(P, 4)`` for a gang of ``demand`` GPUs; row 0 is the consolidated one.

    Args:
        demand: GPUs the job runs on.
        top_level: largest cell level the cluster's nodes offer (3 for 8-GPU nodes).
    """
    top = int(CELL_GPUS[top_level])
    rows: list[tuple[int, ...]] = []
    whole = np.zeros(LEVELS, dtype=np.int64)
    if demand <= top:
        whole[int(np.ceil(np.log2(demand)))] = 1
    else:
        whole[top_level] = -(-demand // top)
    rows.append(tuple(whole))
    exact = np.zeros(LEVELS, dtype=np.int64)
    exact[top_level] = demand // top
    for g in range(top_level):
        exact[g] = (demand % top >> g) & 1
    rows.append(tuple(exact))
    if demand <= 16:  # the paper enumerates allocations only for jobs of <= 16 GPUs
        rows.append((demand, 0, 0, 0))
    unique = list(dict.fromkeys(rows))
    return np.array(unique, dtype=np.int64)


def fits_cells(taken: IntArray, free: IntArray) -> bool:
    """Proposition 1 (eq. 14): ``taken`` cells (4,) can be carved out of ``free`` cells (4,)."""
    return bool(np.all(taken @ NEST <= free @ NEST + 1e-9))


def place_cells(node_free: IntArray, requests: IntArray) -> list[IntArray | None]:
    """Put each job's cells on nodes; the constructive proof of Proposition 1.

    Levels go from the largest down; a request takes a free cell of its level, splitting the
    smallest larger one when none is left. Each job's cells go to nodes it already uses
    when they can, then to the node with the fewest free GPUs that has the cell.

    Args:
        node_free: ``(nodes,)`` free GPUs.
        requests: ``(jobs, 4)`` cells each job needs.

    Returns:
        Per job, GPUs on each node (the cells' full size), or None where cells ran out
        (which eq. 14 rules out).
    """
    pool = node_cells(node_free)
    left = node_free.astype(np.int64).copy()
    rows = [np.zeros(node_free.shape[0], dtype=np.int64) for _ in range(requests.shape[0])]
    ok = [True] * requests.shape[0]
    for g in range(LEVELS - 1, -1, -1):
        for j in np.flatnonzero(requests[:, g]):
            for _ in range(int(requests[j, g])):
                node = _take_cell(pool, left, g, rows[j] > 0)
                if node < 0:
                    ok[j] = False
                    break
                rows[j][node] += CELL_GPUS[g]
                left[node] -= CELL_GPUS[g]
    return [row if good else None for row, good in zip(rows, ok, strict=True)]


def _take_cell(pool: IntArray, left: IntArray, g: int, mine: BoolArray) -> int:
    """Remove one level-``g`` cell from ``pool`` (splitting if needed); its node or -1."""
    for h in range(g, LEVELS):
        has = pool[:, h] > 0
        if not has.any():
            continue
        pick = has & mine if (has & mine).any() else has
        nodes = np.flatnonzero(pick)
        node = int(nodes[np.argmin(left[nodes])])
        pool[node, h] -= 1
        pool[node, g:h] += 1  # 2^h = 2^g + 2^g + 2^(g+1) + ... + 2^(h-1)
        return node
    return -1
