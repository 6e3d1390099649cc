"""NumPy's PCG64 bit generator in compiled code, with jump-ahead.

The round engine draws memory surges as ``Generator.random((jobs, devices)) < p`` at every
decision (:mod:`simulator.rounds`), but only the draws of workers that can collide matter. This
module reproduces NumPy's stream exactly (PCG64 XSL-RR, 128-bit LCG; a double is the top 53
bits of one 64-bit output) and jumps over the draws that do not matter in O(log n) steps, so a
decision costs what its colliding workers cost, not ``jobs x devices`` draws.

A state is a ``uint64[4]`` array: the LCG state (high, low) and increment (high, low).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from simulator.jit import configure_cache, njit

configure_cache()

__all__ = ["advance", "from_generator", "next_double", "skip", "to_generator"]

U64 = npt.NDArray[np.uint64]

_MASK = (1 << 64) - 1
_MULT = 0x2360ED051FC65DA44385DF649FCCF645  # PCG's default 128-bit multiplier
_MH, _ML = np.uint64(_MULT >> 64), np.uint64(_MULT & _MASK)
_LO32 = np.uint64(0xFFFFFFFF)
_S32, _S11, _S58, _ONE, _ZERO = (np.uint64(32), np.uint64(11), np.uint64(58), np.uint64(1),
                                 np.uint64(0))


@njit(inline="always")
def _mul64(a: Any, b: Any) -> tuple[Any, Any]:
    """Full 128-bit product of two uint64 as (high, low)."""
    a0, a1 = a & _LO32, a >> _S32
    b0, b1 = b & _LO32, b >> _S32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _S32) + (p01 & _LO32) + (p10 & _LO32)
    return p11 + (p01 >> _S32) + (p10 >> _S32) + (mid >> _S32), (mid << _S32) | (p00 & _LO32)


@njit(inline="always")
def _mul128(ah: Any, al: Any, bh: Any, bl: Any) -> tuple[Any, Any]:
    """``a * b mod 2^128`` on (high, low) pairs."""
    hi, lo = _mul64(al, bl)
    return hi + al * bh + ah * bl, lo


@njit(inline="always")
def _add128(ah: Any, al: Any, bh: Any, bl: Any) -> tuple[Any, Any]:
    lo = al + bl
    return ah + bh + (_ONE if lo < al else _ZERO), lo


@njit
def next_double(s: Any) -> float:
    """Step the generator and return the next double in [0, 1), as ``Generator.random``."""
    h, lo = _mul128(s[0], s[1], _MH, _ML)
    s[0], s[1] = _add128(h, lo, s[2], s[3])
    x = s[0] ^ s[1]
    rot = s[0] >> _S58
    out = (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))
    return float(out >> _S11) * (1.0 / 9007199254740992.0)


@njit
def advance(s: Any, delta: int) -> None:
    """Jump ``delta`` steps ahead (``delta >= 0``) in O(log delta): the LCG's affine map
    composed with itself by repeated squaring."""
    mh, ml, ph, pl = _MH, _ML, s[2], s[3]
    ah, al, ch, cl = _ZERO, _ONE, _ZERO, _ZERO  # accumulated map x -> a x + c
    d = delta
    while d > 0:
        if d & 1:
            ah, al = _mul128(ah, al, mh, ml)
            th, tl = _mul128(ch, cl, mh, ml)
            ch, cl = _add128(th, tl, ph, pl)
        th, tl = _add128(mh, ml, _ZERO, _ONE)
        ph, pl = _mul128(th, tl, ph, pl)
        mh, ml = _mul128(mh, ml, mh, ml)
        d >>= 1
    h, lo = _mul128(ah, al, s[0], s[1])
    s[0], s[1] = _add128(h, lo, ch, cl)


@njit
def skip(s: Any, delta: int) -> None:
    """Skip ``delta`` draws: stepping for short gaps, jumping for long ones."""
    if delta < 48:
        for _ in range(delta):
            h, lo = _mul128(s[0], s[1], _MH, _ML)
            s[0], s[1] = _add128(h, lo, s[2], s[3])
    else:
        advance(s, delta)


def from_generator(rng: np.random.Generator) -> U64:
    """The state of a NumPy PCG64 generator (which must not hold a buffered 32-bit half)."""
    st = rng.bit_generator.state
    if st["bit_generator"] != "PCG64" or st["has_uint32"]:
        raise ValueError("expected a PCG64 generator with no buffered 32-bit output")
    state, inc = int(st["state"]["state"]), int(st["state"]["inc"])
    return np.array([state >> 64, state & _MASK, inc >> 64, inc & _MASK], dtype=np.uint64)


def to_generator(s: U64) -> np.random.Generator:
    """A NumPy generator at state ``s`` (for tests and hand-offs)."""
    bg = np.random.PCG64()
    bg.state = {"bit_generator": "PCG64",
                "state": {"state": (int(s[0]) << 64) | int(s[1]),
                          "inc": (int(s[2]) << 64) | int(s[3])},
                "has_uint32": 0, "uinteger": 0}
    return np.random.Generator(bg)
