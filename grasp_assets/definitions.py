"""The Dagster code location: assembles assets, checks, resources, jobs, schedules and sensors."""

import dagster as dg

from grasp_assets.assets import data, evaluation, graph, planner, reranker, text
from grasp_assets.automation import jobs, schedules, sensors
from grasp_assets.freshness import feedback_source, skb_source
from grasp_assets.integrity import manifest_checks
from grasp_assets.resources import MLflowTracking, SettingsResource
from grasp_assets.versions import with_code_version
from grasp_core.profiles import Profile


def build_definitions(profile: Profile) -> dg.Definitions:
    """The code location, each asset's code version computed for ``profile`` (the one its runs use)."""
    assets = dg.load_assets_from_modules([data, graph, text, planner, reranker, evaluation])
    return dg.Definitions(
        assets=[skb_source, feedback_source, *(with_code_version(a, profile) for a in assets)],
        asset_checks=manifest_checks(assets),
        resources={"settings": SettingsResource(), "mlflow": MLflowTracking()},
        jobs=jobs,
        schedules=schedules,
        sensors=sensors,
    )


defs = build_definitions(SettingsResource().get_profile())  # $GRASP_PROFILE, else cpu
