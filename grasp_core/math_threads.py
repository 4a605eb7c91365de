"""How many threads the math libraries use while the answer path runs a batch.

A process on this path holds five math thread pools: torch's and faiss's OpenMP runtimes (each wheel ships its
own libgomp) and three OpenBLAS builds (numpy's, scipy's 32- and 64-bit). On a small batch each matrix is too small
to split, and after every parallel region each runtime's threads spin waiting for more work, on the same cores
the next stage needs. Measured on the 2-core machine (hpo artifacts, ms per question through ``GraspRetriever``,
two alternating rounds; ``docs/latency.md``):

=====  ===============  ================
batch  default threads  one thread
=====  ===============  ================
1      203-211          121-129
4      94               77-79
16     44-48            46-56
64     40-44            47-53
=====  ===============  ================

So a batch of at most :data:`ONE_THREAD_MAX_BATCH` questions runs every pool with one thread, and a larger batch
keeps the libraries' defaults. The answers are the same either way (60 of 60 hpo test questions, every score
bit-identical), so the choice changes time only. threadpoolctl sets OpenMP per calling thread and OpenBLAS
process-wide; ``grasp serve`` answers from one worker thread, so nothing else runs beside a limited batch there.
"""

from __future__ import annotations

import functools
from contextlib import AbstractContextManager, nullcontext

import faiss  # noqa: F401  (loaded first, so that its OpenMP runtime is among the pools controlled)
import numpy  # noqa: F401
import torch  # noqa: F401
from threadpoolctl import ThreadpoolController

ONE_THREAD_MAX_BATCH = 4  # questions; measured: 4 is faster with one thread, 16 with the defaults


@functools.cache
def _controller() -> ThreadpoolController:
    return ThreadpoolController()  # finding the loaded pools takes ~3 ms; limiting them through it, ~0.03 ms


def math_threads(batch: int) -> AbstractContextManager:
    """A block in which the math libraries use the threads a batch of ``batch`` questions answers fastest with."""
    return _controller().limit(limits=1) if batch <= ONE_THREAD_MAX_BATCH else nullcontext()
