"""The compiled PCG64 reproduces NumPy's generator: every double, and every jump ahead."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import pcg64


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**63])
def test_doubles_match_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    state = pcg64.from_generator(rng)
    want = rng.random(2000)
    got = np.array([pcg64.next_double(state) for _ in range(2000)])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(state, pcg64.from_generator(rng))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**64 - 1), delta=st.integers(0, 2**62))
def test_skipping_matches_numpy_advance(seed: int, delta: int) -> None:
    state = pcg64.from_generator(np.random.default_rng(seed))
    rng = pcg64.to_generator(state)
    rng.bit_generator.advance(delta)
    pcg64.skip(state, delta)
    assert pcg64.next_double(state) == rng.random()


def test_a_generator_holding_half_a_draw_is_refused() -> None:
    rng = np.random.default_rng(0)
    rng.integers(0, 10, dtype=np.uint32)  # leaves a buffered 32-bit half
    with pytest.raises(ValueError, match="buffered"):
        pcg64.from_generator(rng)
