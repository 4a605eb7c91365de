"""mFAR: multi-field adaptive retrieval (Li et al., ICLR 2025), trained on an SKB's train split.

Scoring. Every node is decomposed into fields (:mod:`grasp_core.text.fields`). Every field f has a
lexical scorer (BM25 over that field's texts, :class:`~grasp_core.text.bm25.LexicalIndex`); the fields named
in ``MFARConfig.dense_fields`` also have a dense scorer (cosine between the query and the field text).
A query-conditioned linear layer turns the query embedding into softmax weights over the scorers:

    s(q, d) = exp(t) · Σ_{(f,m) ∈ scorers} softmax(W e_q + b)_{f,m} · z_{f,m}(q, d)

``t`` is a learned log-temperature. W and b start at 0 (uniform weights).

Dense fields (the cpu/gpu choice). The paper gives every field both scorers. A dense scorer on a text or
relation field means embedding that field for every node: on ``hpo`` that is several times as many texts as
nodes, hours of MiniLM on two cores (estimated in ``benchmarks/results/text_throughput.json``).
The ``cpu`` default is therefore ``dense_fields=("doc", "name")``: their vectors are the node index's
(already built for the graph branch), so building mFAR encodes nothing, while every field keeps its
lexical scorer, which is where the field structure pays off most (exact names of brands, phenotypes,
neighbours). ``dense_fields=None`` (the ``gpu`` setting) embeds every field, as in the paper.

Normalization. BM25 scores live on a field-dependent scale (idf, length) while cosines live in
[-1, 1], so each raw score is standardized per scorer: ``z = (raw - mean) / std`` with mean and
std measured once, before training, over the candidate pools of (a sample of) training queries, i.e.
over exactly the kind of (query, node) pairs the model scores. The map is affine and query-independent,
so it never reorders one scorer's ranking, and it is frozen with the model (like batch norm at
inference). A node with no value for a field gets raw score 0 from both scorers.

Candidates. Scoring is exhaustive per scorer (one sparse product for BM25 for a whole batch of queries, one
matrix-vector product per query for the dense vectors), but only the union of each scorer's top
``candidates_per_field`` nodes is normalized, weighted and ranked, so the combination costs
O(scorers × candidates), not O(corpus). A query's scores never depend on the batch it is in: the dense
scores are one matrix-vector product per query (:func:`row_products`) and the field weights a per-row sum, because
a matrix product's entries change in their last bits with the batch's shape (OpenBLAS blocks and orders the sums by
it, and forwards a one-row product to another kernel), which reordered near-tied nodes between a question answered
alone and the same question in the evaluation's batch. The selection is vectorized over the batch: one top-k per
scorer over its [queries, N] score matrix (ties broken by smaller node id), then one row-wise sort of the concatenated picks to form the union (:class:`Pools`: padded [queries, m] candidate ids and
[queries, m, scorers] raw scores). A lexical scorer only nominates nodes with a positive score, a dense
scorer only nodes that have the field. From ``dense_ann_min_nodes`` nodes (100,000: Prime's size, not hpo's) the
exact product is the answer path's largest cost after the encoder, so a dense scorer's nominees come from an HNSW
index over the field's vectors instead (built on one thread, saved with the index), and the union's raw dense scores
are then computed exactly for the union only; training and serving share this path.

Training: :mod:`grasp_core.text.mfar_train`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

import faiss
import numpy as np
import torch
from tqdm.auto import tqdm

from grasp_core.embed.config import EncoderConfig, IndexConfig
from grasp_core.embed.encoder import Encoder, load_encoder
from grasp_core.embed.node_embeddings import texts_hash
from grasp_core.embed.vector_index import NodeIndex, filled, hnsw_index
from grasp_core.errors import CorruptArtifactError, GraspError, MissingArtifactError
from grasp_core.io import atomic_dir, atomic_file, is_complete, read_json, write_json
from grasp_core.ranking import Ranking
from grasp_core.skb.format import SKB
from grasp_core.text.bm25 import LexicalIndex, tokenize
from grasp_core.text.config import BM25Config, MFARConfig
from grasp_core.text.fields import DOC, NAME, field_texts

QUERY_MAX_TOKENS = 512
LEXICAL, DENSE = "lexical", "dense"


class Pools(NamedTuple):
    """Candidate pools of a batch of queries, padded to one width ``m``.

    ``ids`` int64 [q, m]: each row's candidates in increasing node id, then ``-1`` padding;
    ``raw`` float32 [q, m, scorers]: their raw scores (0 at padding).
    """

    ids: np.ndarray
    raw: np.ndarray

    @property
    def valid(self) -> np.ndarray:
        return self.ids >= 0

    @classmethod
    def concat(cls, parts: Sequence[Pools], num_scorers: int) -> Pools:
        if not parts:
            return cls(np.zeros((0, 0), np.int64), np.zeros((0, 0, num_scorers), np.float32))
        width = max(p.ids.shape[1] for p in parts)
        ids = [np.pad(p.ids, ((0, 0), (0, width - p.ids.shape[1])), constant_values=-1) for p in parts]
        raw = [np.pad(p.raw, ((0, 0), (0, width - p.raw.shape[1]), (0, 0))) for p in parts]
        return cls(np.concatenate(ids), np.concatenate(raw))


class FieldIndex:
    """Per field: BM25 weights, and dense vectors for the dense fields (float32 in memory, float16 on disk)."""

    def __init__(
        self,
        fields: list[str],
        lexical: dict[str, LexicalIndex],
        dense: dict[str, np.ndarray],
        bm25: BM25Config,
        identity: str,
        ann: dict[str, faiss.Index] | None = None,
    ):
        self.fields = fields
        self.lexical = lexical
        self.dense = dense  # only the fields with a dense scorer
        self.bm25 = bm25
        self.identity = identity
        self.present = {f: _present(v) for f, v in dense.items()}
        self.ann = ann or {}  # dense fields whose nominees come from an HNSW index over the nodes that have them
        self._ann_rows = {f: np.flatnonzero(self.present[f]) for f in self.ann}
        self.scorers = [(f, m) for f in fields for m in (LEXICAL, DENSE) if m == LEXICAL or f in dense]

    @property
    def num_nodes(self) -> int:
        return self.lexical[self.fields[0]].num_nodes

    @property
    def num_scorers(self) -> int:
        return len(self.scorers)

    @property
    def scorer_names(self) -> list[str]:
        return [f"{f}/{m}" for f, m in self.scorers]

    @classmethod
    def build(
        cls,
        skb: SKB,
        index: NodeIndex | None,
        encoder: Encoder,
        cfg: MFARConfig = MFARConfig(),
        work_dir: str | Path | None = None,
    ) -> FieldIndex:
        """Index every field. With ``work_dir``, encoded field vectors are cached there and reused on a rerun.

        ``index`` supplies the doc and name vectors; it may be None only when neither is a dense field.
        """
        texts = field_texts(skb, cfg.max_neighbours)
        dense_fields = list(texts) if cfg.dense_fields is None else list(cfg.dense_fields)
        unknown = [f for f in dense_fields if f not in texts]
        if unknown:
            raise GraspError(
                f"MFARConfig.dense_fields names unknown fields {unknown}; the fields of "
                f"{skb.schema.name!r} are {list(texts)}"
            )
        if index is None and {DOC, NAME} & set(dense_fields):
            raise GraspError(
                "mFAR's doc and name dense scorers reuse the node index's vectors; pass the NodeIndex "
                "or leave doc and name out of MFARConfig.dense_fields"
            )
        n = skb.num_nodes
        lexical, dense = {}, {}
        for f in tqdm(list(texts), desc="mFAR fields", unit="field"):
            rows = np.flatnonzero([bool(t) for t in texts[f]])
            lexical[f] = LexicalIndex.build([texts[f][i] for i in rows], rows, n, cfg.bm25)
            if f not in dense_fields:
                continue
            if f in (DOC, NAME) and index is not None:  # checked above: index is given when these are dense
                vectors = index.vectors(f, np.arange(n))
            else:
                vectors = np.zeros((n, encoder.dim), np.float32)
                vectors[rows] = _encode_cached([texts[f][i] for i in rows], encoder, cfg.field_max_tokens, work_dir)
            dense[f] = vectors.astype(np.float16).astype(np.float32)  # what save/load round-trips
        ann = {}
        if n >= cfg.dense_ann_min_nodes:
            index_cfg = index.cfg if index is not None else IndexConfig()
            for f, vectors in dense.items():
                present = np.ascontiguousarray(vectors[_present(vectors)])
                ann[f] = filled(hnsw_index(vectors.shape[1], index_cfg), present)
        return cls(list(texts), lexical, dense, cfg.bm25, encoder.identity, ann)

    def raw_scores(self, query_tokens: Sequence[Sequence[str]], query_vecs: np.ndarray) -> list[np.ndarray]:
        """Per scorer (in ``self.scorers`` order): float32 [q, N] scores over the whole corpus."""
        return [self._row_scores(s, query_tokens, query_vecs) for s in range(self.num_scorers)]

    def _row_scores(self, scorer: int, query_tokens: Sequence[Sequence[str]], query_vecs: np.ndarray) -> np.ndarray:
        f, m = self.scorers[scorer]
        return self.lexical[f].scores(query_tokens) if m == LEXICAL else row_products(query_vecs, self.dense[f])

    def _ann_nominees(self, field: str, query_vecs: np.ndarray, k: int) -> np.ndarray:
        """int64 [q, k]: each query's top ``k`` nodes having ``field`` by its HNSW index (``N`` where it found
        fewer)."""
        _, local = self.ann[field].search(np.ascontiguousarray(query_vecs, np.float32), k)
        return np.where(local >= 0, self._ann_rows[field][np.maximum(local, 0)], self.num_nodes)

    def scores_at(
        self, query_tokens: Sequence[Sequence[str]], query_vecs: torch.Tensor, node_ids: np.ndarray
    ) -> torch.Tensor:
        """float32 [q, len(node_ids), scorers]: every scorer's score of the given nodes only.

        Differentiable in ``query_vecs`` (the dense scores), for encoder fine-tuning.
        """
        return torch.stack(
            [
                torch.from_numpy(self.lexical[f].scores_at(query_tokens, node_ids))
                if m == LEXICAL
                else query_vecs @ torch.from_numpy(self.dense[f][node_ids]).T
                for f, m in self.scorers
            ],
            dim=-1,
        )

    def nominees(self, scorer: int, scores: np.ndarray, k: int) -> np.ndarray:
        """int64 [q, <= k]: each query's top ``k`` nodes by this scorer (ties: smaller node id), ``N`` where
        ineligible.

        A lexical scorer only nominates nodes with a positive score, a dense scorer only nodes that have the field.
        A lexical scorer selects among the nodes some query of the batch scores above zero: a question's words
        match a small share of the corpus, and the top k of those columns (in node order, so the ties break the
        same) is the top k of the row, found without passes over the whole row.
        """
        f, m = self.scorers[scorer]
        values, columns = torch.from_numpy(scores), None
        if m == LEXICAL:
            columns = torch.from_numpy(np.flatnonzero((scores > 0).any(axis=0)))
            if not len(columns):
                return np.zeros((len(scores), 0), np.int64)
            values = values[:, columns]
        elif not self.present[f].all():
            values = values.masked_fill(~torch.from_numpy(self.present[f]), float("-inf"))
        floor = 0.0 if m == LEXICAL else float("-inf")
        ids = _top_k_ids(values, min(k, values.shape[1]), floor)
        ok = values.gather(1, ids) > floor
        if columns is not None:
            ids = columns[ids]
        return torch.where(ok, ids, self.num_nodes).numpy()

    def candidates(self, query_tokens: Sequence[Sequence[str]], query_vecs: np.ndarray, per_field: int) -> Pools:
        """The union of each scorer's top ``per_field`` eligible nodes, for the whole batch at once.

        Per scorer, one top-k over the [q, N] score matrix picks every query's nominees (:meth:`nominees`);
        the union is a row-wise sort of the concatenated nominees with duplicates and ineligible picks
        pushed to the end as padding.
        """
        q, n = len(query_vecs), self.num_nodes
        k = min(per_field, n)
        scores: list[np.ndarray | None] = []  # a scorer's [q, N] row scores; None for HNSW nominees
        picks = []
        for s, (f, m) in enumerate(self.scorers):
            if m == DENSE and f in self.ann:
                scores.append(None)
                picks.append(self._ann_nominees(f, query_vecs, k))
            else:
                row = self._row_scores(s, query_tokens, query_vecs)
                scores.append(row)
                picks.append(self.nominees(s, row, k))
        ids = np.sort(np.concatenate(picks, axis=1), axis=1) if picks else np.zeros((q, 0), np.int64)
        ids[:, 1:][ids[:, 1:] == ids[:, :-1]] = n  # duplicates become padding
        ids = np.sort(ids, axis=1)
        ids = ids[:, : int((ids < n).sum(1).max(initial=0))]
        pad = ids == n
        safe = np.where(pad, 0, ids)
        raw = np.stack(
            [
                np.take_along_axis(values, safe, 1)
                if values is not None
                else np.stack([self.dense[f][row] @ v for row, v in zip(safe, query_vecs)])
                for (f, _), values in zip(self.scorers, scores)
            ],
            axis=-1,
        )
        raw[pad] = 0
        return Pools(np.where(pad, -1, ids).astype(np.int64), raw.astype(np.float32))

    def save(self, path: Path) -> None:
        for i, f in enumerate(self.fields):
            sub = path / f"field_{i:03d}"
            sub.mkdir()
            self.lexical[f].save(sub)
            if f in self.dense:
                np.save(sub / "dense.npy", self.dense[f].astype(np.float16))
            if f in self.ann:
                faiss.write_index(self.ann[f], str(sub / "dense.hnsw"))
        write_json(
            path / "fields.json",
            {
                "fields": self.fields,
                "dense_fields": list(self.dense),
                "ann_fields": list(self.ann),
                "bm25": asdict(self.bm25),
                "identity": self.identity,
            },
        )

    @classmethod
    def load(cls, path: Path) -> FieldIndex:
        meta = read_json(path / "fields.json")
        lexical, dense, ann = {}, {}, {}
        for i, f in enumerate(meta["fields"]):
            sub = path / f"field_{i:03d}"
            lexical[f] = LexicalIndex.load(sub)
            if f not in meta.get("dense_fields", meta["fields"]):  # indexes saved before dense_fields: all dense
                continue
            try:
                dense[f] = np.load(sub / "dense.npy").astype(np.float32)
                if f in meta.get("ann_fields", []):
                    ann[f] = faiss.read_index(str(sub / "dense.hnsw"))
            except (OSError, ValueError, RuntimeError) as exc:
                raise CorruptArtifactError(f"{sub}: dense vectors unreadable ({exc}); rebuild the mFAR index") from exc
        return cls(meta["fields"], lexical, dense, BM25Config(**meta["bm25"]), meta["identity"], ann)


def _present(vectors: np.ndarray) -> np.ndarray:
    """bool [N]: the nodes that have the field (a node without it has the zero vector)."""
    return np.asarray(vectors.any(axis=1))


def _top_k_ids(values: torch.Tensor, k: int, floor: float = float("-inf")) -> torch.Tensor:
    """int64 [q, k]: column indices of each row's ``k`` largest values (in no order), ties broken by smaller index.

    Values ``<= floor`` are never used by the caller, so their ties are not broken. ``torch.topk`` picks
    the top k; only the rows where it had to choose among values equal to the k-th largest (and above
    ``floor``) are redone exactly: every value above the k-th is kept and the equal ones fill the
    remaining places in index order. So the selection is the first k of ``np.lexsort((index, -value))``
    whatever the batch, with no sort of the whole row.
    """
    top = torch.topk(values, k, dim=1, sorted=False)
    kth = top.values.min(dim=1, keepdim=True).values
    ambiguous = ((values == kth).sum(1) > (top.values == kth).sum(1)) & (kth[:, 0] > floor)
    rows = ambiguous.nonzero()[:, 0]
    if not len(rows):
        return top.indices
    sub, sub_kth = values[rows], kth[rows]
    above, tie = sub > sub_kth, sub == sub_kth
    take = above | (tie & (tie.cumsum(1) <= k - above.sum(1, keepdim=True)))
    ids = top.indices.clone()
    ids[rows] = take.nonzero()[:, 1].view(len(rows), k)
    return ids


def row_products(query_vecs: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """float32 [q, N]: each query's inner product with every row of ``vectors``, one matrix-vector product per
    query, so that a query's scores are bit-identical alone and in any batch (a matrix product's are not)."""
    out = np.empty((len(query_vecs), len(vectors)), np.float32)
    for row, vec in zip(out, np.asarray(query_vecs, np.float32)):
        np.matmul(vectors, vec, out=row)
    return out


def _encode_cached(texts: list[str], encoder: Encoder, max_tokens: int, work_dir: str | Path | None) -> np.ndarray:
    if work_dir is None:
        return encoder.encode(texts, max_tokens, show_progress=True)
    file = Path(work_dir) / f"{texts_hash([encoder.identity, str(max_tokens), *texts])[:24]}.npy"
    if file.exists():
        try:
            cached = np.load(file)
            if cached.shape == (len(texts), encoder.dim):
                return cached.astype(np.float32)
        except (OSError, ValueError, EOFError):
            pass
    vectors = encoder.encode(texts, max_tokens, show_progress=True)
    with atomic_file(file, "wb") as handle:
        np.save(handle, vectors.astype(np.float16))
    return vectors


class FieldWeights(torch.nn.Module):
    """Query embedding -> softmax weights over scorers; score = exp(t) · Σ weight · normalized score."""

    def __init__(self, dim: int, num_scorers: int):
        super().__init__()
        self.linear = torch.nn.Linear(dim, num_scorers)
        torch.nn.init.zeros_(self.linear.weight)
        torch.nn.init.zeros_(self.linear.bias)
        self.log_temperature = torch.nn.Parameter(torch.zeros(()))
        self.mean: torch.Tensor
        self.std: torch.Tensor
        self.register_buffer("mean", torch.zeros(num_scorers))
        self.register_buffer("std", torch.ones(num_scorers))

    def weights(self, query_vecs: torch.Tensor) -> torch.Tensor:
        # the linear layer as a per-row sum: a matrix product's last bits depend on the batch's shape
        logits = (query_vecs[:, None, :] * self.linear.weight).sum(-1) + self.linear.bias
        return torch.softmax(logits, dim=-1)

    def forward(self, query_vecs: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        """query_vecs [q, d], raw [q, n, scorers] -> scores [q, n]."""
        z = (raw - self.mean) / self.std
        return self.log_temperature.exp() * (self.weights(query_vecs)[:, None, :] * z).sum(-1)


class MFARRetriever:
    def __init__(self, fields: FieldIndex, model: FieldWeights, encoder: Encoder, cfg: MFARConfig = MFARConfig()):
        self.fields = fields
        self.model = model.eval()
        self.encoder = encoder
        self.cfg = cfg

    def encode_queries(self, queries: Sequence[str]) -> tuple[list[list[str]], np.ndarray]:
        return tokenize(queries, self.fields.bm25), self.encoder.encode(list(queries), QUERY_MAX_TOKENS)

    def pools(self, queries: Sequence[str]) -> tuple[np.ndarray, Pools]:
        """Query vectors [q, d] and the queries' candidate pools."""
        tokens, vecs = self.encode_queries(queries)
        return vecs, self.pools_of(tokens, vecs)

    def pools_of(self, tokens: Sequence[Sequence[str]], vecs: np.ndarray) -> Pools:
        """Candidate pools of already encoded queries, ``query_batch_size`` queries at a time."""
        size = self.cfg.query_batch_size
        return Pools.concat(
            [
                self.fields.candidates(tokens[i : i + size], vecs[i : i + size], self.cfg.candidates_per_field)
                for i in range(0, len(vecs), size)
            ],
            self.fields.num_scorers,
        )

    def score_pools(self, vecs: np.ndarray, pools: Pools) -> np.ndarray:
        """float32 [q, m]: the model's score of every candidate, ``-inf`` at padding."""
        with torch.no_grad():
            scores = self.model(torch.from_numpy(vecs), torch.from_numpy(pools.raw)).numpy()
        return np.where(pools.valid, scores, -np.inf).astype(np.float32)

    def rank(self, queries: Sequence[str], k: int = 100) -> list[Ranking]:
        queries = list(queries)
        out: list[Ranking] = []
        for start in range(0, len(queries), self.cfg.query_batch_size):
            vecs, pools = self.pools(queries[start : start + self.cfg.query_batch_size])
            out += rankings_of(pools, self.score_pools(vecs, pools), k)
        return out

    def field_weights(self, queries: Sequence[str]) -> np.ndarray:
        """float32 [q, scorers]: the weights the model gives each (field, scorer) for each query."""
        with torch.no_grad():
            return self.model.weights(torch.from_numpy(self.encoder.encode(list(queries), QUERY_MAX_TOKENS))).numpy()

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        with atomic_dir(path) as tmp:
            self.write(tmp)
        return path

    def write(self, directory: Path) -> None:
        """Write the retriever's files into the existing ``directory`` (:meth:`save` does it atomically)."""
        self.fields.save(directory)
        torch.save(self.model.state_dict(), directory / "weights.pt")
        write_json(
            directory / "mfar.json",
            {"config": asdict(self.cfg), "identity": self.encoder.identity, "scorers": self.fields.scorer_names},
        )
        if self.cfg.finetune_encoder:
            self.encoder.save(directory / "query_encoder")

    @classmethod
    def load(cls, path: str | Path, encoder: Encoder) -> MFARRetriever:
        """Load a saved retriever; ``encoder`` must be the one its fields were embedded with.

        A retriever trained with ``finetune_encoder`` encodes queries with its own saved query encoder.
        """
        path = Path(path)
        if not is_complete(path):
            raise MissingArtifactError(f"mFAR retriever at {path} is missing or incomplete; train it with train_mfar")
        meta = read_json(path / "mfar.json")
        if meta["identity"] != encoder.identity:
            raise GraspError(
                f"mFAR retriever at {path} was built with encoder {meta['identity']!r}, "
                f"not {encoder.identity!r}; load it with that encoder or retrain"
            )
        bm25 = BM25Config(**meta["config"].pop("bm25"))
        dense_fields = meta["config"].pop("dense_fields", None)  # JSON turned the tuple into a list
        cfg = MFARConfig(
            **meta["config"], bm25=bm25, dense_fields=None if dense_fields is None else tuple(dense_fields)
        )
        fields = FieldIndex.load(path)
        model = FieldWeights(encoder.dim, fields.num_scorers)
        try:
            model.load_state_dict(torch.load(path / "weights.pt", weights_only=True))
        except (OSError, RuntimeError) as exc:
            raise CorruptArtifactError(f"{path / 'weights.pt'}: unreadable mFAR weights ({exc}); retrain") from exc
        if cfg.finetune_encoder:
            pooling = encoder.identity.split("pooling=")[1].split("|")[0]
            encoder = load_encoder(EncoderConfig(model_path=str(path / "query_encoder"), pooling=pooling))  # type: ignore[arg-type]  # read back from the identity it wrote
        return cls(fields, model, encoder, cfg)


def rankings_of(pools: Pools, scores: np.ndarray, k: int | None) -> list[Ranking]:
    return [Ranking.from_scores(ids[ok], s[ok], k) for ids, s, ok in zip(pools.ids, scores, pools.valid)]
