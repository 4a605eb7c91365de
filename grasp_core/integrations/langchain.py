"""GRASP as a LangChain retriever (``pip install 'grasp[langchain]'``).

::

    from grasp_core.integrations.langchain import GraspLangChainRetriever

    retriever = GraspLangChainRetriever.from_artifacts("hpo", profile="cpu", k=5)
    docs = retriever.invoke("Which diseases present with seizures?")
    docs[0].page_content, docs[0].metadata["key"], docs[0].metadata["found_by"]

Each answer is a ``Document`` whose ``page_content`` is its node's text (type, name, text fields, aliases), whose
``id`` is the node's key, and whose ``metadata`` holds the key, type, name, score, rank and the explanation
(:func:`grasp_core.integrations.common.answer_metadata`), in GRASP's order.
"""

from __future__ import annotations

from typing import Any

from grasp_core.integrations import missing_extra

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:
    raise missing_extra("LangChain", "langchain", exc) from None

from pydantic import ConfigDict, Field

from grasp_core.integrations.common import MAX_K, answer_metadata, ask, node_text
from grasp_core.retriever import GraspRetriever

__all__ = ["GraspLangChainRetriever"]


class GraspLangChainRetriever(BaseRetriever):
    """A LangChain ``BaseRetriever`` over a :class:`GraspRetriever`: ``invoke(question)`` -> the top ``k``
    answers as ``Document``\\ s (``explain=False`` leaves out the plan's paths, which cost a little time)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retriever: GraspRetriever
    k: int = Field(default=10, ge=1, le=MAX_K)
    explain: bool = True

    @classmethod
    def from_artifacts(
        cls, dataset: str, root=None, profile: str = "cpu", *, k: int = 10, explain: bool = True, **kwargs: Any
    ) -> GraspLangChainRetriever:
        """Load a dataset's trained artifacts (``kwargs``: those of :meth:`GraspRetriever.from_artifacts`)."""
        return cls(retriever=GraspRetriever.from_artifacts(dataset, root, profile, **kwargs), k=k, explain=explain)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        result = ask(self.retriever, query, self.k, self.explain)
        return [
            Document(
                page_content=node_text(self.retriever, answer),
                metadata=answer_metadata(self.retriever, answer, rank),
                id=answer.key,
            )
            for rank, answer in enumerate(result.answers, 1)
        ]
