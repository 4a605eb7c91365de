"""Training questions from use: the questions people asked ``grasp serve`` and the answers they confirmed.

The feedback store (:mod:`grasp_core.feedback`) keeps judgements of served answers. Here they become questions of
the dataset: per question (its text normalized as every generated question is, :func:`grasp_core.textnorm.normalize`),
the answers whose *latest* judgement confirmed them are its gold; a question with no confirmed answer is left out.
A share of the questions (:class:`~grasp_core.retrain_config.FeedbackConfig`, chosen by a hash of the normalized text, so a question never
moves as feedback grows) is the ``feedback`` split: evaluated after every retrain and read by the promotion guard,
never trained on. The rest is ``train``. A question equal to a val, test, test-human or val-human text, or to an
existing training question, is dropped: feedback never puts an evaluation question into training.

The fingerprint of the questions is the data version of the ``feedback_source`` asset, so only a change of the
questions and answers that would be trained on (not a new request, not a rejection that changes no gold) makes
``queries`` stale.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from grasp_core.retrain_config import FeedbackConfig
from grasp_core.textnorm import normalize

FEEDBACK_SPLIT = "feedback"


@dataclass(frozen=True)
class ConfirmedQuestion:
    """A question asked in use (normalized text) and the node ids people confirmed as its answers."""

    query: str
    answer_ids: tuple[int, ...]


def confirmed_questions(rows: Iterable[Mapping]) -> list[ConfirmedQuestion]:
    """The questions with at least one confirmed answer, from feedback rows oldest first (as
    :meth:`~grasp_core.feedback.FeedbackStore.rows` gives them): per (question, node) the latest judgement counts.
    Rows without a question text (question logging was off) are left out. Sorted by question."""
    latest: dict[tuple[str, int], bool] = {}
    for row in rows:
        question = row.get("question")
        text = normalize(question) if question else ""
        if text:
            latest[(text, int(row["node_id"]))] = bool(row["relevant"])
    gold: dict[str, set[int]] = {}
    for (text, node), relevant in latest.items():
        if relevant:
            gold.setdefault(text, set()).add(node)
    return [ConfirmedQuestion(t, tuple(sorted(gold[t]))) for t in sorted(gold)]


def read_confirmed(store_file: Path, dataset: str) -> list[ConfirmedQuestion]:
    """The confirmed questions of a feedback store file (none when it does not exist; reading never creates one)."""
    from grasp_core.feedback import FeedbackStore

    store = FeedbackStore.existing(dataset, store_file)
    if store is None:
        return []
    with store:
        return confirmed_questions(store.rows())


def fingerprint(questions: Iterable[ConfirmedQuestion]) -> str:
    """The content digest of the confirmed questions (32 hex digits; the same for the same questions and answers)."""
    body = json.dumps([[q.query, list(q.answer_ids)] for q in questions])
    return hashlib.sha256(body.encode()).hexdigest()[:32]


def is_held_out(text: str, share: float) -> bool:
    """Whether a (normalized) question goes to the ``feedback`` split: a hash of its text, so it never moves."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < share


def feedback_queries(
    questions: Iterable[ConfirmedQuestion], queries: pd.DataFrame, num_nodes: int, cfg: FeedbackConfig
) -> pd.DataFrame:
    """The confirmed questions as rows of ``queries`` (qids after its largest): ``feedback`` or ``train`` split,
    template ``feedback``. Left out: a question whose text equals one of ``queries`` (any split), and answers that
    are not nodes of the SKB (it was rebuilt smaller since)."""
    taken = set(queries["query"].map(normalize))
    rows = []
    for q in questions:
        answers = [a for a in q.answer_ids if 0 <= a < num_nodes]
        if answers and q.query not in taken:
            rows.append((q.query, answers, FEEDBACK_SPLIT if is_held_out(q.query, cfg.holdout_share) else "train"))
    first = int(queries["qid"].max()) + 1 if len(queries) else 0
    out = pd.DataFrame(
        {
            "qid": np.arange(first, first + len(rows), dtype=np.int64),
            "split": [s for _, _, s in rows],
            "query": [t for t, _, _ in rows],
            "answer_ids": [a for _, a, _ in rows],
        }
    )
    if "template" in queries.columns:
        out["template"] = "feedback"
    return out
