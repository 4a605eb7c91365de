"""GRASP inside other frameworks, each an optional extra (``docs/integrations.md``):

- :mod:`grasp_core.integrations.langchain`: a LangChain ``BaseRetriever`` (``pip install 'grasp[langchain]'``);
- :mod:`grasp_core.integrations.llamaindex`: a LlamaIndex ``BaseRetriever`` (``pip install 'grasp[llamaindex]'``);
- :mod:`grasp_core.integrations.mcp_server`: ``grasp mcp DATASET``, an MCP server over stdio with the tools
  ``search`` and ``explain`` (``pip install 'grasp[mcp]'``).

Each wraps a :class:`~grasp_core.retriever.GraspRetriever` and imports its framework only in its own module, so
``grasp_core`` imports without the extras; importing an adapter whose extra is missing raises
:class:`MissingExtraError`, one line naming the ``pip install`` to run. The answer-to-metadata mapping they share is
in :mod:`grasp_core.integrations.common`.
"""

from __future__ import annotations

from grasp_core.errors import GraspError


class MissingExtraError(GraspError, ImportError):
    """An integration's framework is not installed; the message names the extra to install."""


def missing_extra(framework: str, extra: str, exc: ImportError) -> MissingExtraError:
    missing = f" ({exc.name.split('.')[0]} is not installed)" if exc.name else ""
    return MissingExtraError(f"the {framework} integration needs its extra{missing}: pip install 'grasp[{extra}]'")
