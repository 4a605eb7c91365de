"""The code location loads, and its assets, checks, partitions, jobs, schedule and sensors are what users see."""

import dagster as dg

from grasp_assets.definitions import defs

EXPECTED_ASSETS = {
    "skb_source",
    "feedback_source",
    "skb",
    "queries",
    "node_embeddings",
    "vector_indexes",
    "graph_store",
    "entity_tables",
    "text_index",
    "mfar_model",
    "text_rankings",
    "teacher_plans",
    "planner_base",
    "sft_adapter",
    "reward_table",
    "rft_samples",
    "planner",
    "reranker_hard_negatives",
    "reranker",
    "eval_metrics",
    "ablations",
    "latency",
    "release",
}


def test_definitions_load_with_every_asset():
    graph = defs.resolve_asset_graph()
    assert {k.to_user_string() for k in graph.get_all_asset_keys()} == EXPECTED_ASSETS


def test_queries_read_the_feedback_source():
    graph = defs.resolve_asset_graph()
    assert dg.AssetKey("feedback_source") in graph.get(dg.AssetKey("queries")).parent_keys


def test_partitions_dataset_and_round():
    graph = defs.resolve_asset_graph()
    planner = graph.get(dg.AssetKey("planner"))
    assert isinstance(planner.partitions_def, dg.MultiPartitionsDefinition)
    assert {d.name for d in planner.partitions_def.partitions_defs} == {"dataset", "round"}
    assert isinstance(graph.get(dg.AssetKey("skb")).partitions_def, dg.DynamicPartitionsDefinition)


def test_blocking_gate_check_on_planner_and_promotion_guard_on_release():
    checks = {spec.key.name: spec for a in defs.assets if isinstance(a, dg.AssetsDefinition) for spec in a.check_specs}
    assert checks["val_hit1_improved"].blocking
    assert checks["not_worse_than_served"].blocking and checks["not_worse_than_served"].asset_key.path == ["release"]
    assert {"schema_valid", "no_dangling_edges", "answers_exist", "split_sizes", "counts_match_skb"} <= set(checks)


def test_jobs_schedule_and_sensors():
    assert {j.name for j in defs.jobs} == {"prepare", "rl_round", "finish"}
    assert defs.resolve_schedule_def("weekly_retraining").cron_schedule == "0 3 * * 0"
    assert {s.name for s in defs.sensors} == {
        "chain_training_stages",
        "continue_after_a_failed_gate",
        "dataset_registry",
        "source_changes",
        "feedback_growth",
        "release_dead_runs_sensor",
    }


def test_heavy_assets_share_a_pool_and_retry():
    graph = defs.resolve_asset_graph()
    for name in ("node_embeddings", "mfar_model", "sft_adapter", "rft_samples", "planner", "reranker"):
        node = graph.get(dg.AssetKey(name))
        assert node.pools == {"heavy"}, name
    assert all(a.op.retry_policy is not None for a in defs.assets if isinstance(a, dg.AssetsDefinition))


def test_run_config_overrides_only_the_set_fields_of_one_profile_section():
    from grasp_assets.assets.planner import GRPORunConfig
    from grasp_assets.resources import SettingsResource
    from grasp_assets.steps import profile_override

    settings = SettingsResource(profile="cpu")
    assert profile_override(settings, "grpo", GRPORunConfig()) is None
    changed = profile_override(settings, "grpo", GRPORunConfig(max_steps=20))["grpo"]
    base = settings.get_profile().grpo
    assert changed.max_steps == 20 and changed.learning_rate == base.learning_rate and changed.beta == base.beta
