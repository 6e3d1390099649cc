"""A brute-force oracle for packing UniSched's buddy cells onto nodes."""

from __future__ import annotations


def packs(free: list[int], cells: list[int]) -> bool:
    """Brute force: can the cells (GPU counts) be put on nodes with these free GPUs?"""
    if not cells:
        return True
    size, rest = cells[0], cells[1:]
    for n in range(len(free)):
        if free[n] >= size:
            free[n] -= size
            ok = packs(free, rest)
            free[n] += size
            if ok:
                return True
    return False
