"""The code location as a deployment serves it: `definitions.defs` with the step executor named by $GRASP_EXECUTOR.

- unset or ``default``: Dagster's default executor (every step in a subprocess of the run worker), as
  ``dagster dev -w workspace.yaml`` runs it.
- ``docker``: every step in its own container (:data:`dagster_docker.docker_executor`). It inherits the
  image, network, environment variables and volumes of the container the ``DockerRunLauncher`` started for
  the run (deploy/docker/dagster.yaml), so nothing is configured twice; per-run overrides go in the run
  config's ``execution: config:`` block.

The code server (``dagster code-server start -m grasp_assets.deployment``) and the run workers it launches
must see the same $GRASP_EXECUTOR, so deploy/docker/dagster.yaml passes it through to run containers.
Only this module reads the variable, once, at import; tests call :func:`definitions_for` directly.
"""

from __future__ import annotations

import dagster as dg
from dagster_docker import docker_executor

from grasp_assets.definitions import defs as local_defs
from grasp_core.environment import env
from grasp_core.errors import GraspError

EXECUTORS = ("default", "docker")


def definitions_for(executor: str) -> dg.Definitions:
    """The code location's definitions with ``executor`` (one of :data:`EXECUTORS`) as every job's executor."""
    if executor == "default":
        return local_defs
    if executor == "docker":
        return dg.Definitions.merge(local_defs, dg.Definitions(executor=docker_executor))
    raise GraspError(f"GRASP_EXECUTOR must be one of {', '.join(EXECUTORS)}, not {executor!r}")


defs = definitions_for(env("GRASP_EXECUTOR", "default"))
