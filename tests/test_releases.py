"""Served releases and the promotion guard's decision, on artifact directories written as the steps write them."""

from __future__ import annotations

import pytest

from grasp_core import manifest
from grasp_core.artifacts import Artifacts
from grasp_core.experiments import VariantArtifacts
from grasp_core.io import atomic_dir
from grasp_core.pipeline.release import decide
from grasp_core.releases import KEEP, ReleaseArtifacts, promote, releases_dir, served_artifacts, served_record


def _build(art: Artifacts, name: str, text: str) -> None:
    with atomic_dir(art.path(name)) as tmp:
        (tmp / "model.txt").write_text(text)
    manifest.write(art.path(name))


def test_the_guard_promotes_what_is_not_worse_beyond_the_tolerance_on_every_set():
    assert decide({"val": 40.0}, None, 1.0) == (True, "first release of this partition")
    promoted, why = decide({"val": 39.5, "feedback": 52.0}, {"val": 40.0, "feedback": 50.0}, 1.0)
    assert (
        promoted and why == "not worse than the served release beyond 1 point (val 40.0 -> 39.5, feedback 50.0 -> 52.0)"
    )
    refused, why = decide({"val": 45.0, "feedback": 48.0}, {"val": 40.0, "feedback": 50.0}, 1.0)
    assert not refused  # better on val does not buy a loss on the feedback questions
    assert why == "kept the served release: Hit@1 fell by more than 1 point on feedback 50.0 -> 48.0"
    assert decide({"val": 40.0, "feedback": 50.0}, {"val": 40.0}, 0.0)[0]  # a set the served one never answered


def test_a_release_keeps_its_files_while_the_build_is_rebuilt_and_only_the_newest_are_kept(tmp_path):
    art = Artifacts("shop", tmp_path)
    assert served_record("shop", tmp_path) is None and served_artifacts("shop", tmp_path) == art  # nothing served
    _build(art, "reranker", "first")
    _build(art, "release", "decision")  # the guard's own artifact is not part of a release
    assert promote(art, "shop", {"val": 40.0}) == 1
    served = served_artifacts("shop", tmp_path)
    assert isinstance(served, ReleaseArtifacts) and served.built() == [("reranker", None)]
    assert (served.path("reranker") / "model.txt").stat().st_ino == (art.path("reranker") / "model.txt").stat().st_ino
    manifest.verify(served.path("reranker"), deep=True)

    _build(art, "reranker", "second")  # a rebuild writes a new directory: the release keeps the first
    assert (served.path("reranker") / "model.txt").read_text() == "first"
    for n in range(2, 2 + KEEP):
        assert promote(art, "shop", {"val": 40.0 + n}) == n
    record = served_record("shop", tmp_path)
    assert (
        record["release"] == 1 + KEEP and record["previous"] == KEEP and record["metrics"] == {"val": 40.0 + 1 + KEEP}
    )
    kept = sorted(int(p.name) for p in releases_dir("shop", tmp_path).iterdir() if p.name.isdigit())
    assert kept == list(range(2, 2 + KEEP))
    assert (served_artifacts("shop", tmp_path).path("reranker") / "model.txt").read_text() == "second"


def test_a_variant_has_releases_of_its_own(tmp_path):
    variant = VariantArtifacts("hpo", tmp_path, key="hpo+k20")
    _build(variant, "reranker", "k20")
    promote(variant, "hpo+k20", {})
    assert served_record("hpo", tmp_path) is None
    served = served_artifacts("hpo+k20", tmp_path)
    assert served.dataset == "hpo" and (served.path("reranker") / "model.txt").read_text() == "k20"


@pytest.mark.parametrize("key", ["hpo", "hpo+k20"])
def test_before_the_first_release_serving_reads_the_build(tmp_path, key):
    assert served_artifacts(key, tmp_path).path("reranker") == tmp_path / key / "reranker"
