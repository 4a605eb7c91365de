"""Per node type, one faiss index over node names and one over node documents (``docs/design.md``).

The name index holds one vector per name and per alias (the SKB's ``aliases`` column) with the node that
owns it; a name search answers each node once, with its best vector's cosine (a node's name score is the
max over its name and aliases), so a synonym or a lay term finds its node as its name does.

Vectors are L2-normalized float32, so inner product is cosine. A type's document index is an exact
``IndexFlatIP`` below ``IndexConfig.hnsw_min_size`` nodes and an ``IndexHNSWFlat`` (inner product metric) from
there; its name index likewise from ``IndexConfig.name_hnsw_min_size`` rows (100,000), sooner, because every
question searches it with its spans and mentions and the exact scan is memory-bound. Not sooner still: at hpo's
size HNSW name indexes made extraction faster and left almost every link unchanged, but the pipeline retrained on
those links scored lower on validation (``benchmarks/results/name_index_linking_hpo.json``,
``benchmarks/results/validation_hpo_names-*.json``; ``docs/latency.md``). An HNSW index is built on one thread, so
the same vectors give the same graph and the same answers in every run.

``search`` answers with global node ids; a search over all nodes (``node_type=None``) searches every type's index
and merges the per-type top-k (exact, since each per-type top-k contains that type's share of the global top-k).

Speed: faiss-cpu only uses BLAS (one matrix product) when a batch has at least
``faiss.cvar.distance_compute_blas_threshold`` queries; in the faiss build this project pins the default is
128000 (not the 20 of older releases), so every realistic batch would run the per-query scan. With the threshold
at 1 a batch is one matrix product, faster than both the per-query scan and torch's matmul + topk, and a single
query against a large index costs about the same either way (``benchmarks/faiss_vs_torch.py`` →
``benchmarks/results/faiss_vs_torch.json``). So faiss stays the index and ``IndexConfig.blas_threshold`` = 1 is
applied (process-wide: faiss has one global) whenever an index is built or loaded.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import faiss
import numpy as np

from grasp_core.embed.config import IndexConfig
from grasp_core.embed.node_embeddings import KINDS, NodeEmbeddings
from grasp_core.errors import CorruptArtifactError, MissingArtifactError
from grasp_core.io import atomic_dir, is_complete, read_json, write_json
from grasp_core.skb.format import SKB


class NodeIndex:
    """Name and document indexes per node type over one set of :class:`NodeEmbeddings`."""

    def __init__(
        self,
        ids: dict[str, np.ndarray],
        indexes: dict[tuple[str, str], faiss.Index],
        embeddings: NodeEmbeddings,
        cfg: IndexConfig,
    ):
        self.ids = ids  # node type -> global node ids (int64), in document index order
        self.indexes = indexes  # (node type, kind) -> faiss index
        self.embeddings = embeddings
        self.cfg = cfg
        # node type -> the owner of each name-index row (names first, in ``ids`` order, then aliases)
        self.name_owner = name_owners(ids, embeddings)
        # per type, the most name-index rows one node has: a search this many times deeper finds k distinct nodes
        self._depth = {t: _most_rows(o) for t, o in self.name_owner.items()}
        faiss.cvar.distance_compute_blas_threshold = cfg.blas_threshold

    @property
    def node_types(self) -> list[str]:
        return list(self.ids)

    @classmethod
    def build(cls, skb: SKB, embeddings: NodeEmbeddings, cfg: IndexConfig = IndexConfig()) -> NodeIndex:
        if len(embeddings.name) != skb.num_nodes:
            raise ValueError(f"embeddings cover {len(embeddings.name)} nodes, the SKB has {skb.num_nodes}")
        ids = {t: skb.ids_of_type(t) for t in skb.schema.node_types}
        indexes = {}
        all_names, _ = embeddings.name_vectors()
        for t, type_ids in ids.items():
            for kind in KINDS:
                rows = type_ids if kind == "doc" else _name_rows(type_ids, embeddings)
                source = embeddings.doc if kind == "doc" else all_names
                vectors = np.ascontiguousarray(source[rows], dtype=np.float32)
                indexes[t, kind] = filled(new_index(vectors.shape[1], len(rows), cfg, kind), vectors)
        return cls(ids, indexes, embeddings, cfg)

    def search(self, node_type: str | None, kind: str, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` nodes of ``node_type`` (None = all) by cosine to each query.

        Returns (scores float32 [q, k], node_ids int64 [q, k]), best first; when fewer than ``k`` nodes
        exist the rest is padded with id -1 and score -inf.
        """
        if kind not in KINDS:
            raise ValueError(f"index kind must be one of {KINDS}, not {kind!r}")
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        types = self.node_types if node_type is None else [node_type]
        unknown = [t for t in types if t not in self.ids]
        if unknown:
            raise ValueError(f"unknown node type {unknown[0]!r} (the index has {self.node_types})")
        scores: list[np.ndarray] = []
        ids: list[np.ndarray] = []
        for t in types:
            if kind == "name" and self._depth[t] > 1:
                s, found = self._search_names(t, queries, k)
            else:
                s, local = self.indexes[t, kind].search(queries, k) if len(self.ids[t]) else _empty(len(queries), k)
                found = np.where(local >= 0, self.ids[t][np.maximum(local, 0)], -1)
            ids.append(found)
            scores.append(np.where(found >= 0, s, -np.inf).astype(np.float32))
        if len(types) == 1:
            return scores[0], ids[0]
        all_scores, all_ids = np.concatenate(scores, axis=1), np.concatenate(ids, axis=1)
        order = np.argsort(-all_scores, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(all_scores, order, 1), np.take_along_axis(all_ids, order, 1)

    def _search_names(self, node_type: str, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` distinct nodes of the name index (names and aliases), each at its best row's cosine.

        Vectorised over the queries: the hits (best first) are mapped to their owners, each node's first (best)
        hit is kept and the first ``k`` of those are moved to the front, in order."""
        index, owner = self.indexes[node_type, "name"], self.name_owner[node_type]
        depth = min(index.ntotal, k * self._depth[node_type])
        s, local = index.search(queries, depth)
        nodes = np.where(local >= 0, owner[np.maximum(local, 0)], -1)
        order = np.argsort(nodes, axis=1, kind="stable")  # a node's hits together, its best first
        grouped = np.take_along_axis(nodes, order, 1)
        first_sorted = np.ones_like(grouped, bool)
        first_sorted[:, 1:] = grouped[:, 1:] != grouped[:, :-1]
        first = np.empty_like(first_sorted)
        np.put_along_axis(first, order, first_sorted, 1)
        first &= nodes >= 0
        front = np.argsort(~first, axis=1, kind="stable")[:, :k]  # each row's kept hits, best first
        kept = np.take_along_axis(first, front, 1)
        out_s, out_i = _empty(len(queries), k)
        width = front.shape[1]
        out_s[:, :width] = np.where(kept, np.take_along_axis(s, front, 1), -np.inf)
        out_i[:, :width] = np.where(kept, np.take_along_axis(nodes, front, 1), -1)
        return out_s, out_i

    def vectors(self, kind: str, node_ids: np.ndarray) -> np.ndarray:
        """The float32 vectors of ``node_ids`` ([n, dim])."""
        return self.embeddings.of(kind)[np.asarray(node_ids, np.int64)]

    def save(self, out_dir: str | Path) -> Path:
        out_dir = Path(out_dir)
        with atomic_dir(out_dir) as tmp:
            types = []
            for i, (t, type_ids) in enumerate(self.ids.items()):
                np.save(tmp / f"{i:03d}.ids.npy", type_ids)
                for kind in KINDS:
                    faiss.write_index(self.indexes[t, kind], str(tmp / f"{i:03d}.{kind}.faiss"))
                types.append(t)
            write_json(
                tmp / "meta.json",
                {
                    "types": types,
                    "identity": self.embeddings.identity,
                    "num_nodes": len(self.embeddings.name),
                    "num_aliases": sum(len(o) for o in self.name_owner.values()) - len(self.embeddings.name),
                    "config": asdict(self.cfg),
                },
            )
        return out_dir

    @classmethod
    def load(cls, out_dir: str | Path, embeddings: NodeEmbeddings) -> NodeIndex:
        out_dir = Path(out_dir)
        if not is_complete(out_dir):
            raise MissingArtifactError(
                f"node index at {out_dir} is missing or incomplete; build it with NodeIndex.build"
            )
        meta = read_json(out_dir / "meta.json")
        aliases = 0 if embeddings.alias is None else len(embeddings.alias)
        if (
            meta["identity"] != embeddings.identity
            or meta["num_nodes"] != len(embeddings.name)
            or meta.get("num_aliases", 0) != aliases
        ):
            raise MissingArtifactError(
                f"node index at {out_dir} was built from other embeddings ({meta['identity']}, {meta['num_nodes']} "
                f"nodes) than the given ones ({embeddings.identity}, {len(embeddings.name)} nodes); rebuild it"
            )
        cfg = IndexConfig(**meta["config"])
        ids: dict[str, np.ndarray] = {}
        indexes = {}
        for i, t in enumerate(meta["types"]):
            try:
                ids[t] = np.load(out_dir / f"{i:03d}.ids.npy")
                for kind in KINDS:
                    # memory-mapped: a first answer reads only the pages it searches (the indexes are read-only
                    # once built; an artifact is rewritten into a new directory, never in place)
                    indexes[t, kind] = faiss.read_index(str(out_dir / f"{i:03d}.{kind}.faiss"), faiss.IO_FLAG_MMAP_IFC)
            except (ValueError, OSError, EOFError, RuntimeError) as exc:
                raise CorruptArtifactError(
                    f"node index at {out_dir}, type {t!r}: unreadable ({exc}); rebuild it"
                ) from exc
            if indexes[t, "doc"].ntotal != len(ids[t]):
                raise CorruptArtifactError(f"node index at {out_dir}, type {t!r}: index size does not match its ids")
            for kind in KINDS:
                index = indexes[t, kind]
                if isinstance(index, faiss.IndexHNSW):
                    index.hnsw.efSearch = cfg.hnsw_ef_search
        loaded = cls(ids, indexes, embeddings, cfg)
        for t in ids:
            if indexes[t, "name"].ntotal != len(loaded.name_owner[t]):
                raise CorruptArtifactError(f"node index at {out_dir}, type {t!r}: name index size does not match")
        return loaded


def name_owners(ids: dict[str, np.ndarray], embeddings: NodeEmbeddings) -> dict[str, np.ndarray]:
    """Per node type, the node owning each row of its name index: its nodes' names, then their aliases."""
    owner = embeddings.alias_owner if embeddings.alias_owner is not None else np.zeros(0, np.int64)
    return {t: np.concatenate([type_ids, owner[np.isin(owner, type_ids)]]) for t, type_ids in ids.items()}


def _name_rows(type_ids: np.ndarray, embeddings: NodeEmbeddings) -> np.ndarray:
    """Rows of ``NodeEmbeddings.name_vectors()`` for one type's name index (names, then that type's aliases)."""
    owner = embeddings.alias_owner if embeddings.alias_owner is not None else np.zeros(0, np.int64)
    alias_rows = len(embeddings.name) + np.flatnonzero(np.isin(owner, type_ids))
    return np.concatenate([type_ids, alias_rows]).astype(np.int64)


def _most_rows(owner: np.ndarray) -> int:
    return int(np.bincount(owner).max()) if len(owner) else 1


def new_index(dim: int, size: int, cfg: IndexConfig, kind: str) -> faiss.Index:
    """The empty ``kind`` index a node type with ``size`` vectors of that kind gets: exact below its threshold
    (``cfg.name_hnsw_min_size`` for names, ``cfg.hnsw_min_size`` for documents), HNSW from it."""
    if size < (cfg.name_hnsw_min_size if kind == "name" else cfg.hnsw_min_size):
        return faiss.IndexFlatIP(dim)
    return hnsw_index(dim, cfg)


def hnsw_index(dim: int, cfg: IndexConfig) -> faiss.IndexHNSWFlat:
    """An empty inner-product HNSW index with ``cfg``'s graph degree and candidate list sizes."""
    index = faiss.IndexHNSWFlat(dim, cfg.hnsw_m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = cfg.hnsw_ef_construction
    index.hnsw.efSearch = cfg.hnsw_ef_search
    return index


def filled(index: faiss.Index, vectors: np.ndarray) -> faiss.Index:
    """``index`` with ``vectors`` added; an HNSW graph is built on one thread (threads insert in a racing order, so
    the graph, and then a search's answers, would differ from run to run)."""
    if not isinstance(index, faiss.IndexHNSW):
        index.add(vectors)
        return index
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        index.add(vectors)
    finally:
        faiss.omp_set_num_threads(threads)
    return index


def _empty(q: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full((q, k), -np.inf, np.float32), np.full((q, k), -1, np.int64)
