"""A Dagster deployment whose runs start in containers (deploy/host/dagster.yaml), for the end-to-end test.

`dagster dev` (webserver and daemon) runs on this host with the checkout's workspace; the DockerRunLauncher starts
each run in a container of the grasp image through the Docker API of $DOCKER_HOST (Podman's in CI: .ci/run).
Runs are submitted over the webserver's GraphQL API, as the UI's Materialize/Launch buttons submit them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
IMAGE = os.environ.get("GRASP_IMAGE", "grasp:cpu")
REQUIRED = "GRASP_REQUIRE_CONTAINERS"  # .ci/run sets it: there a missing engine or image fails, never skips


def docker_client_or_skip():
    """The Docker API client of $DOCKER_HOST with the grasp image present; else skip (fail where required)."""
    import docker

    try:
        client = docker.from_env()
        client.ping()
        client.images.get(IMAGE)
        return client
    except Exception as exc:  # no engine, no socket, no image: the reason says which
        reason = (
            f"runs in containers need a Docker API (DOCKER_HOST) and the image {IMAGE} "
            f"(deploy/build-image.sh): {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        )
        if os.environ.get(REQUIRED):
            pytest.fail(reason)
        pytest.skip(reason)


def write_instance(home: Path) -> None:
    """deploy/host/dagster.yaml for DAGSTER_HOME=home: run containers mount it at the same path; quick monitoring."""
    config = yaml.safe_load((ROOT / "deploy" / "host" / "dagster.yaml").read_text())
    launcher = config["run_launcher"]["config"]
    launcher["image"] = IMAGE
    launcher["container_kwargs"]["volumes"] = [f"{home}:{home}"]
    config["run_monitoring"].update(poll_interval_seconds=5, free_slots_after_run_end_seconds=2)
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Deployment:
    """`dagster dev` on DAGSTER_HOME=home with the checkout's workspace, profile `profile`."""

    def __init__(self, home: Path, profile: str):
        self.home, self.port = home, free_port()
        # everything in home, as run containers see it (they get DAGSTER_HOME and GRASP_PROFILE, and mount home)
        env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "GRASP_HOME", "GRASP_USER_SKBS")}
        env.update(DAGSTER_HOME=str(home), GRASP_PROFILE=profile, PYTHONPATH=str(ROOT))
        dagster = str(Path(sys.executable).parent / "dagster")
        cmd = [dagster, "dev", "-w", str(ROOT / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(self.port)]
        self.log = open(home / "dagster_dev.log", "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.instance = dg.DagsterInstance.from_config(str(home))

    def client(self, timeout: float = 300):
        from dagster_graphql import DagsterGraphQLClient

        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, f"dagster dev exited; see {self.log.name}"
            try:
                client = DagsterGraphQLClient("127.0.0.1", port_number=self.port)
                client._execute("{ version }")
                return client
            except Exception:
                assert time.monotonic() < deadline, f"the webserver did not answer; see {self.log.name}"
                time.sleep(2)

    def wait_for(self, predicate, what: str, timeout: float):
        deadline = time.monotonic() + timeout
        while not (found := predicate()):
            assert self.proc.poll() is None, f"dagster dev exited while waiting for {what}; see {self.log.name}"
            assert time.monotonic() < deadline, f"timed out waiting for {what}; see {self.log.name}"
            time.sleep(3)
        return found

    def stop(self, docker) -> None:
        """Stops `dagster dev`, then every run container still running (they outlive the daemon that launched them)."""
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for run in self.instance.get_runs():
            if "docker/container_id" in run.tags:
                try:
                    docker.containers.get(run.tags["docker/container_id"]).kill()
                except Exception:  # ended (auto-removed) already
                    pass
        self.instance.dispose()
        self.log.close()
