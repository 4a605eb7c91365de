"""The graph store's settings: the embedded store or a Neo4j server over Bolt (profile section ``graph_store``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from grasp_core.environment import env


@dataclass(frozen=True)
class GraphStoreConfig:
    backend: Literal["ladybug", "neo4j"] = field(
        default="ladybug",
        metadata={"help": "ladybug = embedded LadybugDB (no server); neo4j = a Neo4j server over Bolt."},
    )
    uri: str | None = field(default=None, metadata={"help": "Neo4j Bolt URI; None = env NEO4J_URI."})
    user: str | None = field(default=None, metadata={"help": "Neo4j user; None = env NEO4J_USER (else 'neo4j')."})
    database: str | None = field(default=None, metadata={"help": "Neo4j database name; None = the server default."})
    batch_size: int = field(default=20_000, metadata={"help": "Rows per UNWIND batch when loading Neo4j."})
    num_threads: int = field(default=0, metadata={"help": "LadybugDB worker threads; 0 = all cores."})
    buffer_pool_gib: float = field(
        default=2.0,
        metadata={
            "help": "LadybugDB buffer pool in GiB (caps its memory; a Prime-scale store needs well under 1); "
            "0 = engine default, 80% of RAM."
        },
    )
    read_only: bool = field(default=False, metadata={"help": "Open an existing LadybugDB store read-only (serving)."})

    def neo4j_auth(self) -> tuple[str, str, str]:
        """(uri, user, password), falling back to NEO4J_URI / NEO4J_USER. The password comes only from the
        environment (NEO4J_PASSWORD): a secret in a configuration would be logged with it."""
        return (
            self.uri or env("NEO4J_URI", ""),
            self.user or env("NEO4J_USER", "neo4j"),
            env("NEO4J_PASSWORD", ""),
        )
