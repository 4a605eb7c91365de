"""``grasp mcp DATASET``: a dataset's trained retriever as an MCP server over stdio (``pip install 'grasp[mcp]'``),
built on the official ``mcp`` SDK's ``MCPServer``.

Tools:

- ``search(query, k=10)``: the top ``k`` answers (at most 100), each with its rank, key, type, name, score, the
  branch that found it and the first 300 characters of its node's text;
- ``explain(query, key)``: why that node is (or is not) an answer of the question: its rank among the top 100,
  the branch ranks, the reranker's score and largest feature contributions, the plan's paths to it (for a graph
  answer among the top 10), and the question's entity table, plan, Cypher, bindings and per-stage milliseconds.

A bad argument (an empty question, a key the dataset does not have, ``k`` out of range) is a tool error whose text
says what to change. The retriever loads once, before the server answers its first message (a missing dataset or
artifact ends the command with a one-line error); one thread owns it and answers one call at a time, in arrival
order, as in ``grasp serve``. stdout carries the protocol only: what the libraries print while the models load,
and every log line, goes to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

from grasp_core.integrations import missing_extra

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError as exc:
    raise missing_extra("MCP", "mcp", exc) from None

from pydantic import Field

from grasp_core.errors import GraspError
from grasp_core.explain import result_json
from grasp_core.integrations.common import MAX_K, answer_metadata, ask, node_text, short
from grasp_core.retriever import GraspRetriever, Result

__all__ = ["build_server", "serve_stdio"]

Query = Annotated[str, Field(description="the question, in natural language")]


def build_server(retriever: GraspRetriever) -> MCPServer:
    """The MCP server of ``retriever``: the tools ``search`` and ``explain`` (any transport the SDK offers)."""
    dataset = retriever.components.dataset
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grasp-retriever")
    keys = {str(key): i for i, key in enumerate(retriever.components.skb.nodes["key"])}

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        """While serving, a print (ours or a library's) goes to stderr: on stdio, stdout is the protocol, and
        text left in sys.stdout's buffer would be flushed onto it at exit."""
        sys.stdout.flush()
        try:
            with contextlib.redirect_stdout(sys.stderr):
                yield
        finally:
            worker.shutdown(wait=False, cancel_futures=True)

    server: MCPServer = MCPServer(
        f"grasp-{dataset}",
        instructions=(
            f"GRASP retrieval over the {dataset!r} knowledge graph. `search` answers a natural-language question "
            "with its nodes (key, type, name, score, text), best first; `explain` tells why a node (by key) is an "
            "answer: which branch found it, the plan over the graph and the paths that reached it."
        ),
        log_level="WARNING",
        lifespan=lifespan,
    )

    async def answer(query: str, k: int) -> Result:
        try:
            return await asyncio.wrap_future(worker.submit(ask, retriever, query, k, True))
        except GraspError as exc:
            raise ToolError(str(exc)) from None

    @server.tool()
    async def search(
        query: Query,
        k: Annotated[int, Field(ge=1, le=MAX_K, description=f"answers returned (1 to {MAX_K})")] = 10,
    ) -> dict[str, Any]:
        """Search the knowledge graph: the best nodes answering the question, best first, each with its key (pass
        it to `explain`), type, name, score, the branch that found it (text, graph or both) and the start of its
        text."""
        result = await answer(query, k)
        return {
            "query": result.query,
            "dataset": dataset,
            "answers": [
                {
                    "rank": rank,
                    "key": a.key,
                    "type": a.type,
                    "name": a.name,
                    "score": float(a.score),
                    "found_by": a.found_by,
                    "text": short(node_text(retriever, a)),
                }
                for rank, a in enumerate(result.answers, 1)
            ],
        }

    @server.tool()
    async def explain(
        query: Query, key: Annotated[str, Field(description="a node's key, as `search` returns it")]
    ) -> dict[str, Any]:
        """Explain why the node `key` is an answer of the question (or that it is not among the top 100): its
        rank, which branch found it at what rank (text, graph, fused), the reranker's score and largest feature
        contributions, the plan's paths from the question's entities to it, and the question's entity table,
        plan, Cypher, bindings and per-stage milliseconds."""
        if key not in keys:
            raise ToolError(f"dataset {dataset!r} has no node with key {key!r}: pass a key that `search` returned")
        result = await answer(query, MAX_K)
        rank, found = next(((r, a) for r, a in enumerate(result.answers, 1) if a.key == key), (None, None))
        body = {k: v for k, v in result_json(result, show=0).items() if k != "answers"}
        return {
            "key": key,
            "rank": rank,
            "answer": None if found is None else answer_metadata(retriever, found, rank or 0),
            "note": (
                f"{key!r} is not among the top {MAX_K} answers of this question"
                if found is None
                else "paths are listed for graph answers among the top 10"
            ),
            **body,
            "truncated": result.truncated,
        }

    return server


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Everything written to stdout inside (by Python or by a library's C code) goes to stderr instead."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def serve_stdio(load: Callable[[], GraspRetriever]) -> None:
    """Load the retriever (stdout sent to stderr meanwhile), then serve MCP over stdin/stdout until the client
    closes stdin."""
    with stdout_to_stderr():
        retriever = load()
        server = build_server(retriever)
        print(
            f"grasp mcp: serving {retriever.components.dataset!r} over stdio (tools: search, explain)", file=sys.stderr
        )
    server.run("stdio")
