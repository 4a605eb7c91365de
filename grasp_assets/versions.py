"""Each asset's code version, derived from what changes its artifact, so Dagster marks it stale after a change.

An asset's version hashes (1) the profile sections its step reads (:data:`CONFIG_SECTIONS`, values of the run's
profile) and (2) the source of the modules that state and run its step: the asset's module in
``grasp_assets/assets/`` and the ``grasp_core.pipeline`` modules it calls. Changing a setting marks exactly the
assets that read it stale; changing a step's module marks the assets of that module stale (Dagster then
reports their downstream as stale once they are rematerialized with new data).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import sys
from types import ModuleType

import dagster as dg

from grasp_assets.stages import (
    ABLATIONS,
    ENTITY_TABLES,
    EVAL_METRICS,
    GRAPH_STORE,
    LATENCY,
    MFAR_MODEL,
    NODE_EMBEDDINGS,
    PLANNER,
    PLANNER_BASE,
    QUERIES,
    RERANKER,
    RERANKER_HARD_NEGATIVES,
    REWARD_TABLE,
    RFT_SAMPLES,
    SFT_ADAPTER,
    SKB,
    TEACHER_PLANS,
    TEXT_INDEX,
    TEXT_RANKINGS,
    VECTOR_INDEXES,
)
from grasp_core.profiles import Profile

# The profile sections (fields of :class:`grasp_core.profiles.Profile`) each asset's step reads.
CONFIG_SECTIONS: dict[str, tuple[str, ...]] = {
    SKB: ("dataset",),
    QUERIES: ("dataset",),
    NODE_EMBEDDINGS: ("encoder",),
    VECTOR_INDEXES: ("index",),
    GRAPH_STORE: ("graph_store",),
    ENTITY_TABLES: ("extractor", "gazetteer", "llm_extractor", "extractor_endpoint"),
    TEXT_INDEX: ("bm25", "mfar"),
    MFAR_MODEL: ("mfar",),
    TEXT_RANKINGS: ("text_retriever",),
    TEACHER_PLANS: ("teacher", "teacher_endpoint", "sft", "eval", "planner", "policy_train"),
    PLANNER_BASE: ("planner_model", "inference", "planner", "teacher", "policy", "policy_train"),
    SFT_ADAPTER: ("sft", "inference", "planner_model", "planner", "teacher", "policy", "policy_train"),
    REWARD_TABLE: ("reward", "inference"),
    RFT_SAMPLES: ("rl", "inference", "planner", "teacher", "policy", "policy_train"),
    PLANNER: ("sft", "rl", "grpo", "reward", "inference", "planner", "teacher", "policy", "policy_train"),
    RERANKER_HARD_NEGATIVES: ("reranker_kind", "ltr", "rl", "inference"),
    RERANKER: (
        "reranker_kind",
        "ltr",
        "rerank_features",
        "cross_encoder",
        "causal_reranker",
        "reranker_docs",
        "reranker_train",
        "rerank",
    ),
    EVAL_METRICS: ("eval", "rerank", "inference"),
    ABLATIONS: ("eval", "rerank", "inference"),
    LATENCY: ("eval",),
}


def config_of(name: str, profile: Profile) -> dict:
    """The settings asset ``name`` reads, as plain values."""
    out = {}
    for section in CONFIG_SECTIONS[name]:
        value = getattr(profile, section)
        out[section] = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
    return out


def _step_modules(asset: dg.AssetsDefinition) -> list[ModuleType]:
    """The asset's module and the ``grasp_core.pipeline`` modules it refers to."""
    own = sys.modules[asset.op.compute_fn.decorated_fn.__module__]
    found = {own.__name__: own}
    for value in vars(own).values():
        module = value if inspect.ismodule(value) else inspect.getmodule(value) if callable(value) else None
        if module is not None and module.__name__.startswith("grasp_core.pipeline"):
            found[module.__name__] = module
    return [found[name] for name in sorted(found)]


def code_version(asset: dg.AssetsDefinition, profile: Profile) -> str:
    name = asset.key.to_user_string()
    digest = hashlib.sha256(json.dumps(config_of(name, profile), sort_keys=True, default=str).encode())
    for module in _step_modules(asset):
        digest.update(inspect.getsource(module).encode())
    return digest.hexdigest()[:16]


def with_code_version(asset: dg.AssetsDefinition, profile: Profile) -> dg.AssetsDefinition:
    version = code_version(asset, profile)
    return asset.map_asset_specs(lambda spec: spec.replace_attributes(code_version=version))
