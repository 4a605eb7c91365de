"""Fixtures shared by the whole suite."""

import time

import pytest

from grasp_core.graph.bolt_server import BoltServer, server_from_env, start_bolt_server


@pytest.fixture(scope="session")
def bolt_server(tmp_path_factory) -> BoltServer:
    """A Bolt server for the Neo4j backend: ``NEO4J_URI`` (``NEO4J_USER``, ``NEO4J_PASSWORD``) when set, e.g. a real
    Neo4j 5; else ArcadeDB + Bolt from the ``arcadedb-embedded`` wheel, started on a free loopback port in a child
    process for the session and stopped by its pid. A server that cannot start fails the tests that need it, with
    the reason; none of them is skipped. Use ``.uri``, ``.user``, ``.password``, ``.database`` (or ``.env()``)."""
    given = server_from_env()
    if given is not None:
        yield given
        return
    start = time.perf_counter()
    try:
        server = start_bolt_server(tmp_path_factory.mktemp("bolt-server"))
    except Exception as exc:
        pytest.fail(f"the Bolt server for the Neo4j tests could not start: {exc}", pytrace=False)
    print(f"\n[bolt_server] ArcadeDB + Bolt up at {server.uri} in {time.perf_counter() - start:.1f} s")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def bolt_env(bolt_server, monkeypatch) -> BoltServer:
    """:func:`bolt_server` with ``NEO4J_URI`` / ``NEO4J_USER`` / ``NEO4J_PASSWORD`` set for one test."""
    for key, value in bolt_server.env().items():
        monkeypatch.setenv(key, value)
    return bolt_server


def _without_disposed_defs_state_storage():
    """Dagster's instance context manager keeps the instance's defs-state storage in a context variable; a test
    instance left open until the garbage collector finalizes it resets that variable then, to the storage of an
    instance already disposed, and building definitions afterwards fails with "undefined DagsterInstance weakref".
    Each test module starts after a collection and without one, as a new process (`grasp pipeline`) does."""
    import gc

    from dagster._core.storage.defs_state.base import set_defs_state_storage

    gc.collect()
    with set_defs_state_storage(None):
        yield
    gc.collect()
    # what outlives a module (imported libraries, session fixtures) is moved out of the collector's reach: a full
    # collection then scans only what later tests make (it scanned millions of torch/dagster/transformers objects,
    # 1-3 s each time, twice per module)
    gc.freeze()


_per_module = pytest.fixture(autouse=True, scope="module", name="_per_module")(_without_disposed_defs_state_storage)


# the longest files start first, so parallel workers finish together (scripts/test.sh keeps this order): the two
# end-to-end modules (each builds its own tiny system, so they run side by side), the gpu-shaped one, then the
# planner files that share the session's planner world (tests/planner/conftest.py), so that world is built once
FIRST = ("tests/test_end_to_end.py", "tests/test_end_to_end_rebuilds.py", "tests/test_end_to_end_gpu.py")


def pytest_collection_modifyitems(items):
    def path(item) -> str:
        return item.nodeid.split("::")[0]

    world = {path(i) for i in items if path(i).startswith("tests/planner/") and "world" in i.fixturenames}

    def rank(item) -> int:
        return FIRST.index(path(item)) if path(item) in FIRST else len(FIRST) + (path(item) not in world)

    items.sort(key=rank)  # stable: the rest keep their order
