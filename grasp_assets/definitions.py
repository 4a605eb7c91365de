"""The Dagster code location: assembles assets, checks, resources, schedules and sensors."""

import dagster as dg

from grasp_assets.assets import data
from grasp_assets.resources import GraspSettings, MLflowTracking

defs = dg.Definitions(
    assets=dg.load_assets_from_modules([data]),
    resources={
        "settings": GraspSettings(),
        "mlflow": MLflowTracking(),
    },
)
