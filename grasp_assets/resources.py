"""Resources: the run's settings (profile, artifact root) and MLflow tracking, both swappable by config/env."""

from __future__ import annotations

import dataclasses

import dagster as dg

from grasp_core.artifacts import Artifacts, default_root
from grasp_core.environment import env
from grasp_core.experiments import artifacts_for, base_dataset, load_variant, split_key
from grasp_core.profiles import Profile, get_profile, with_graph_store
from grasp_core.tracking import Tracker, TrackingConfig


class SettingsResource(dg.ConfigurableResource):
    """Which profile (`cpu` offline default, `gpu` paper models) and where artifacts live."""

    profile: str = ""  # empty: $GRASP_PROFILE, else "cpu" (read when used, not at import)
    artifacts_root: str = ""  # empty: $GRASP_HOME, else dagster_home/artifacts
    scale: str = ""  # empty: the profile's synthetic scale
    n_queries: int = 0  # 0: the profile's number of synthesized queries
    graph_store: str = ""  # empty: the profile's graph store backend (ladybug | neo4j)
    traversal: str = ""  # empty: the profile's plan traversal (arrays | store)

    def get_profile(self, partition: str | None = None) -> Profile:
        """The run's profile; for a variant's partition key (``hpo+rerank-k20``), with the variant's overrides
        (:mod:`grasp_core.experiments`). The run's own changes (scale, queries, graph store) apply last."""
        name = self.profile or env("GRASP_PROFILE", "cpu")
        variant = split_key(partition)[1] if partition else None
        found = load_variant(variant) if variant else None
        profile = get_profile(found.profile or name) if found else get_profile(name)
        if found:
            profile = found.apply(profile)
        changes = {k: v for k, v in {"scale": self.scale, "n_queries": self.n_queries}.items() if v}
        if changes:
            profile = profile.replace(dataset=dataclasses.replace(profile.dataset, **changes))
        return with_graph_store(profile, self.graph_store, self.traversal)

    def artifacts(self, dataset: str) -> Artifacts:
        """The artifacts of a partition key: a dataset's, or a variant's (under ``<root>/hpo+rerank-k20/``)."""
        return artifacts_for(dataset, self.artifacts_root or default_root())


class MLflowTracking(dg.ConfigurableResource):
    """MLflow tracking store (sqlite under dagster_home by default; MLFLOW_TRACKING_URI points elsewhere)."""

    tracking_uri: str = ""
    experiment: str = ""  # empty: one experiment per dataset, grasp/<dataset> (its variants' runs side by side)

    def tracker(self, dataset: str | None = None) -> Tracker:
        """The tracker of ``dataset``'s experiment (a variant's partition key: its base dataset's)."""
        defaults = TrackingConfig()
        experiment = self.experiment or (f"grasp/{base_dataset(dataset)}" if dataset else "grasp")
        return Tracker(TrackingConfig(tracking_uri=self.tracking_uri or defaults.tracking_uri, experiment=experiment))
