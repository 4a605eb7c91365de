"""Dense retrieval: cosine between the query and every node document (``docs/design.md``, Text branch).

Queries are encoded with the same encoder as the document index (no instruction prefix, as the paper
does for Qwen3-Embedding) and searched in the document index of every node type at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from grasp_core.embed.encoder import Encoder
from grasp_core.embed.vector_index import NodeIndex
from grasp_core.ranking import Ranking

QUERY_MAX_TOKENS = 512  # queries are short; this only guards against pathological inputs


class DenseRetriever:
    def __init__(self, index: NodeIndex, encoder: Encoder):
        self.index = index
        self.encoder = encoder

    def rank(self, queries: Sequence[str], k: int = 100) -> list[Ranking]:
        if not len(queries):
            return []
        scores, ids = self.index.search(None, "doc", self.encoder.encode(list(queries), QUERY_MAX_TOKENS), k)
        return [Ranking(i[i >= 0].astype(np.int64), s[i >= 0].astype(np.float32)) for s, i in zip(scores, ids)]
