"""A variant partition through Dagster on the first assets of the tiny synth-prime graph (real materializations, a
real instance): what it does not change is hard-linked from the base partition — also from artifacts built before
the reuse index existed —, says so in its materialization, and keeps the variant's own code version; what it
changes is built. The whole DAG with a variant, MLflow and `grasp compare` is in tests/test_end_to_end_rebuilds.py."""

import os
import shutil

import dagster as dg
import pytest

from grasp_assets.definitions import build_definitions
from grasp_assets.freshness import observe_source, stale_resolver
from grasp_assets.resources import MLflowTracking, SettingsResource
from grasp_assets.stages import GRAPH_STORE, QUERIES, SKB
from grasp_assets.versions import code_version
from grasp_core import manifest
from grasp_core.pipeline.step import STEPS

DATASET = "synth-prime"
BUILT = [SKB, QUERIES, GRAPH_STORE]


def _materialize(instance, settings, key, tmp, assets=BUILT):
    profile = settings.get_profile(key)
    result = dg.materialize(
        list(build_definitions(profile).assets),
        selection=assets,
        partition_key=key,
        instance=instance,
        resources={"settings": settings, "mlflow": MLflowTracking(tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}")},
    )
    assert result.success
    return {a: result.asset_materializations_for_node(a)[0] for a in assets}


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "k7.toml").write_text("[rerank]\ntop_k = 7\n")  # read by none of BUILT
    (tmp_path / "experiments" / "dim.toml").write_text("[graph_store]\nbuffer_pool_gib = 1.0\n")  # graph_store's
    return tmp_path


@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "built-before-the-index"])
def test_a_variant_links_what_it_does_not_change_and_builds_what_it_does(home, indexed):
    instance = dg.DagsterInstance.ephemeral()
    settings = SettingsResource(profile="cpu", artifacts_root=str(home / "artifacts"), scale="tiny", n_queries=60)
    instance.add_dynamic_partitions("dataset", [DATASET, f"{DATASET}+k7", f"{DATASET}+dim"])
    for key in (DATASET, f"{DATASET}+k7", f"{DATASET}+dim"):
        observe_source(instance, key, settings.get_profile().dataset)
    base = _materialize(instance, settings, DATASET, home)
    if not indexed:  # artifacts of a build that predates the reuse index: found by their manifests
        shutil.rmtree(home / "artifacts" / ".reuse")

    k7 = _materialize(instance, settings, f"{DATASET}+k7", home)
    for asset in BUILT:
        assert k7[asset].metadata["reused_from"].value.startswith(DATASET), asset
        assert k7[asset].tags["dagster/data_version"] == base[asset].tags["dagster/data_version"]
        here, there = (home / "artifacts" / p / asset for p in (DATASET, f"{DATASET}+k7"))
        files = sorted(p.relative_to(here) for p in here.rglob("*") if p.is_file() and p.name != "_MANIFEST.json")
        assert files and all(os.stat(here / f).st_ino == os.stat(there / f).st_ino for f in files)  # stored once
        assert manifest.verify(there, deep=True).digest == manifest.read(here).digest

    variant = settings.get_profile(f"{DATASET}+dim")
    dim = _materialize(instance, settings, f"{DATASET}+dim", home)
    assert "reused_from" not in dim[GRAPH_STORE].metadata  # it reads graph_store: built again
    assert {a for a in (SKB, QUERIES) if "reused_from" in dim[a].metadata} == {SKB, QUERIES}
    # the variant's code version is recorded, so its own definitions find it fresh
    assert dim[GRAPH_STORE].tags["dagster/code_version"] == code_version(STEPS[GRAPH_STORE], variant)
    graph = build_definitions(variant).resolve_asset_graph()
    resolver = stale_resolver(instance, graph)
    assert {a: resolver.get_status(dg.AssetKey(a), f"{DATASET}+dim").value for a in BUILT} == dict.fromkeys(
        BUILT, "FRESH"
    )

    again = _materialize(instance, settings, f"{DATASET}+dim", home, [GRAPH_STORE])  # the same build: linked in place
    assert again[GRAPH_STORE].metadata["reused_from"].value.startswith(f"{DATASET}+dim")
