"""A dataset's trained parts, each loaded once, on first use: the one place they are built from artifacts.

The retriever (serving) and the pipeline steps (training, evaluation) both read a dataset through
:class:`Components`, so a part is built the same way everywhere and a missing artifact always fails with the
same clear message. This module loads finished artifacts only; it imports no training step.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, cast

from grasp_core.artifacts import Artifacts
from grasp_core.errors import GraspError
from grasp_core.io import is_complete, read_json
from grasp_core.names import EXTRACTORS
from grasp_core.planner.rounds import ROUNDS, gate_passed
from grasp_core.profiles import Profile
from grasp_core.skb.format import FINGERPRINT, SKB

if TYPE_CHECKING:  # the parts load lazily: their modules are imported on first use
    import pandas as pd

    from grasp_core.embed.encoder import Encoder
    from grasp_core.embed.node_embeddings import NodeEmbeddings
    from grasp_core.embed.vector_index import NodeIndex
    from grasp_core.entities.gazetteer import GazetteerExtractor
    from grasp_core.entities.llm_extractor import LLMExtractor
    from grasp_core.entities.table import EntityTable
    from grasp_core.graph.store import GraphStore
    from grasp_core.plan.execute import PlanExecutor
    from grasp_core.planner.interface import Planner
    from grasp_core.ranking import Ranking
    from grasp_core.rerank.asked_type import AskedType
    from grasp_core.rerank.documents import CandidateDocumentBuilder
    from grasp_core.rerank.features import FeatureBuilder
    from grasp_core.rerank.inference import PairReranker
    from grasp_core.rerank.ranker import LTRReranker
    from grasp_core.rerank.scorers import CausalLMScorer, CrossEncoderScorer
    from grasp_core.text.bm25 import BM25Retriever
    from grasp_core.text.dense import DenseRetriever
    from grasp_core.text.mfar import MFARRetriever

TEXT_RETRIEVERS = ("bm25", "dense", "mfar")
RERANKER_KINDS = ("ltr", "cross-encoder", "causal-lm")
# The profile sections a part reads, for the steps' declarations (``@step(reads=(*EXECUTOR, ...))``)
EXECUTOR = ("encoder", "execution", "graph_store")  # components.executor (and components.encoder, components.store)
EXTRACTOR = ("encoder", "extractor", "extractor_endpoint", "gazetteer", "llm_extractor")  # components.extractor
PLANNER = ("device", "encoder", "inference", "planner")  # components.planner(...)
FUSED_TEXT = ("text_retriever",)  # components.text_rankings
RERANKER = ("causal_reranker", "cross_encoder", "encoder", "rerank_features", "reranker_docs", "reranker_kind")
_SECTIONS = frozenset(f.name for f in dataclasses.fields(Profile))


class _DeclaredSections:
    """A profile that gives out only the sections a step declared it reads (``@step(reads=...)``)."""

    def __init__(self, profile: Profile, reads: frozenset[str]):
        self._profile, self._reads = profile, reads

    def __getattr__(self, section: str):
        if section not in self._reads and section in _SECTIONS:
            raise GraspError(
                f"this step reads the profile section {section!r}, which it does not declare: add it to its "
                f"@step(reads=...)"
            )
        return getattr(self._profile, section)


class Components:
    """A dataset's parts; with ``reads``, reading a profile section outside it fails (a step's declaration)."""

    def __init__(self, art: Artifacts, profile: Profile, reads: frozenset[str] | None = None):
        self.art = art
        self.profile = profile if reads is None else cast(Profile, _DeclaredSections(profile, reads))
        self._text_retrievers: dict[str, BM25Retriever | DenseRetriever | MFARRetriever] = {}

    @property
    def dataset(self) -> str:
        return self.art.dataset

    # ---------------------------------------------------------------------------------------- data
    @cached_property
    def graph(self) -> SKB:
        """The SKB without its queries (what graph-only steps need, so a query change does not touch them)."""
        from grasp_core.skb.format import read_skb

        return read_skb(self.art.require("skb"), with_queries=False)

    @cached_property
    def skb(self) -> SKB:
        """The SKB with its queries, validated against the graph."""
        import pyarrow.parquet as pq

        from grasp_core.skb.format import check_built_from, validate

        file = self.art.require("queries") / "queries.parquet"
        check_built_from(self.art.require("skb"), file)
        skb = SKB(self.graph.schema, self.graph.nodes, self.graph.edges, pq.read_table(file).to_pandas())
        validate(skb, where=self.art.require("skb"), queries_file=file)
        return skb

    def split(self, name: str) -> pd.DataFrame:
        return self.skb.split(name)

    def answers(self, qids) -> list[list[int]]:
        by_qid = dict(zip(self.skb.queries["qid"], self.skb.queries["answer_ids"]))
        return [list(map(int, by_qid[q])) for q in qids]

    # ---------------------------------------------------------------------------- graph branch
    @cached_property
    def encoder(self) -> Encoder:
        from grasp_core.embed.encoder import load_encoder

        return load_encoder(self.profile.encoder)

    @cached_property
    def embeddings(self) -> NodeEmbeddings:
        from grasp_core.embed.node_embeddings import load_node_embeddings

        return load_node_embeddings(self.art.require("node_embeddings"))

    @cached_property
    def index(self) -> NodeIndex:
        from grasp_core.embed.vector_index import NodeIndex

        return NodeIndex.load(self.art.require("vector_indexes"), self.embeddings)

    @cached_property
    def store(self) -> GraphStore:
        from grasp_core.graph.open import open_graph_store

        cfg = self.profile.graph_store
        if cfg.backend == "ladybug":
            cfg = dataclasses.replace(cfg, read_only=True)
            return open_graph_store(cfg, self.art.require("graph_store"))
        return open_graph_store(cfg, self.art.path("graph_store"))

    @cached_property
    def executor(self) -> PlanExecutor:
        from grasp_core.plan.execute import PlanExecutor

        return PlanExecutor(self.graph, self.index, self.encoder, self.store, self.profile.execution)

    @cached_property
    def gazetteer(self) -> GazetteerExtractor:
        """The gazetteer over the graph, with the dictionary the ``entity_tables`` artifact keeps when it was built
        from this SKB with these settings and this code (:mod:`grasp_core.entities.dictionary`), else built now."""
        from grasp_core.entities.dictionary import FILE, read_dictionary
        from grasp_core.entities.gazetteer import GazetteerExtractor

        key, saved = self.dictionary_key(), None
        if key is not None:
            try:
                saved = read_dictionary(self.art.require("entity_tables") / FILE, key)
            except GraspError:  # none yet, or corrupt: the dictionary is built (the step rebuilding it reads it too)
                saved = None
        return GazetteerExtractor(self.graph, self.index, self.encoder, self.profile.gazetteer, saved)

    def dictionary_key(self) -> str | None:
        """The key a saved gazetteer dictionary of this SKB needs (None for an SKB without a fingerprint)."""
        from grasp_core.entities.dictionary import dictionary_key

        file = self.art.require("skb") / FINGERPRINT
        return dictionary_key(file.read_text().strip(), self.profile.gazetteer) if file.is_file() else None

    @cached_property
    def extractor(self) -> GazetteerExtractor | LLMExtractor:
        """The profile's entity extractor: the gazetteer, or the LLM extractor over ``extractor_endpoint``
        (demonstrations: gazetteer mentions of training queries; unreadable answers fall back to the gazetteer)."""
        kind = self.profile.extractor
        if kind == "gazetteer":
            return self.gazetteer
        if kind != "llm":
            raise GraspError(f"extractor must be one of {EXTRACTORS}, got {kind!r}")
        from grasp_core.entities.llm_extractor import LLMExtractor, gazetteer_demonstrations
        from grasp_core.llm.backends import OpenAICompatibleLLM

        llm = OpenAICompatibleLLM.from_config(self.profile.extractor_endpoint, "extractor_endpoint")
        cfg = self.profile.llm_extractor

        def generate(prompts: list[str]) -> list[str]:
            return [c[0] for c in llm.generate(prompts, n=1, temperature=0.0, max_new_tokens=cfg.max_new_tokens)]

        demos = gazetteer_demonstrations(self.skb, self.gazetteer, n=cfg.num_demos)
        return LLMExtractor(self.skb, self.index, self.encoder, generate, demos, self.gazetteer, cfg)

    @cached_property
    def entity_tables(self) -> dict[int, EntityTable]:
        from grasp_core.entities.tables_io import read_tables

        return read_tables(self.art.require("entity_tables") / "tables.jsonl")

    # ------------------------------------------------------------------------------ text branch
    def text_retriever(self, name: str) -> BM25Retriever | DenseRetriever | MFARRetriever:
        """A text retriever by name (one of :data:`TEXT_RETRIEVERS`), from the finished artifacts, loaded once (the
        answer path's text branch and the ``ltr`` reranker's features share mFAR; inference never changes it)."""
        from grasp_core.text.bm25 import BM25Retriever
        from grasp_core.text.dense import DenseRetriever
        from grasp_core.text.mfar import MFARRetriever

        if name not in self._text_retrievers:
            if name == "bm25":
                self._text_retrievers[name] = BM25Retriever.load(self.art.require("text_index") / "bm25")
            elif name == "dense":
                self._text_retrievers[name] = DenseRetriever(self.index, self.encoder)
            elif name == "mfar":
                self._text_retrievers[name] = MFARRetriever.load(self.art.require("mfar_model"), self.encoder)
            else:
                raise ValueError(f"unknown text retriever {name!r}; choose one of {TEXT_RETRIEVERS}")
        return self._text_retrievers[name]

    @cached_property
    def text_rankings(self) -> dict[int, Ranking]:
        from grasp_core.text.rankings_io import read_rankings

        return read_rankings(self.art.require("text_rankings") / f"{self.profile.text_retriever}.parquet")

    # ---------------------------------------------------------------------------------- planner
    def final_planner(self) -> tuple[str, Path]:
        """The planner the pipeline serves: the last round whose gate passed, else the SFT planner."""
        best = ("sft", self.art.require("sft_adapter"))
        for r in ROUNDS:
            if is_complete(self.art.path("planner", r)) and gate_passed(self.art.require("planner", r)):
                best = (f"round {r}", self.art.path("planner", r))
        return best

    def planner(self, checkpoint: Path, batch_size: int = 32) -> Planner:
        """The planner at ``checkpoint``, of the kind the profile names (``Profile.planner``)."""
        from grasp_core.planner.interface import load_planner

        p = self.profile
        return load_planner(p.planner, checkpoint, self.graph.schema, self.encoder, p.inference, p.device, batch_size)

    # --------------------------------------------------------------------------------- reranker
    @property
    def reranker_kind(self) -> str:
        """``Profile.reranker_kind``, checked: ``ltr``, ``cross-encoder`` or ``causal-lm``."""
        if self.profile.reranker_kind not in RERANKER_KINDS:
            raise GraspError(f"unknown reranker_kind {self.profile.reranker_kind!r}: choose one of {RERANKER_KINDS}")
        return self.profile.reranker_kind

    def reranker_scorer(self) -> CausalLMScorer | CrossEncoderScorer:
        """The pair reranker model the profile names (cross-encoder or causal LM), untrained (its base weights)."""
        from grasp_core.rerank.scorers import CausalLMScorer, CrossEncoderScorer

        if self.reranker_kind == "causal-lm":
            return CausalLMScorer(self.profile.causal_reranker)
        return CrossEncoderScorer(self.profile.cross_encoder)

    def reranker_documents(self) -> CandidateDocumentBuilder:
        """The pair reranker's candidate document builder."""
        from grasp_core.rerank.documents import CandidateDocumentBuilder

        return CandidateDocumentBuilder(self.skb, self.embeddings.doc, self.profile.reranker_docs, encoder=self.encoder)

    def reranker_features(self, asked: AskedType | None = None) -> FeatureBuilder:
        """The ``ltr`` reranker's feature builder (over the graph, the node vectors, the trained mFAR and the
        asked-type model ``asked``)."""
        from grasp_core.rerank.features import FeatureBuilder

        return FeatureBuilder(
            self.graph,
            self.embeddings.doc,
            self.text_retriever("mfar"),
            self.profile.rerank_features,
            names=self.embeddings,
            asked=asked,
        )

    def reranker(self) -> LTRReranker | PairReranker:
        """The trained reranker of the finished ``reranker`` artifact with its ``(w, k)``: an
        :class:`~grasp_core.rerank.ranker.LTRReranker` or a :class:`~grasp_core.rerank.inference.PairReranker`.
        An artifact of another kind than the profile asks for is refused."""
        from grasp_core.rerank.weights import RRF_FILE

        path = self.art.require("reranker")
        rrf = read_json(path / RRF_FILE)
        kind = rrf.get("kind", "cross-encoder")
        if kind != self.reranker_kind:
            raise GraspError(
                f"the reranker artifact at {path} holds a {kind!r} reranker but the profile asks for "
                f"{self.reranker_kind!r}; rematerialize the reranker asset"
            )
        w, k = float(rrf["w"]), float(rrf["k"])
        if kind == "ltr":
            from grasp_core.rerank.asked_type import AskedType
            from grasp_core.rerank.ranker import LTRReranker

            return LTRReranker.load(path, self.reranker_features(AskedType.load(path)), w, k)
        from grasp_core.rerank.inference import PairReranker
        from grasp_core.rerank.weights import load_trained_weights

        scorer = self.reranker_scorer()
        load_trained_weights(scorer, path)
        return PairReranker(scorer, self.reranker_documents(), w, k)

    def close(self) -> None:
        if "store" in self.__dict__:
            self.store.close()
            del self.__dict__["store"]
