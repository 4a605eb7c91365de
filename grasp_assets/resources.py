"""Resources: the run's settings (profile, artifact root) and MLflow tracking, both swappable by config/env."""

from __future__ import annotations

import dataclasses
import os

import dagster as dg

from grasp_core.artifacts import Artifacts, default_root
from grasp_core.profiles import Profile, get_profile, with_graph_store
from grasp_core.tracking import Tracker, TrackingConfig


class GraspSettings(dg.ConfigurableResource):
    """Which profile (`cpu` offline default, `gpu` paper models) and where artifacts live."""

    profile: str = ""  # empty: $GRASP_PROFILE, else "cpu" (read when used, not at import)
    artifacts_root: str = ""  # empty: $GRASP_HOME, else dagster_home/artifacts
    scale: str = ""  # empty: the profile's synthetic scale
    n_queries: int = 0  # 0: the profile's number of synthesized queries
    graph_store: str = ""  # empty: the profile's graph store backend (ladybug | neo4j)
    traversal: str = ""  # empty: the profile's plan traversal (arrays | store)

    def get_profile(self) -> Profile:
        profile = get_profile(self.profile or os.environ.get("GRASP_PROFILE", "cpu"))
        changes = {k: v for k, v in {"scale": self.scale, "n_queries": self.n_queries}.items() if v}
        if changes:
            profile = profile.replace(dataset=dataclasses.replace(profile.dataset, **changes))
        return with_graph_store(profile, self.graph_store, self.traversal)

    def artifacts(self, dataset: str) -> Artifacts:
        return Artifacts.for_dataset(dataset, self.artifacts_root or default_root())


class MLflowTracking(dg.ConfigurableResource):
    """MLflow tracking store (sqlite under dagster_home by default; MLFLOW_TRACKING_URI points elsewhere)."""

    tracking_uri: str = ""
    experiment: str = "grasp"

    def tracker(self) -> Tracker:
        defaults = TrackingConfig()
        return Tracker(
            TrackingConfig(tracking_uri=self.tracking_uri or defaults.tracking_uri, experiment=self.experiment)
        )
