"""The local Bolt server (ArcadeDB from the arcadedb-embedded wheel): it answers, and a start that cannot work fails
with the reason and leaves no process behind."""

import os
import socket

import neo4j
import pytest

from grasp_core.errors import GraphStoreError
from grasp_core.graph.bolt_server import start_bolt_server


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_session_server_answers_cypher_over_bolt(bolt_server):
    with neo4j.GraphDatabase.driver(bolt_server.uri, auth=(bolt_server.user, bolt_server.password)) as driver:
        records, _, _ = driver.execute_query("UNWIND [1, 2, 3] AS x RETURN sum(x) AS s", database_=bolt_server.database)
    assert records[0]["s"] == 6
    assert bolt_server.password not in repr(bolt_server)


def test_a_server_that_cannot_start_fails_with_the_reason_and_is_stopped(tmp_path):
    with socket.socket() as taken:  # the Bolt port is in use: the server cannot bind it
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(GraphStoreError, match="exited with status") as err:
            start_bolt_server(tmp_path / "second", port=taken.getsockname()[1], password="s3cret-pw", timeout=90)
    print(err.value)
    assert "s3cret-pw" not in str(err.value)
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    assert not [p for p in pids if _alive(p) and str(tmp_path / "second") in _cmdline(p)]


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
