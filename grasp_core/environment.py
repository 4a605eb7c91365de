"""Every environment variable GRASP reads, in one table (:data:`VARIABLES`), and the one function that reads them.

A variable is read when it is used, never at import, so a test or a command can set it first. Unset and empty mean
the same: the default. Variables whose *name* a setting chooses (an endpoint's ``api_key_env``, the Bolt import's
``--bolt-password-env``) are read with :func:`named_env`. ``docs/configuration.md`` lists this table (a test keeps
them equal).
"""

from __future__ import annotations

import os
from typing import overload

VARIABLES: dict[str, str] = {
    "DAGSTER_HOME": "the instance: runs, artifacts, MLflow store, user knowledge bases",
    "GRASP_HOME": "the artifact root",
    "GRASP_PROFILE": "the profile when `--profile` is not given",
    "GRASP_EXECUTOR": "the Dagster executor of a deployment (`default` or `docker`)",
    "GRASP_USER_SKBS": "where user knowledge bases live",
    "GRASP_MODEL_DIR": "where local model directories are looked up (the `gpu` profile)",
    "GRASP_STARK_ROOT": "the STaRK processed files",
    "GRASP_STARK_QA_ROOT": "the STaRK question files",
    "GRASP_TEACHER_URL": "the LLM teacher's OpenAI-compatible endpoint",
    "GRASP_TEACHER_MODEL": "the LLM teacher's model",
    "GRASP_EXTRACTOR_URL": 'the LLM extractor\'s endpoint (with `extractor="llm"`)',
    "GRASP_EXTRACTOR_MODEL": "the LLM extractor's model",
    "GRASP_PARAPHRASE_URL": "an LLM that rewords synthesized questions",
    "GRASP_PARAPHRASE_MODEL": "the rewording LLM's model",
    "OPENAI_API_KEY": "the key sent to the endpoints above (an endpoint's `api_key_env` names another)",
    "NEO4J_URI": "the Bolt server of the `neo4j` graph store",
    "NEO4J_USER": "its user",
    "NEO4J_PASSWORD": "its password",
    "MLFLOW_TRACKING_URI": "the MLflow store",
    "GRASP_MLFLOW_ARTIFACTS": "MLflow's artifact location",
    "GRASP_DEBUG": "`1` prints the traceback of an unexpected error",
    "GRASP_BOLT_ROOT_PASSWORD": "internal: the password a started Bolt server hands to its child process",
}


@overload
def env(name: str) -> str | None: ...
@overload
def env(name: str, default: str) -> str: ...
def env(name: str, default: str | None = None) -> str | None:
    """The value of ``name`` (one of :data:`VARIABLES`), or ``default`` when it is unset or empty."""
    if name not in VARIABLES:
        raise KeyError(
            f"{name} is not one of GRASP's environment variables: add it to grasp_core.environment.VARIABLES"
        )
    return os.environ.get(name) or default


def named_env(name: str | None) -> str | None:
    """The value of a variable whose name a setting chose (an API key, a password), or None."""
    return os.environ.get(name) or None if name else None
