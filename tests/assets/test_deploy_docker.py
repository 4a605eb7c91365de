"""The docker deployment (deploy/docker) loads without a Docker engine: instance config, launcher, executor, compose."""

import re
import tomllib
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.errors import DagsterInvalidConfigError
from dagster._core.instance.config import dagster_instance_config
from dagster_docker import DockerRunLauncher

from grasp_assets.deployment import definitions_for
from grasp_core.errors import GraspError

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "docker"
PASSED_THROUGH = {"MLFLOW_TRACKING_URI", "GRASP_HOME", "NEO4J_URI", "NEO4J_USER", "NEO4J_PASSWORD", "GRASP_PROFILE"}


def _instance_yaml() -> dict:
    return yaml.safe_load((DEPLOY / "dagster.yaml").read_text())


def _compose() -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yaml").read_text())


def test_instance_config_validates_with_postgres_storage():
    config, custom_class = dagster_instance_config(str(DEPLOY))
    assert custom_class is None
    assert set(config["storage"]["postgres"]["postgres_db"]) >= {"hostname", "username", "password", "db_name"}
    assert config["run_launcher"]["class"] == "DockerRunLauncher"


def test_instance_config_schema_rejects_a_bad_section(tmp_path):
    bad = _instance_yaml()
    bad["concurrency"]["runs"]["max_concurent_runs"] = 3
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(DagsterInvalidConfigError):
        dagster_instance_config(str(tmp_path))


@pytest.fixture
def docker_instance(tmp_path):
    """The deployment's instance with its Postgres storage swapped for sqlite in a temp dir (no server here)."""
    config = _instance_yaml()
    config.pop("storage")
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(config))
    instance = dg.DagsterInstance.from_config(str(tmp_path))
    yield instance
    instance.dispose()


def test_docker_run_launcher_loads_with_network_env_and_volumes(docker_instance):
    launcher = docker_instance.run_launcher
    assert isinstance(launcher, DockerRunLauncher)
    assert launcher.networks == ["grasp"]
    assert PASSED_THROUGH <= set(launcher.env_vars)
    assert {"DAGSTER_POSTGRES_HOST", "GRASP_EXECUTOR"} <= set(launcher.env_vars)
    mounts = {target: source for source, target in (v.split(":")[:2] for v in launcher.container_kwargs["volumes"])}
    assert mounts["/opt/grasp/artifacts"] == "grasp_artifacts"


def test_run_queue_limits_heavy_runs_to_one(docker_instance):
    queue = docker_instance.get_concurrency_config().run_queue_config
    assert queue.tag_concurrency_limits == [{"key": "grasp/heavy", "value": "true", "limit": 1}]
    assert queue.max_concurrent_runs == 2
    assert type(docker_instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    assert docker_instance.get_concurrency_config().pool_config.default_pool_limit == 1


def test_training_jobs_carry_the_heavy_run_tag():
    defs = definitions_for("default")
    for job in ("prepare", "rl_round", "finish"):
        assert defs.resolve_job_def(job).tags.get("grasp/heavy") == "true", job


def test_docker_executor_on_every_job_and_its_run_config_validates():
    defs = definitions_for("docker")
    for job in ("prepare", "rl_round", "finish"):
        assert defs.resolve_job_def(job).executor_def.name == "docker", job
    run_config = {
        "execution": {
            "config": {
                "max_concurrent": 2,
                "networks": ["grasp"],
                "container_kwargs": {"volumes": ["grasp_artifacts:/opt/grasp/artifacts"]},
            }
        }
    }
    assert (
        dg.validate_run_config(defs.resolve_job_def("prepare"), run_config)["execution"]["docker"]["max_concurrent"]
        == 2
    )
    with pytest.raises(dg.DagsterInvalidConfigError):
        dg.validate_run_config(defs.resolve_job_def("prepare"), {"execution": {"config": {"max_concurent": 2}}})


def test_default_executor_is_the_local_code_location_and_unknown_is_an_error():
    from grasp_assets.definitions import defs

    assert definitions_for("default") is defs
    assert defs.resolve_job_def("prepare").executor_def.name != "docker"
    with pytest.raises(GraspError, match="GRASP_EXECUTOR"):
        definitions_for("kubernetes")


def test_compose_matches_the_instance_config():
    compose, launcher = _compose(), _instance_yaml()["run_launcher"]["config"]
    services = compose["services"]
    assert {"postgres", "code", "webserver", "daemon", "mlflow", "neo4j"} <= set(services)
    assert compose["networks"]["grasp"]["name"] == launcher["network"]
    named = {v["name"] for v in compose["volumes"].values()}
    assert {v.split(":")[0] for v in launcher["container_kwargs"]["volumes"] if not v.startswith("/")} <= named
    for name in ("code", "webserver", "daemon"):
        assert set(launcher["env_vars"]) <= set(services[name]["environment"]), name
    assert "/var/run/docker.sock:/var/run/docker.sock" in services["daemon"]["volumes"]
    assert "grasp_assets.deployment" in (DEPLOY / "Dockerfile").read_text()
    workspace = yaml.safe_load((DEPLOY / "workspace.yaml").read_text())
    assert workspace["load_from"][0]["grpc_server"]["host"] == "code"


def test_the_image_installs_the_pins_of_pyproject_and_a_matching_postgres_storage():
    """deploy/build-image.sh resolves pyproject.toml's dependencies plus its `deploy` extra into the wheelhouse the
    Dockerfile installs from, offline; the extra's dagster-postgres is the release of the pinned dagster-docker."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = dict(
        d.split("==") for d in project["dependencies"] + project["optional-dependencies"]["deploy"] if "==" in d
    )
    assert pins["dagster-postgres"] == pins["dagster-docker"]
    assert 'dependencies"] + p["optional-dependencies"]["deploy"]' in (DEPLOY.parent / "build-image.sh").read_text()
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"pip install --no-cache-dir --no-index --find-links /wheels /wheels/\*\.whl", dockerfile)
    assert "--no-index --no-deps" in dockerfile
