"""MLflow tracking without global state: every training/eval step logs into an explicit run.

The default store is a sqlite database inside :func:`grasp_core.home.grasp_home` (``$DAGSTER_HOME`` or the
checkout's ``dagster_home``; MLflow's file store is in maintenance mode); ``MLFLOW_TRACKING_URI`` points it
elsewhere. Artifacts (tables, plots) go next to it in ``mlartifacts/``. Runs of one dataset × round nest under a parent run, so the MLflow UI shows
them together and configurations compare side by side; a pipeline build (`grasp pipeline`, one per dataset or
variant) is a parent run of its own, holding the whole resolved settings as params and the headline results as
metrics, with the asset runs (and the round parents) it started nested under it.
"""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from grasp_core.environment import env
from grasp_core.home import grasp_home
from grasp_core.redact import MASK, is_secret_key, redact


def _default_uri() -> str:
    return env("MLFLOW_TRACKING_URI", f"sqlite:///{grasp_home() / 'mlflow.db'}")


@dataclass(frozen=True)
class TrackingConfig:
    tracking_uri: str = field(
        default_factory=_default_uri, metadata={"help": "MLflow tracking URI (sqlite by default)"}
    )
    experiment: str = field(default="grasp", metadata={"help": "MLflow experiment every run is logged to"})
    artifact_root: str = field(
        default_factory=lambda: env("GRASP_MLFLOW_ARTIFACTS", str(grasp_home() / "mlartifacts")),
        metadata={"help": "where run artifacts (tables, plots) are stored"},
    )


class TrackedRun:
    """One MLflow run; log through it, it is closed by :meth:`Tracker.run`."""

    def __init__(self, client, run_id: str):
        self.client, self.run_id = client, run_id

    def log_params(self, params: Mapping[str, object]) -> None:
        """Log ``params`` (in batches of 100, MLflow's limit); a credential is logged as ``***`` (by key, or inside a
        value such as a URI)."""
        from mlflow.entities import Param

        logged = [Param(k, MASK if is_secret_key(k) and v else redact(str(v))[:6000]) for k, v in params.items()]
        for start in range(0, len(logged), 100):
            self.client.log_batch(self.run_id, params=logged[start : start + 100])

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Log ``metrics`` (in batches of 1,000, MLflow's limit; keys made valid for MLflow, ``hit@1`` -> ``hit_at_1``)."""
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        logged = [Metric(_metric_key(k), float(v), now, step or 0) for k, v in metrics.items() if v is not None]
        for start in range(0, len(logged), 1000):
            self.client.log_batch(self.run_id, metrics=logged[start : start + 1000])

    def log_text(self, text: str, artifact_file: str) -> None:
        self.client.log_text(self.run_id, text, artifact_file)

    def log_png(self, png: bytes, artifact_file: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / artifact_file
            path.write_bytes(png)
            self.client.log_artifact(self.run_id, str(path))

    def set_tags(self, tags: Mapping[str, object]) -> None:
        for k, v in tags.items():
            self.client.set_tag(self.run_id, k, redact(str(v)))


def _metric_key(key: str) -> str:
    """MLflow keys allow alphanumerics, '_', '-', '.', ' ', ':' and '/' only; '@' is common in IR metric names."""
    return re.sub(r"[^\w\-. :/]", "_", key.replace("@", "_at_"))


class Tracker:
    def __init__(self, cfg: TrackingConfig | None = None):
        from mlflow.tracking import MlflowClient

        self.cfg = cfg or TrackingConfig()
        if self.cfg.tracking_uri.startswith("sqlite:///"):
            Path(self.cfg.tracking_uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self.client = MlflowClient(tracking_uri=self.cfg.tracking_uri)
        exp = self.client.get_experiment_by_name(self.cfg.experiment)
        self.experiment_id = (
            exp.experiment_id
            if exp is not None
            else self.client.create_experiment(
                self.cfg.experiment, artifact_location=Path(self.cfg.artifact_root).as_uri()
            )
        )

    @contextlib.contextmanager
    def run(
        self,
        name: str,
        params: Mapping[str, object] | None = None,
        tags: Mapping[str, object] | None = None,
        parent_run_id: str | None = None,
    ) -> Iterator[TrackedRun]:
        all_tags = {k: str(v) for k, v in (tags or {}).items()}
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        created = self.client.create_run(self.experiment_id, run_name=name, tags=all_tags)
        run = TrackedRun(self.client, created.info.run_id)
        if params:
            run.log_params(params)
        try:
            yield run
        except BaseException:
            self.client.set_terminated(run.run_id, "FAILED")
            raise
        self.client.set_terminated(run.run_id, "FINISHED")

    def parent_run(self, name: str, tags: Mapping[str, object], parent_run_id: str | None = None) -> str:
        """Id of the (open-ended) parent run named ``name`` with these tags, created on first use; with
        ``parent_run_id``, the one nested under that run (a pipeline build's own)."""
        tags = {**tags, "mlflow.parentRunId": parent_run_id} if parent_run_id else dict(tags)
        filt = " and ".join([f"tags.mlflow.runName = '{name}'"] + [f"tags.`{k}` = '{v}'" for k, v in tags.items()])
        found = self.client.search_runs([self.experiment_id], filter_string=filt, max_results=1)
        if found:
            return found[0].info.run_id
        created = self.client.create_run(self.experiment_id, run_name=name, tags={k: str(v) for k, v in tags.items()})
        self.client.set_terminated(created.info.run_id, "FINISHED")
        return created.info.run_id


def figure_png(fig) -> bytes:
    """A matplotlib figure as PNG bytes (for MLflow artifacts and Dagster markdown metadata)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()
