"""Human-readable explanation of a retrieval result: for each answer, which branch found it and why."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # formatting needs no model: importing this module loads no retriever
    from grasp_core.retriever import Result


def _rank(value: int | None) -> str:
    return "—" if value is None else f"#{value}"


def format_result(result: Result, show: int = 10) -> str:
    lines = [f"Query: {result.query}", ""]
    if result.truncated:
        cuts = "; ".join(f"{model} {note}" for model, note in result.truncated.items())
        lines += [f"Truncated to fit the models' windows: {cuts}", ""]
    if result.entity_table is not None:
        lines += ["Entity table:", *("  " + line for line in result.entity_table.render().splitlines()), ""]
    if result.plan is not None:
        state = "valid" if result.plan_valid else f"invalid ({result.plan_error})"
        lines += [f"Plan ({state}): {result.plan}"]
        if result.cypher:
            lines += ["Cypher:", *("  " + line for line in result.cypher.splitlines())]
        if result.graph_weight is not None:
            lines.append(f"Fusion: the graph ranking at weight {result.graph_weight:g} (the plan chooser's pick)")
        for var, bindings in result.bindings.items():
            shown = ", ".join(f"{name} ({score:.2f})" for _, name, score in bindings[:5])
            lines.append(f"Bindings of {var}: {shown}")
        lines.append("")
    lines.append("Answers:")
    for i, a in enumerate(result.answers[:show], 1):
        rr = "" if a.reranker_score is None else f", reranker score {a.reranker_score:.3f}"
        lines.append(f"{i:>3}. {a.name} [{a.type}, {a.key}]  score {a.score:.4f}")
        lines.append(
            f"     found by {a.found_by}: text {_rank(a.text_rank)}, graph {_rank(a.graph_rank)}, fused {_rank(a.fused_rank)}{rr}"
        )
        if a.reranker_contributions:
            shown = ", ".join(f"{name} {value:+.3f}" for name, value in a.reranker_contributions)
            lines.append(f"     reranker: {shown}")
        for path in a.paths[:3]:
            lines.append("     path: " + " → ".join(path))
    seconds = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in result.seconds.items() if v)
    lines += ["", f"Time: {seconds}"]
    return "\n".join(lines)


def result_json(result: Result, show: int = 10) -> dict:
    """The same explanation as :func:`format_result`, as JSON (what ``grasp serve``'s ``/query`` answers)."""
    answers = [
        {
            **a.to_json(),
            "name": a.name,
            "type": a.type,
            "found_by": a.found_by,
            "text_rank": a.text_rank,
            "graph_rank": a.graph_rank,
            "fused_rank": a.fused_rank,
            "reranker_score": a.reranker_score,
            "paths": a.paths,
        }
        for a in result.answers[:show]
    ]
    return {
        "query": result.query,
        "answers": answers,
        "entity_table": result.entity_table.to_json() if result.entity_table is not None else None,
        "plan": result.plan,
        "plan_valid": result.plan_valid,
        "plan_error": result.plan_error,
        "cypher": result.cypher,
        "graph_weight": result.graph_weight,
        "bindings": {v: [{"node_id": i, "name": n, "score": s} for i, n, s in bs] for v, bs in result.bindings.items()},
        "ms": {k: round(v * 1000, 1) for k, v in result.seconds.items()},
    }
