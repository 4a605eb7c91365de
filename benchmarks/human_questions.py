"""hpo's hand-written ``test-human`` set: answer counts per target type, and the retriever on it.

    python benchmarks/human_questions.py [--root ARTIFACT_ROOT] [--branches text|graph|both] [--rerank]

Reads the hpo graph from ``<root>/hpo/skb`` (default root: ``$GRASP_HOME`` or ``dagster_home/artifacts``),
computes every question's gold with :func:`grasp_core.questions.human_queries.human_queries` and writes the answer
counts per target type, the shapes and the registers. When the dataset's trained parts are there, it also
runs :class:`GraspRetriever` (``--branches``, reranker only with ``--rerank``) on the questions and on the
first 200 synthetic ``test`` queries for reference, and writes Hit@1, Hit@5, R@20 and MRR per target type
and shape; with the graph branch, McNemar's p on Hit@1 against the text branch alone. Output:
``benchmarks/results/test_human_hpo_<branches>[_rerank].json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pandas as pd
from harness import RESULTS, Run

from grasp_core.artifacts import default_root
from grasp_core.errors import MissingArtifactError
from grasp_core.io import atomic_file
from grasp_core.metrics import evaluate, per_query
from grasp_core.questions.human_queries import human_queries, load_questions
from grasp_core.skb.format import read_skb

N_SYNTH = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=None, help="artifact root (default: $GRASP_HOME or dagster_home/artifacts)")
    parser.add_argument("--branches", default="text", choices=("text", "graph", "both"))
    parser.add_argument("--rerank", action="store_true", help="also apply the trained reranker")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before the retriever's models load
    run = Run(branches=args.branches, rerank=args.rerank)
    root = Path(args.root) if args.root else default_root()

    graph = read_skb(root / "hpo" / "skb", with_queries=False)
    human = human_queries(graph)
    types = graph.nodes["type"].to_numpy()
    register = {q["query"]: q["register"] for q in load_questions()}
    table = pd.DataFrame(
        {
            "target": [types[a[0]] for a in human["answer_ids"]],
            "shape": human["template"].str.removeprefix("human:"),
            "register": human["query"].map(register),
            "answers": human["answer_ids"].map(len),
        }
    )
    out: dict = {
        "root": str(root),
        "questions": len(human),
        "answers_per_target": table.groupby("target")["answers"]
        .describe()[["count", "mean", "50%", "min", "max"]]
        .round(1)
        .to_dict("index"),
        "shapes": pd.crosstab(table["target"], table["shape"]).to_dict("index"),
        "registers": pd.crosstab(table["target"], table["register"]).to_dict("index"),
    }
    try:
        out["retrieval"] = _retrieval(root, graph, human, table, args.branches, args.rerank)
    except MissingArtifactError as exc:
        out["retrieval"] = f"not run: {exc}"
    name = f"test_human_hpo_{args.branches}{'_rerank' if args.rerank else ''}"
    run.write(RESULTS / f"{name}.json", out)
    with atomic_file(RESULTS / f"{name}.md", "w") as handle:
        handle.write(_markdown(out))


def _retrieval(root: Path, graph, human: pd.DataFrame, table: pd.DataFrame, branches: str, rerank: bool) -> dict:
    from grasp_core.eval.significance import mcnemar
    from grasp_core.metrics import per_query_hits
    from grasp_core.retriever import GraspRetriever

    start = time.perf_counter()
    retriever = GraspRetriever.from_artifacts("hpo", root, branches=branches, rerank=rerank)
    synth = retriever.components.split("test").head(N_SYNTH)
    out: dict = {"branches": branches, "rerank": rerank, "text_retriever": retriever.components.profile.text_retriever}
    if branches != "text":
        out["planner"] = retriever.planner_name
    gold = [list(map(int, a)) for a in human["answer_ids"]]
    for split, queries in (("test-human", human), (f"test (first {N_SYNTH})", synth)):
        rankings = [r.ranking for r in retriever.retrieve(queries["query"].tolist())]
        answers = [list(map(int, a)) for a in queries["answer_ids"]]
        out[split] = {k: round(v, 1) for k, v in evaluate(rankings, answers, graph.num_nodes).items()}
        if split == "test-human":
            hits = per_query(rankings, gold, graph.num_nodes).assign(target=table["target"], shape=table["shape"])
            for col in ("target", "shape"):
                means = (100 * hits.groupby(col)[["hit@1", "hit@5"]].mean()).round(1)
                out[f"test-human by {col}"] = means.assign(n=hits.groupby(col).size()).to_dict("index")
            human_rankings = rankings
    if branches != "text":  # paired against the text branch alone on the same questions
        text = GraspRetriever(retriever.components, branches="text", rerank=False)
        text_rankings = [r.ranking for r in text.retrieve(human["query"].tolist())]
        ours, base = (per_query_hits(r, gold, graph.num_nodes) for r in (human_rankings, text_rankings))
        _, p = mcnemar(ours, base)
        out["test-human vs text alone"] = {
            "text hit@1": round(100 * float(base.mean()), 1),
            "hit@1": round(100 * float(ours.mean()), 1),
            "wins": int((ours & ~base).sum()),
            "losses": int((~ours & base).sum()),
            "mcnemar_p": round(p, 4),
        }
    out["seconds"] = round(time.perf_counter() - start, 1)
    return out


def _markdown(out: dict) -> str:
    lines = [f"# hpo test-human ({out['questions']} hand-written questions)", "", "Answers per question:", ""]
    lines += [pd.DataFrame(out["answers_per_target"]).T.to_markdown(), "", "Shapes:", ""]
    lines += [pd.DataFrame(out["shapes"]).T.to_markdown(), "", "Registers:", ""]
    lines += [pd.DataFrame(out["registers"]).T.to_markdown(), ""]
    ret = out["retrieval"]
    if isinstance(ret, str):
        return "\n".join([*lines, ret, ""])
    planner = f", planner={ret['planner']}" if "planner" in ret else ""
    lines += [
        f"Retrieval (branches={ret['branches']}, rerank={ret['rerank']}, text={ret['text_retriever']}{planner}):",
        "",
    ]
    splits = {k: v for k, v in ret.items() if k.startswith("test") and " by " not in k and " vs " not in k}
    lines += [pd.DataFrame(splits).T.to_markdown(), ""]
    for col in ("target", "shape"):
        lines += [pd.DataFrame(ret[f"test-human by {col}"]).T.to_markdown(), ""]
    if "test-human vs text alone" in ret:
        lines += ["test-human, paired with text alone (McNemar on Hit@1):", ""]
        lines += [pd.DataFrame([ret["test-human vs text alone"]]).to_markdown(index=False), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
