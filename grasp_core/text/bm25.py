"""BM25 over node documents with ``bm25s`` (``docs/design.md``, Text branch).

Tokenization (one function, :func:`tokenize`, shared by documents, queries and mFAR's per-field indexes):
lower-case, the scikit-learn ``CountVectorizer`` token pattern ``\\b\\w\\w+\\b`` (so one-character tokens
are dropped), bm25s' English stopword list, then the Snowball English stemmer of PyStemmer (the Porter2
algorithm; stemming runs once per distinct token). Query and document go through the same function, so a
stem in the query matches a stem in the document.

Scoring: bm25s precomputes the BM25 weight of every (token, document) pair at index time. We keep that
weight matrix as a CSR matrix ``W [num_nodes, vocab]`` and score a *batch* of queries with one sparse
product ``Q @ W.T`` (``Q`` = query token counts), which gives exactly bm25s' score (a repeated query token
counts twice, as in bm25s and rank_bm25) for all queries at once. Nodes that share no token with a query
score 0 and are never returned. The default variant is bm25s' (and stark-qa's) ``lucene`` with
``k1 = 1.5, b = 0.75``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import bm25s
import numpy as np
import scipy.sparse as sp
import Stemmer

from grasp_core.errors import CorruptArtifactError, MissingArtifactError
from grasp_core.io import atomic_dir, is_complete, read_json, write_json
from grasp_core.ranking import Ranking
from grasp_core.skb.format import SKB
from grasp_core.text.config import BM25Config
from grasp_core.text.fields import relation_texts

_CSR_PARTS = ("data", "indices", "indptr", "shape")  # the weight matrix on disk: weights.<part>.npy


def tokenize(texts: Sequence[str], cfg: BM25Config = BM25Config()) -> list[list[str]]:
    """Lower-cased, stopword-filtered, stemmed tokens of each text (see the module docstring)."""
    stemmer = Stemmer.Stemmer(cfg.stemmer) if cfg.stemmer else None
    return bm25s.tokenize(
        list(texts), stopwords=cfg.stopwords or [], stemmer=stemmer, return_ids=False, show_progress=False
    )


class LexicalIndex:
    """BM25 weights of a set of texts, one per row, scored in batches by a sparse product.

    ``rows`` are the node ids the texts belong to; nodes without a text (absent rows) are simply not
    in the collection (they do not count in N or in the average length) and score 0.
    """

    def __init__(
        self,
        weights: sp.csr_matrix,
        vocab: dict[str, int],
        cfg: BM25Config,
        rows: np.ndarray,
        nonoccurrence: np.ndarray | None = None,
    ):
        self.weights = weights  # float32 [num_nodes, vocab]
        self.vocab = vocab
        self.cfg = cfg
        self.rows = rows  # node ids in the collection
        # BM25L/BM25+ give every document of the collection a score for each query token it lacks;
        # bm25s stores the weights minus that baseline, which is added back here
        self.nonoccurrence = nonoccurrence

    @classmethod
    def build(
        cls, texts: Sequence[str], rows: np.ndarray, num_nodes: int, cfg: BM25Config = BM25Config()
    ) -> LexicalIndex:
        tokens = tokenize(texts, cfg)
        if not any(tokens):
            return cls(sp.csr_matrix((num_nodes, 0), dtype=np.float32), {}, cfg, np.asarray(rows, np.int64))
        model = bm25s.BM25(k1=cfg.k1, b=cfg.b, delta=cfg.delta, method=cfg.method, idf_method=cfg.idf_method)
        # Token ids in first-occurrence order: given strings, bm25s numbers tokens in a set's order, which changes
        # with Python's hash seed from run to run; the sparse product then sums in another order and the scores
        # (hence some rankings and everything trained on them) differed between two runs of the same pipeline.
        vocab: dict[str, int] = {}
        ids = [[vocab.setdefault(t, len(vocab)) for t in doc] for doc in tokens]
        model.index((ids, vocab), show_progress=False)
        s = model.scores
        by_token = sp.csc_matrix((s["data"], s["indices"], s["indptr"]), shape=(s["num_docs"], len(s["indptr"]) - 1))
        # move collection positions to node ids
        placed = sp.csr_matrix(
            (np.ones(len(rows), np.float32), (np.asarray(rows), np.arange(len(rows)))), shape=(num_nodes, len(rows))
        )
        weights = (placed @ by_token.tocsr()).astype(np.float32).tocsr()
        return cls(weights, dict(model.vocab_dict), cfg, np.asarray(rows, np.int64), model.nonoccurrence_array)

    @property
    def num_nodes(self) -> int:
        return self.weights.shape[0]

    @functools.cached_property
    def by_token(self) -> sp.csr_matrix:
        """The weights transposed, [vocab, num_nodes] CSR, made once: scoring every node against a query then
        reads only its tokens' rows (``q @ weights.T`` converted the whole matrix on every call)."""
        return self.weights.T.tocsr()

    def query_matrix(self, query_tokens: Sequence[Sequence[str]]) -> sp.csr_matrix:
        """Token counts of each query over this index's vocabulary (unknown tokens dropped)."""
        rows, cols = [], []
        for i, tokens in enumerate(query_tokens):
            ids = [self.vocab[t] for t in tokens if t in self.vocab]
            rows += [i] * len(ids)
            cols += ids
        return sp.csr_matrix(
            (np.ones(len(rows), np.float32), (rows, cols)), shape=(len(query_tokens), self.weights.shape[1])
        )

    def scores(self, query_tokens: Sequence[Sequence[str]]) -> np.ndarray:
        """Dense float32 [num_queries, num_nodes] BM25 scores."""
        return self.scores_at(query_tokens, None)

    def scores_at(self, query_tokens: Sequence[Sequence[str]], node_ids: np.ndarray | None) -> np.ndarray:
        """float32 [num_queries, len(node_ids)]: the scores of the given nodes only (None = all nodes)."""
        q = self.query_matrix(query_tokens)
        by_token = self.by_token if node_ids is None else self.weights[np.asarray(node_ids, np.int64)].T
        scores = np.asarray((q @ by_token).todense(), np.float32)
        if self.nonoccurrence is not None:
            member = np.zeros(self.num_nodes, bool)
            member[self.rows] = True
            member = member if node_ids is None else member[np.asarray(node_ids, np.int64)]
            scores += (q @ self.nonoccurrence.astype(np.float32))[:, None] * member[None, :]
        return scores

    def save(self, path: Path) -> None:
        """Write into an existing directory ``path`` (the caller owns atomicity). Plain ``.npy`` files, not scipy's
        ``.npz``: an identical index must be identical bytes wherever it is built (its digest is its data version),
        and a zip's headers follow the Python that wrote it (3.11.7 wrote zip64 headers where the image's 3.11.2 did
        not, and their zlib deflated the same arrays to other bytes)."""
        for part in _CSR_PARTS:
            np.save(path / f"weights.{part}.npy", np.asarray(getattr(self.weights, part)))
        np.save(path / "rows.npy", self.rows)
        if self.nonoccurrence is not None:
            np.save(path / "nonoccurrence.npy", self.nonoccurrence)
        write_json(path / "vocab.json", self.vocab)
        write_json(path / "bm25.json", asdict(self.cfg))

    @classmethod
    def load(cls, path: Path) -> LexicalIndex:
        try:
            data, indices, indptr, shape = (np.load(path / f"weights.{part}.npy") for part in _CSR_PARTS)
            weights = sp.csr_matrix((data, indices, indptr), shape=tuple(shape))
            vocab = read_json(path / "vocab.json")
            cfg = BM25Config(**read_json(path / "bm25.json"))
            rows = np.load(path / "rows.npy")
            extra = path / "nonoccurrence.npy"
            nonoccurrence = np.load(extra) if extra.exists() else None
        except (OSError, ValueError, TypeError) as exc:
            raise CorruptArtifactError(f"{path}: unreadable BM25 index ({exc}); rebuild it") from exc
        return cls(weights, vocab, cfg, rows, nonoccurrence)


