"""The one timing rule every benchmark here uses: best wall time of several calls after a warm-up."""
from __future__ import annotations

import time
from typing import Callable


def best_time(fn: Callable[[], object], repeats: int, budget: float) -> float:
    """Best wall time of `repeats` calls (fewer if they exceed `budget` seconds), after one warm-up call.

    The best, not the mean: on a shared machine every disturbance only ever adds time.
    """
    fn()
    best = float("inf")
    start = time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        if time.perf_counter() - start > budget:
            break
    return best
