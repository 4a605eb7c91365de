"""The ``rft_samples`` artifact of a round: the sampled, executed and scored plans, written once for either planner."""

from __future__ import annotations

import pandas as pd

from grasp_core.components import Components
from grasp_core.io import atomic_dir, write_json
from grasp_core.planner.samples import informative_queries


def write_rft_samples(components: Components, round_key: str, samples: pd.DataFrame, start) -> dict:
    """Write the round's samples (and the planner they came from); return their reward summary."""
    with atomic_dir(components.art.path("rft_samples", round_key)) as tmp:
        samples.to_parquet(tmp / "samples.parquet")
        write_json(tmp / "source.json", {"planner": str(start)})
    per_query = samples.groupby("qid")["reward"]
    return {
        "round": round_key,
        "queries": int(samples["qid"].nunique()),
        "samples": len(samples),
        "reward_mean": round(float(samples["reward"].mean()), 4),
        "reward_std": round(float(samples["reward"].std()), 4),
        "queries_with_positive": int((per_query.max() > 0).sum()),
        "informative_queries": len(informative_queries(samples)),
        "path": str(components.art.path("rft_samples", round_key)),
    }
