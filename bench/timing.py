"""Shared by the bench scripts (each run as `python bench/NAME.py`, so this directory is on sys.path)."""

from __future__ import annotations

import statistics
import time
from typing import Callable


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """Seconds of the fastest of ``repeats`` calls: the least disturbed run on a shared machine."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def interleaved_medians(calls: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median CPU seconds (``time.process_time``) of each call, the calls run in turn ``repeats``
    times (A, B, A, B, ...), so that a change in the machine's load falls on all of them."""
    times: dict[str, list[float]] = {key: [] for key in calls}
    for _ in range(repeats):
        for key, call in calls.items():
            c0 = time.process_time()
            call()
            times[key].append(time.process_time() - c0)
    return {key: statistics.median(got) for key, got in times.items()}
