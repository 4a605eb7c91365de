"""Opening the configured graph store backend (:class:`~grasp_core.graph.store.GraphStoreConfig`.backend)."""

from __future__ import annotations

from pathlib import Path

from grasp_core.graph.config import GraphStoreConfig
from grasp_core.graph.store import GraphStore


def open_graph_store(cfg: GraphStoreConfig, path: str | Path | None = None) -> GraphStore:
    """Open the configured backend. ``path`` is the LadybugDB store directory (unused by Neo4j)."""
    if cfg.backend == "ladybug":
        from grasp_core.graph.ladybug_store import LadybugStore

        if path is None:
            raise ValueError("the ladybug backend needs a store directory path")
        return LadybugStore(path, cfg)
    if cfg.backend == "neo4j":
        from grasp_core.graph.neo4j_store import Neo4jStore

        return Neo4jStore(cfg)
    raise ValueError(f"GraphStoreConfig.backend must be 'ladybug' or 'neo4j', not {cfg.backend!r}")
