"""Time several ways of answering the same questions one at a time, interleaved, as the answer path runs them."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from grasp_core.math_threads import answer_threads


def p50_ms(ways: Mapping[str, Callable[[list[str]], object]], questions: Sequence[str], warm_up: int = 2) -> dict:
    """Per way, the median milliseconds of answering each question alone; the ways take turns on each question (so
    they meet the same machine load), with one BLAS thread as on the answer path, after ``warm_up`` questions."""
    times: dict[str, list[float]] = {name: [] for name in ways}
    with answer_threads():
        for answer in ways.values():
            answer(list(questions[:warm_up]))
        for question in questions:
            for name, answer in ways.items():
                start = time.perf_counter()
                answer([question])
                times[name].append(time.perf_counter() - start)
    return {name: round(float(np.median(t)) * 1000, 2) for name, t in times.items()}
