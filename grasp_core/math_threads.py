"""How many threads the BLAS libraries use while the answer path runs: one.

A process on this path holds three OpenBLAS builds (numpy's and scipy's 32- and 64-bit) beside torch's and faiss's
OpenMP runtimes. The answer path's numpy products are small or memory-bound (a batch of query vectors against a
field's vectors, the reranker's features), so a second BLAS thread does little for them, and after every call
OpenBLAS's threads keep spinning, on the cores torch's and faiss's threads need next. Measured on the 2-core machine
(hpo artifacts, ms per question through ``GraspRetriever``, two or three alternating rounds; ``docs/latency.md``):

=====  ========  ====================  ==================
batch  defaults  every pool one thread  OpenBLAS one thread
=====  ========  ====================  ==================
1      205       112                   106
4      89-108    69-84                 61
16     50        50                    33-40
64     33-39     49                    31-35
=====  ========  ====================  ==================

So OpenBLAS runs one thread inside the answer path, at every batch size, and torch and faiss keep theirs. The answers
are the same (every score bit-identical: OpenBLAS splits a product's rows and columns among threads, never the sum of
one entry). threadpoolctl sets OpenBLAS's threads process-wide; ``grasp serve`` answers from one worker thread.
"""

from __future__ import annotations

import functools
from contextlib import AbstractContextManager

import faiss  # noqa: F401  (the libraries are loaded first, so that the controller finds every pool)
import numpy  # noqa: F401
import scipy.linalg  # noqa: F401
import torch  # noqa: F401
from threadpoolctl import ThreadpoolController


@functools.cache
def _controller() -> ThreadpoolController:
    return ThreadpoolController()  # finding the loaded pools takes ~3 ms; limiting them through it, ~0.03 ms


def answer_threads() -> AbstractContextManager:
    """A block in which the BLAS libraries run the one thread the answer path is fastest with."""
    return _controller().limit(limits=1, user_api="blas")
