"""The cross-dataset ablation table: per-dataset Hit@1 and McNemar p, combined by Stouffer with signed effects."""

from grasp_core.artifacts import Artifacts
from grasp_core.eval.significance import stouffer
from grasp_core.io import atomic_dir, write_json
from grasp_core.report import cross_dataset_report


def ablations(art: Artifacts, rows: list[tuple[str, str, float, str]]) -> None:
    with atomic_dir(art.path("ablations")) as tmp:
        write_json(
            tmp / "ablations.json",
            {
                "queries": 100,
                "progression": [],
                "rows": [
                    {
                        "setting": s,
                        "reranker": r,
                        "hit@1": h,
                        "hit@5": 0.0,
                        "recall@20": 0.0,
                        "mrr": 0.0,
                        "p (McNemar)": p,
                    }
                    for s, r, h, p in rows
                ],
            },
        )


def test_stouffer_combines_signed_mcnemar_p_values_across_datasets(tmp_path):
    a, b, c = (Artifacts.for_dataset(d, tmp_path) for d in ("hpo", "synth-mag", "synth-prime"))
    ablations(
        a,
        [
            ("GRASP (round 2)", "no", 52.0, "—"),
            ("text only", "no", 56.0, "0.571"),
            ("graph only", "no", 32.0, "3.59e-05"),
        ],
    )
    ablations(
        b,
        [("GRASP (round 1)", "no", 40.0, "—"), ("text only", "no", 30.0, "0.02"), ("graph only", "no", 20.0, "0.001")],
    )
    table = cross_dataset_report([a, b, c])  # synth-prime has no ablations yet: left out
    lines = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| ")}
    assert "`hpo`, `synth-mag`" in table and "synth-prime" not in table
    assert lines["GRASP"].startswith("| GRASP | no | 52.0 | 40.0 | — |")
    # text only: worse on hpo (+4 for text), better on synth-mag (-10): the signs differ, so the effects partly cancel
    assert f"{stouffer([0.571, 0.02], [4.0, -10.0]):.3g}" in lines["text only"]
    assert "56.0 (p 0.571)" in lines["text only"] and "30.0 (p 0.02)" in lines["text only"]
    graph_p = stouffer([3.59e-05, 0.001], [-20.0, -20.0])
    assert graph_p < 3.59e-05 and f"{graph_p:.3g}" in lines["graph only"]


def test_no_ablations_built_says_so(tmp_path):
    assert "no dataset" in cross_dataset_report([Artifacts.for_dataset("hpo", tmp_path)])
