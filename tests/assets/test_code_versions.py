"""Code versions come from what changes an artifact: change one profile setting and Dagster reports exactly the
materialized assets that read it as stale (real materializations, real instance, Dagster's own staleness)."""

import dataclasses
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.data_version import StaleStatus

from grasp_assets.definitions import build_definitions
from grasp_assets.freshness import stale_resolver
from grasp_assets.resources import MLflowTracking, SettingsResource
from grasp_assets.stages import GRAPH_STORE, QUERIES, SKB
from grasp_assets.versions import code_version, step_of
from grasp_core.pipeline.step import STEPS

DATASET = "synth-prime"
BUILT = [SKB, QUERIES, GRAPH_STORE]
ROOT: list[Path] = []  # the artifact root of the module's build


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("versions")
    ROOT[:] = [tmp / "artifacts"]
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("dataset", [DATASET])
    settings = SettingsResource(profile="cpu", artifacts_root=str(tmp / "artifacts"), scale="tiny", n_queries=60)
    mlflow = MLflowTracking(tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}", experiment="test")
    profile = settings.get_profile()
    result = dg.materialize(
        list(build_definitions(profile).assets),
        selection=BUILT,
        partition_key=DATASET,
        instance=instance,
        resources={"settings": settings, "mlflow": mlflow},
    )
    assert result.success
    return instance, profile


def stale(instance, profile) -> set[str]:
    """The assets Dagster reports stale for ``profile``'s definitions (``MISSING`` ones are not built)."""
    defs = build_definitions(profile)
    resolver = stale_resolver(instance, defs.resolve_asset_graph())
    status = {
        k.to_user_string(): resolver.get_status(k, DATASET)
        for k in defs.resolve_asset_graph().materializable_asset_keys
    }
    assert {k for k, s in status.items() if s != StaleStatus.MISSING} == set(BUILT)
    return {k for k, s in status.items() if s == StaleStatus.STALE}


def test_unchanged_profile_leaves_everything_fresh(built):
    assert stale(*built) == set()


