"""Time several ways of answering the same questions one at a time, interleaved, as the answer path runs them.

A helper module, not a benchmark: ``mfar_ann.py`` and ``name_index_linking.py`` import :func:`p50_ms` (they run as
``python benchmarks/NAME.py``, so this folder is on ``sys.path``). Run on its own
(``python benchmarks/interleaved.py``) it measures nothing and writes nothing: it prints this help.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Mapping, Sequence

from harness import percentiles

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
                times[name].append(1e3 * (time.perf_counter() - start))
    return {name: percentiles(ms, points=(50,)).get("p50", float("nan")) for name, ms in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n")[1])
    parser.parse_args()
    parser.print_help()


if __name__ == "__main__":
    main()
