"""A dataset's artifacts and the components built from them, each loaded once, on first use.

Pipeline steps, evaluation and the retriever all read through a :class:`Workspace`, so a component is
built the same way everywhere (and a missing artifact always fails with the same clear message).
"""

from __future__ import annotations

from functools import cached_property

from grasp_core.artifacts import Artifacts
from grasp_core.profiles import Profile
from grasp_core.skb.format import SKB


class Workspace:
    def __init__(self, art: Artifacts, profile: Profile):
        self.art, self.profile = art, profile

    @property
    def dataset(self) -> str:
        return self.art.dataset

    @cached_property
    def graph(self) -> SKB:
        """The SKB without its queries (what graph-only steps need, so a query change does not touch them)."""
        from grasp_core.skb.format import read_skb

        return read_skb(self.art.require("skb"), with_queries=False)

    @cached_property
    def skb(self) -> SKB:
        """The SKB with its queries."""
        from grasp_core.pipeline.data import attach_queries

        return attach_queries(self.graph, self.art)

    def split(self, name: str):
        return self.skb.split(name)

    @cached_property
    def encoder(self):
        from grasp_core.embed.encoder import load_encoder

        return load_encoder(self.profile.encoder)

    @cached_property
    def embeddings(self):
        from grasp_core.embed.node_embeddings import load_node_embeddings

        return load_node_embeddings(self.art.require("node_embeddings"))

    @cached_property
    def index(self):
        from grasp_core.embed.vector_index import NodeIndex

        return NodeIndex.load(self.art.require("vector_indexes"), self.embeddings)

    @cached_property
    def store(self):
        import dataclasses

        from grasp_core.graph.store import open_graph_store

        cfg = self.profile.graph_store
        if cfg.backend == "ladybug":
            cfg = dataclasses.replace(cfg, read_only=True)
            return open_graph_store(cfg, self.art.require("graph_store"))
        return open_graph_store(cfg, self.art.path("graph_store"))

    @cached_property
    def executor(self):
        from grasp_core.plan.execute import PlanExecutor

        return PlanExecutor(self.graph, self.index, self.encoder, self.store, self.profile.execution)

    @cached_property
    def extractor(self):
        from grasp_core.entities.gazetteer import GazetteerExtractor

        return GazetteerExtractor(self.graph, self.index, self.encoder, self.profile.gazetteer)

    @cached_property
    def entity_tables(self):
        from grasp_core.entities.tables_io import read_tables

        return read_tables(self.art.require("entity_tables") / "tables.jsonl")

    @cached_property
    def text_rankings(self):
        from grasp_core.text.rankings_io import read_rankings

        return read_rankings(self.art.require("text_rankings") / f"{self.profile.text_retriever}.parquet")

    def answers(self, qids) -> list[list[int]]:
        by_qid = dict(zip(self.skb.queries["qid"], self.skb.queries["answer_ids"]))
        return [list(map(int, by_qid[q])) for q in qids]

    def close(self) -> None:
        if "store" in self.__dict__:
            self.store.close()
            del self.__dict__["store"]
