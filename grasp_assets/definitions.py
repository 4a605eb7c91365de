"""The Dagster code location: assembles assets, checks, resources, jobs, schedules and sensors."""

import dagster as dg

from grasp_assets.assets import data, evaluation, graph, planner, reranker, text
from grasp_assets.automation import jobs, schedules, sensors
from grasp_assets.resources import GraspSettings, MLflowTracking

defs = dg.Definitions(
    assets=dg.load_assets_from_modules([data, graph, text, planner, reranker, evaluation]),
    resources={"settings": GraspSettings(), "mlflow": MLflowTracking()},
    jobs=jobs,
    schedules=schedules,
    sensors=sensors,
)
