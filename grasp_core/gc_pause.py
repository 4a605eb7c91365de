"""Python's cyclic garbage collector held off while a retriever loads.

Loading builds hundreds of thousands of small objects (the gazetteer's dictionary, the SKB's alias lists, parsed
trees) after the imports have left a quarter of a million for the collector to track. Every 700 new objects the
collector runs, and every tenth of its passes walks the older generations too, freeing next to nothing: a
noticeable part of a cold question's time (``benchmarks/results/cold_query.json``). Loading leaves no garbage
cycles worth collecting meanwhile, so the collector is paused for the block and resumed after it (anything left
for it is collected by its next pass as usual).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """A block in which the cyclic garbage collector does not run (resumed after it, if it was running)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
