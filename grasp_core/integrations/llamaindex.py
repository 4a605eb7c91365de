"""GRASP as a LlamaIndex retriever (``pip install 'grasp[llamaindex]'``).

::

    from grasp_core.integrations.llamaindex import GraspLlamaIndexRetriever

    retriever = GraspLlamaIndexRetriever.from_artifacts("hpo", profile="cpu", k=5)
    nodes = retriever.retrieve("Which diseases present with seizures?")
    nodes[0].score, nodes[0].node.metadata["key"], nodes[0].node.get_content()

Each answer is a ``NodeWithScore`` holding a ``TextNode`` whose text is its node's text (type, name, text fields,
aliases), whose id is the node's key and whose metadata holds the key, type, name, score, rank and the explanation
(:func:`grasp_core.integrations.common.answer_metadata`), in GRASP's order. An LLM reading the node sees its key,
type, name, the branch that found it and the plan's paths; an embedding model sees the text only.
"""

from __future__ import annotations

from typing import Any

from grasp_core.integrations import missing_extra

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:
    raise missing_extra("LlamaIndex", "llamaindex", exc) from None

from grasp_core.integrations.common import answer_metadata, ask, check_k, node_text
from grasp_core.retriever import GraspRetriever

__all__ = ["GraspLlamaIndexRetriever"]

LLM_METADATA = ("key", "type", "name", "found_by", "paths")  # the metadata an LLM reading a node sees


class GraspLlamaIndexRetriever(BaseRetriever):
    """A LlamaIndex ``BaseRetriever`` over a :class:`GraspRetriever`: ``retrieve(question)`` -> the top ``k``
    answers as ``NodeWithScore``\\ s (``explain=False`` leaves out the plan's paths, which cost a little time)."""

    def __init__(
        self,
        retriever: GraspRetriever,
        k: int = 10,
        explain: bool = True,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ):
        self.retriever, self.k, self.explain = retriever, check_k(k), explain
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @classmethod
    def from_artifacts(
        cls, dataset: str, root=None, profile: str = "cpu", *, k: int = 10, explain: bool = True, **kwargs: Any
    ) -> GraspLlamaIndexRetriever:
        """Load a dataset's trained artifacts (``kwargs``: those of :meth:`GraspRetriever.from_artifacts`)."""
        return cls(GraspRetriever.from_artifacts(dataset, root, profile, **kwargs), k=k, explain=explain)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = ask(self.retriever, query_bundle.query_str, self.k, self.explain)
        out = []
        for rank, answer in enumerate(result.answers, 1):
            metadata = answer_metadata(self.retriever, answer, rank)
            node = TextNode(
                id_=answer.key,
                text=node_text(self.retriever, answer),
                metadata=metadata,
                excluded_embed_metadata_keys=list(metadata),
                excluded_llm_metadata_keys=[m for m in metadata if m not in LLM_METADATA],
            )
            out.append(NodeWithScore(node=node, score=float(answer.score)))
        return out
