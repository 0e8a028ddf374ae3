"""Hypothesis strategies shared by the optimizer tests."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from andreas.synthetic import random_snapshot


def snapshots(max_nodes: int, max_jobs: int) -> st.SearchStrategy:
    """Random rescheduling points (`random_snapshot`), on premise or cloud, scenario 1 or 2."""
    return st.builds(
        lambda seed, n, j, sc, cloud, now: random_snapshot(
            np.random.default_rng(seed), n, j, scenario=sc, cloud=cloud, now_s=now),
        seed=st.integers(0, 2**32 - 1), n=st.integers(1, max_nodes),
        j=st.integers(1, max_jobs), sc=st.sampled_from([1, 2]), cloud=st.booleans(),
        now=st.floats(0.0, 300_000.0, allow_nan=False))