def test_an_unchanged_rebuild_keeps_its_data_version_and_leaves_what_reads_it_fresh(built, tmp_path):
    """skb rematerialized from the same source: the same content digest, so queries and the graph store (which
    read it) stay fresh in Dagster's own staleness; the data version is the artifact manifest's digest."""
    from grasp_core import manifest

    instance, profile = built
    settings = SettingsResource(profile="cpu", artifacts_root=str(ROOT[0]), scale="tiny", n_queries=60)
    mlflow = MLflowTracking(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", experiment="test")
    before = instance.get_latest_materialization_event(dg.AssetKey(SKB)).asset_materialization
    result = dg.materialize(
        list(build_definitions(profile).assets),
        selection=[SKB],
        partition_key=DATASET,
        instance=instance,
        resources={"settings": settings, "mlflow": mlflow},
    )
    assert result.success
    [after] = result.asset_materializations_for_node(SKB)
    digest = manifest.read(settings.artifacts(DATASET).path(SKB)).digest
    assert after.tags["dagster/data_version"] == before.tags["dagster/data_version"] == digest
    assert stale(instance, profile) == set()


def test_a_setting_marks_exactly_the_assets_that_read_it_stale(built):
    instance, profile = built
    neo = profile.replace(graph_store=dataclasses.replace(profile.graph_store, batch_size=5_000))
    assert stale(instance, neo) == {GRAPH_STORE}
    reseeded = profile.replace(dataset=dataclasses.replace(profile.dataset, seed=1))
    assert stale(instance, reseeded) == {SKB, QUERIES}
    assert stale(instance, profile.replace(encoder=dataclasses.replace(profile.encoder, batch_size=8))) == set()


def test_every_asset_runs_a_declared_step_and_versions_follow_its_settings():
    from grasp_core.profiles import get_profile

    defs = build_definitions(get_profile("cpu"))
    assets = {a.key.to_user_string(): a for a in defs.assets if isinstance(a, dg.AssetsDefinition)}
    assert set(STEPS) == set(assets) and all(step_of(a).name == n for n, a in assets.items())
    cpu, gpu = get_profile("cpu"), get_profile("gpu")
    # the encoder differs between profiles: node embeddings change version, the graph store does not
    assert code_version(STEPS["node_embeddings"], cpu) != code_version(STEPS["node_embeddings"], gpu)
    assert code_version(STEPS["graph_store"], cpu) == code_version(STEPS["graph_store"], gpu)


def test_where_a_source_lies_is_not_part_of_any_version(monkeypatch, tmp_path):
    """A checkout and an installed image (deploy/) find the STaRK and user SKB folders at other paths: the same
    versions and MLflow params (the source's files are fingerprinted instead); a setting still counts."""
    from grasp_core.pipeline.step import section_values
    from grasp_core.profiles import get_profile

    def versions():
        profile = get_profile("smoke")
        return {n: code_version(s, profile) for n, s in STEPS.items()}, section_values(profile, ["dataset"])

    here, params = versions()
    assert "stark_root" not in params["dataset"] and "user_skb_root" not in params["dataset"]
    for var in ("GRASP_STARK_ROOT", "GRASP_STARK_QA_ROOT", "GRASP_USER_SKBS"):
        monkeypatch.setenv(var, str(tmp_path / var))
    assert versions() == (here, params)
    monkeypatch.setenv("GRASP_PARAPHRASE_MODEL", "another-model")
    assert versions()[0][SKB] != here[SKB]


def _edited_library(tmp_path, name: str, file: str, old: str, new: str) -> Path:
    """A copy of the library with one edit (code versions read the source from a root)."""
    import shutil

    import grasp_core

    root = tmp_path / name / "grasp_core"
    shutil.copytree(Path(grasp_core.__file__).parent, root, ignore=shutil.ignore_patterns("__pycache__"))
    text = (root / file).read_text()
    assert old in text
    (root / file).write_text(text.replace(old, new))
    return root


def test_editing_a_library_function_changes_the_versions_of_exactly_the_steps_that_run_it(tmp_path):
    """One function of the reranker's features edited: the steps whose code reaches it change version, the data,
    graph and text steps do not; an edit of the node embedding builder changes the node embeddings' alone."""
    from grasp_core.profiles import get_profile

    cpu = get_profile("cpu")
    before = {name: code_version(step, cpu) for name, step in STEPS.items()}

    def changed(root: Path) -> set[str]:
        return {name for name, step in STEPS.items() if code_version(step, cpu, root) != before[name]}

    marker = "    def __init__(\n        self,\n        skb: SKB,\n        doc_vectors"
    features = _edited_library(tmp_path, "a", "rerank/features.py", marker, "    x = 1\n\n" + marker)
    # the steps that run the answer path (which can rerank) change; the data, graph and text steps do not
    plans = {"teacher_plans", "planner_base", "sft_adapter", "reward_table", "rft_samples", "planner"}
    assert changed(features) == plans | {
        "reranker_hard_negatives",
        "reranker",
        "eval_metrics",
        "ablations",
        "latency",
        "release",
    }
    marker = "def build_node_embeddings("
    embeddings = _edited_library(tmp_path, "b", "embed/node_embeddings.py", marker, "x = 1\n\n\n" + marker)
    assert changed(embeddings) == set()  # a new constant no step uses
    embeddings = _edited_library(tmp_path, "c", "embed/node_embeddings.py", marker, marker + "  ")
    assert changed(embeddings) == {"node_embeddings"}


def test_every_step_declares_exactly_the_profile_sections_its_code_reads():
    """Read from the code each step runs (every branch: the LM and the policy planner, each reranker kind); the
    end-to-end run checks the same at run time for the branches it takes."""
    from grasp_assets.versions import profile_reads

    assert {n: sorted(s.reads) for n, s in STEPS.items()} == {n: sorted(profile_reads(s)) for n, s in STEPS.items()}
    assert {"execution", "reward"} <= STEPS["eval_metrics"].reads and "execution" in STEPS["teacher_plans"].reads


def test_a_step_reads_only_the_profile_sections_it_declares(tmp_path):
    from grasp_core.artifacts import Artifacts
    from grasp_core.components import Components
    from grasp_core.errors import GraspError
    from grasp_core.profiles import get_profile

    components = Components(Artifacts("hpo", tmp_path), get_profile("cpu"), reads=frozenset({"rerank"}))
    assert components.profile.rerank.top_k == get_profile("cpu").rerank.top_k
    with pytest.raises(GraspError, match="reads the profile section 'encoder', which it does not declare"):
        components.encoder  # noqa: B018 (a part of the components reads its section)


def test_a_step_reads_only_what_its_asset_declares(tmp_path):
    from grasp_core.artifacts import Artifacts
    from grasp_core.errors import GraspError

    art = Artifacts("hpo", tmp_path, readable=frozenset({SKB}))
    with pytest.raises(
        GraspError, match="reads 'queries', which its asset does not declare: add it to the asset's deps"
    ):
        art.require(QUERIES)
    with pytest.raises(GraspError, match="has not been built yet"):  # declared: the usual missing-artifact error
        art.require(SKB)
