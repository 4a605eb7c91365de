"""How many threads the BLAS libraries use while the answer path runs: one.

A process on this path holds three OpenBLAS builds (numpy's, scipy's and faiss's, which faiss's exact search calls)
beside torch's and faiss's OpenMP runtimes. The answer path's numpy products are small or memory-bound (query
vectors against a field's vectors, the reranker's features), so a second BLAS thread does little for them, and after
every call OpenBLAS's threads keep spinning on the cores torch's and faiss's threads need next. One BLAS thread made
a warm question faster, with the same answers (``benchmarks/results/blas_threads_hpo.json``,
``benchmarks/results/answer_latency_blas_one_thread_hpo.json``; ``docs/latency.md``); limiting torch's and faiss's
pools as well was tried and did not help. So OpenBLAS runs one thread inside the answer path at every batch size,
and torch and faiss keep theirs. The answers are the same: OpenBLAS splits a product's rows and columns among
threads, never the sum of one entry, so every score is bit-identical. threadpoolctl sets OpenBLAS's threads
process-wide; ``grasp serve`` answers from one worker thread.
"""

from __future__ import annotations

import functools
from contextlib import AbstractContextManager

from threadpoolctl import ThreadpoolController


@functools.cache
def _controller() -> ThreadpoolController:
    """The loaded thread pools, found once (finding them is the slow part; limiting them through the cached
    controller is cheap). The three BLAS builds are loaded first, on the first answer rather than at import, so that
    it finds them all."""
    import faiss  # noqa: F401
    import numpy  # noqa: F401
    import scipy.linalg  # noqa: F401

    return ThreadpoolController()


def answer_threads() -> AbstractContextManager:
    """A block in which the BLAS libraries run the one thread the answer path is fastest with."""
    return _controller().limit(limits=1, user_api="blas")