def top_k(scores: np.ndarray, k: int, positive_only: bool = True) -> list[Ranking]:
    """Rows of a [q, N] score matrix -> rankings of their k best (by default only scores > 0)."""
    out = []
    k = min(k, scores.shape[1])
    for row in scores:
        cand = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
        if positive_only:
            cand = cand[row[cand] > 0]
        out.append(Ranking.from_scores(cand, row[cand], k))
    return out


class BM25Retriever:
    """BM25 over every node's document (type + name + text fields [+ linearized relations])."""

    def __init__(self, index: LexicalIndex):
        self.index = index

    @classmethod
    def build(cls, skb: SKB, cfg: BM25Config = BM25Config()) -> BM25Retriever:
        docs = skb.documents()
        if cfg.include_relations:
            for rel, texts in relation_texts(skb, cfg.max_neighbours).items():
                docs = [f"{d}\n{rel}: {t}" if t else d for d, t in zip(docs, texts)]
        return cls(LexicalIndex.build(docs, np.arange(skb.num_nodes), skb.num_nodes, cfg))

    def rank(self, queries: Sequence[str], k: int = 100, batch_size: int = 256) -> list[Ranking]:
        out: list[Ranking] = []
        for start in range(0, len(queries), batch_size):
            tokens = tokenize(queries[start : start + batch_size], self.index.cfg)
            out += top_k(self.index.scores(tokens), k)
        return out

    def save(self, path: str | Path) -> Path:
        with atomic_dir(path) as tmp:
            self.index.save(tmp)
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> BM25Retriever:
        path = Path(path)
        if not is_complete(path):
            raise MissingArtifactError(
                f"BM25 index at {path} is missing or incomplete; build it with BM25Retriever.build"
            )
        return cls(LexicalIndex.load(path))
