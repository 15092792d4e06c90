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


def alternate(steps: dict[str, Callable], data: list, warmup: int = 3) -> tuple[dict[str, list[float]], dict]:
    """Run the training steps in alternation over the same batches: step(x, y) for each (x, y) of `data`, every
    step on a batch before the next batch. The first `warmup` batches are not timed. Returns the seconds each
    step took and what each returned (warm-up included), by name. Alternating makes a busy machine slow them
    all alike."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    results: dict[str, list] = {name: [] for name in steps}
    for i, (x, y) in enumerate(data):
        for name, fn in steps.items():
            t0 = time.perf_counter()
            results[name].append(fn(x, y))
            if i >= warmup:
                times[name].append(time.perf_counter() - t0)
    return times, results
