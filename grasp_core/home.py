"""One directory holds a run's state: ``$DAGSTER_HOME``, else ``dagster_home/`` in the checkout.

Dagster's runs and event logs, the artifacts (``<home>/artifacts``, or ``$GRASP_HOME``), the MLflow store
(``<home>/mlflow.db``, or ``$MLFLOW_TRACKING_URI``) and its files (``<home>/mlartifacts``), the user SKBs
(``<home>/user_skbs``, or ``$GRASP_USER_SKBS``), the STaRK files ``grasp data fetch`` downloads (``<home>/stark``, or
``$GRASP_STARK_ROOT``), the results documents ``grasp report`` writes (``<home>/reports``, or ``--results-dir``)
and the feedback stores of ``grasp serve`` (``<home>/feedback/<dataset>.sqlite``) all live there, so setting
``DAGSTER_HOME`` alone isolates a run.
Read when used, never at import.
"""

from __future__ import annotations

from pathlib import Path

from grasp_core.environment import env

CHECKOUT_HOME = Path(__file__).resolve().parent.parent / "dagster_home"


def grasp_home() -> Path:
    return Path(home) if (home := env("DAGSTER_HOME")) else CHECKOUT_HOME


# A config field's metadata key for a location (where a source or a store lies, not how anything is built): such
# fields stay out of code versions and MLflow params (`grasp_core.pipeline.step.section_values`).
LOCATION = "location"
