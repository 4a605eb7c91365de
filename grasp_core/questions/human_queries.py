"""The hand-written ``test-human`` and ``val-human`` questions of the ``hpo`` SKB, with gold computed from the graph.

``test-human`` is claim-only: nothing trains or selects on it. ``val-human`` (written later, in the same manner,
none reused from or paraphrasing ``test-human``) is for choices about natural wording, beside ``val``; nothing
trains on it either. Each line of ``data/hpo_test_human.jsonl`` (``data/hpo_val_human.jsonl``) holds one question written by a person (``id``, ``query``,
``register``: clinician | family | researcher) and the graph query its gold answers come from (``graph``).
A graph query is a small JSON form, anchored on node keys so the gold is exact:

- ``{"node": KEY}``: that node ("what is the term for …" questions).
- ``{"target": TYPE, "all": [COND, …]}``: every node of ``TYPE`` that meets all conditions, each one of
  ``{"rel": REL, "node": KEY}`` (linked to that node by ``REL``),
  ``{"rel": REL, "via": QUERY}`` (linked by ``REL`` to any answer of a nested query: a second hop),
  ``{"field": FIELD, "has": TEXT}`` (the node's text field contains ``TEXT``, case-insensitively).
  A relation whose two ends have the same type (``parent-child``) also names the target's end:
  ``"end": "src"`` (the parent) or ``"dst"`` (the child).

Relations are matched as stored, in either direction otherwise. The split is for evaluation only: nothing
trains or selects on it.
"""

from __future__ import annotations

import json
from functools import cached_property
from importlib import resources

import numpy as np
import pandas as pd

from grasp_core.errors import GraspError
from grasp_core.skb.format import HUMAN_QID_OFFSET, SKB, VAL_HUMAN_QID_OFFSET

QUESTIONS_FILE = "hpo_test_human.jsonl"
FILES = {"test-human": QUESTIONS_FILE, "val-human": "hpo_val_human.jsonl"}
OFFSETS = {"test-human": HUMAN_QID_OFFSET, "val-human": VAL_HUMAN_QID_OFFSET}
REGISTERS = ("clinician", "family", "researcher")


def load_questions(split: str = "test-human") -> list[dict]:
    """The hand-written questions of ``split`` (``test-human`` or ``val-human``), in file order."""
    text = resources.files("grasp_core.questions").joinpath("data", FILES[split]).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def shape(graph_query: dict) -> str:
    """``term`` (a node by description), ``one-hop``, ``two-hop`` (a nested query) or ``intersection``."""
    if "node" in graph_query:
        return "term"
    conds = graph_query["all"]
    if any("via" in c for c in conds):
        return "two-hop"
    return "intersection" if len(conds) > 1 else "one-hop"


class GraphQueries:
    """Evaluates graph queries over one SKB's nodes and edges."""

    def __init__(self, skb: SKB):
        self.skb = skb
        self.types = skb.nodes["type"].to_numpy()
        self.ids = pd.Series(skb.nodes["node_id"].to_numpy(), index=skb.nodes["key"].to_numpy())

    @cached_property
    def _by_rel(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return {
            str(rel): (part["src"].to_numpy(), part["dst"].to_numpy()) for rel, part in self.skb.edges.groupby("rel")
        }

    def answers(self, graph_query: dict) -> np.ndarray:
        """The sorted node ids that satisfy ``graph_query``; :class:`GraspError` on a malformed one."""
        if not isinstance(graph_query, dict):
            raise GraspError(f"a graph query is a JSON object, got {graph_query!r}")
        if "node" in graph_query:
            return np.array([self._node(graph_query["node"])], dtype=np.int64)
        target, conds = graph_query.get("target"), graph_query.get("all")
        if target not in self.skb.schema.node_types or not conds:
            raise GraspError(f"graph query {graph_query} needs a node type as 'target' and a non-empty 'all' list")
        found = np.flatnonzero(self.types == target)
        for cond in conds:
            found = np.intersect1d(found, self._satisfying(target, cond))
        return found.astype(np.int64)

    def _node(self, key: str) -> int:
        if key not in self.ids.index:
            raise GraspError(f"node key {key!r} is not in the {self.skb.schema.name} SKB; correct the graph query")
        return int(self.ids[key])

    def _satisfying(self, target: str, cond: dict) -> np.ndarray:
        if "field" in cond:
            field, has = cond["field"], cond.get("has")
            if field not in self.skb.schema.node_types[target] or not isinstance(has, str):
                raise GraspError(f"{target} nodes have no text field {field!r}, or 'has' is not a text ({cond})")
            text = self.skb.nodes[field].fillna("").str.lower()
            return np.flatnonzero(text.str.contains(has.lower(), regex=False).to_numpy())
        if "node" in cond:
            anchors = np.array([self._node(cond["node"])])
        elif "via" in cond:
            anchors = self.answers(cond["via"])
        else:
            raise GraspError(f"condition {cond} needs 'node', 'via' or 'field'")
        if cond.get("end") not in (None, "src", "dst"):
            raise GraspError(f"'end' is 'src' or 'dst', got {cond['end']!r} ({cond})")
        return self._linked(cond.get("rel"), anchors, target, cond.get("end"))

    def _linked(self, rel: str | None, anchors: np.ndarray, target: str, end: str | None) -> np.ndarray:
        declared = [r for r in self.skb.schema.relations if r.name == rel]
        if not declared:
            raise GraspError(f"unknown relation {rel!r}; the schema has {sorted(set(self.skb.schema.relation_names))}")
        if not any(target in (r.src, r.dst) for r in declared):
            raise GraspError(f"relation {rel!r} never reaches a {target} node; change the relation or the target")
        if any(r.src == r.dst for r in declared) and end not in ("src", "dst"):
            raise GraspError(f"relation {rel!r} joins two nodes of one type: say which end the target is ('end')")
        src, dst = self._by_rel.get(str(rel), (np.empty(0, np.int64), np.empty(0, np.int64)))  # rel is declared
        hits = []
        if end in (None, "dst"):
            hits.append(dst[np.isin(src, anchors)])
        if end in (None, "src"):
            hits.append(src[np.isin(dst, anchors)])
        found = np.unique(np.concatenate(hits))
        return found[self.types[found] == target]


def human_queries(skb: SKB, questions: list[dict] | None = None, split: str = "test-human") -> pd.DataFrame:
    """The ``split`` rows of the queries table (qid = its offset + id; template = ``human:<shape>``)."""
    questions = load_questions(split) if questions is None else questions
    evaluator = GraphQueries(skb)
    rows = []
    for q in questions:
        try:
            answers = evaluator.answers(q["graph"])
        except GraspError as exc:
            raise GraspError(f"{split} question {q['id']}: {exc}") from exc
        if len(answers) == 0:
            raise GraspError(f"{split} question {q['id']} has no answer in this SKB; rewrite its graph query")
        rows.append((OFFSETS[split] + q["id"], split, q["query"], answers.tolist(), f"human:{shape(q['graph'])}"))
    return pd.DataFrame(rows, columns=["qid", "split", "query", "answer_ids", "template"])
