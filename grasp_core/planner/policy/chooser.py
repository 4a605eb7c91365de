"""Choosing among executed plans: the policy shortlists, the executed results decide (``docs/planner.md``).

The policy (:mod:`grasp_core.planner.policy.model`) scores every candidate plan *before* execution. The chooser takes
the policy's ``k`` best candidates plus :data:`ABSTAIN`, executes them, fuses each graph ranking with the
question's text ranking, and picks one with a LightGBM lambdarank model over what each candidate *is* (the
policy's score and the plan features) and what it *returns* (how long its graph list is, how sure its top node
is, how much it agrees with the text branch, whether fusion keeps the text branch's first answer). Each executed
candidate is offered at every graph weight of ``ChooserConfig.graph_weights`` (its graph ranking's RRF weight in
fusion; ABSTAIN and an empty result once): the chooser picks a plan and how much its result counts against the
text branch's. The model is trained on the training questions' executed options labelled by their fused reward
(gold first after fusion at the option's weight): the reward of executed plans, not imitation of the teacher.

The shortlist also gives the reranker its candidates (:func:`candidate_pool`): every option's fused list, weighted by
the chooser's confidence in it, so an answer that only a runner-up plan returns can still be reranked first.

The asked-type model (:mod:`grasp_core.rerank.asked_type`) gives each candidate the probability that the question
asks for its target type: a feature, not a constraint (a constraint was measured lower on validation).

This module is the serving path: it imports no training code (that is
:mod:`grasp_core.planner.policy.chooser_train`). The chooser lives in the planner checkpoint beside the policy
(``chooser.txt``, ``chooser.json``, ``asked_type.json``); a checkpoint without one plans greedily.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from grasp_core.errors import CorruptArtifactError
from grasp_core.io import read_json, write_json
from grasp_core.plan.model import ABSTAIN
from grasp_core.planner.config import FEATURES
from grasp_core.ranking import FusionWeights, Ranking, fusion, rrf
from grasp_core.rerank.asked_type import AskedType

MODEL_FILE, META_FILE = "chooser.txt", "chooser.json"

POLICY_FEATURES = ("policy_logit", "policy_gap", "policy_rank", "policy_prob")
RESULT_FEATURES = (
    "target_type",  # 0 abstain, 1 + node type index (an id: trees split on it)
    "path_id",  # the policy's path vocabulary (0: none or unknown)
    "asked_prob",  # asked-type probability of the target type (abstain: 0)
    "asked_top",  # the target type is the asked-type model's first
    "log_candidates",  # target nodes the traversal returned
    "graph_len",  # length of the graph ranking (top 100)
    "graph_top",  # rescoring score of the graph list's first node
    "graph_margin",  # its margin over the second
    "overlap10",  # share of the graph top 10 in the text top 10
    "keeps_text_top1",  # fusion keeps the text branch's first answer first
    "text_top1_in_graph",  # 1 / rank of the text top 1 in the graph list (0: absent)
    "graph_top1_in_text",  # 1 / rank of the graph top 1 in the text list (0: absent)
    "text_margin",  # the text branch's own top-1 margin (the same for every candidate of a question)
    "graph_weight",  # the option's RRF weight of the graph ranking
)


@dataclass(frozen=True)
class Executed:
    """One executed candidate: its graph ranking, how many target nodes its traversal returned, (serving) its
    execution trace, and the RRF weight its graph ranking is fused with (the chooser's pick)."""

    ranking: Ranking
    candidates: int
    trace: object = None
    graph_weight: float = 1.0


@dataclass(frozen=True)
class Shortlist:
    """One question's options: per option, its candidate's position among the question's candidates, its
    features, its candidate's result at the option's graph weight (``Executed.graph_weight``), and that result
    fused with the question's text ranking (:func:`fused_lists`: what the reward and the pool read)."""

    rows: list[int]
    features: np.ndarray
    executed: list[Executed]
    fused: list[Ranking]

    def subset(self, positions: Sequence[int]) -> Shortlist:
        """The options at ``positions`` (in this shortlist), in that order."""
        keep = list(positions)
        return Shortlist(
            [self.rows[i] for i in keep],
            self.features[keep],
            [self.executed[i] for i in keep],
            [self.fused[i] for i in keep],
        )


def fused_lists(text: Ranking, executed: Sequence[Executed], weights: FusionWeights) -> list[Ranking]:
    """Each executed option's graph ranking fused with the question's ``text`` ranking at the option's weight."""
    return fusion(
        [text] * len(executed), [e.ranking for e in executed], weights, graph_weights=[e.graph_weight for e in executed]
    )


def shortlist(logits: np.ndarray, mask: np.ndarray, plans: Sequence[str], k: int) -> list[int]:
    """The policy's ``k`` best candidates of one question (by logit, ties by position), plus ABSTAIN if offered."""
    real = [j for j in range(len(plans)) if mask[j]]
    order = sorted(real, key=lambda j: (-float(logits[j]), j))
    keep = order[:k]
    if ABSTAIN in plans and plans.index(ABSTAIN) not in keep:
        keep.append(plans.index(ABSTAIN))
    return keep


def _inverse_rank(ranking: Ranking, node: int | None) -> float:
    if node is None:
        return 0.0
    rank = ranking.rank_of([node])
    return 0.0 if rank is None else 1.0 / rank


def candidate_features(
    logits: np.ndarray,
    rows: Sequence[int],
    plan_feats: np.ndarray,
    type_idx: np.ndarray,
    path_idx: np.ndarray,
    asked: np.ndarray | None,
    executed: Sequence[Executed],
    fused: Sequence[Ranking],
    text: Ranking,
) -> np.ndarray:
    """float32 [len(rows), F]: the features of one question's options (columns: :func:`feature_names`).
    ``logits``/``plan_feats``/``type_idx``/``path_idx`` are the policy's for every candidate of the question;
    ``asked`` the asked-type probabilities [T]; ``rows``, ``executed`` and ``fused`` one candidate position, result
    (at its graph weight) and fused list (:func:`fused_lists`) per option."""
    real = np.isfinite(logits)
    top = float(logits[real].max())
    probs = np.exp(logits[real] - top)
    probs /= probs.sum()
    prob_of = dict(zip(np.flatnonzero(real).tolist(), probs.tolist()))
    order = {j: r for r, j in enumerate(sorted(np.flatnonzero(real).tolist(), key=lambda j: (-float(logits[j]), j)))}
    text_top1 = int(text.node_ids[0]) if len(text) else None
    text_top10 = set(text.node_ids[:10].tolist())
    text_margin = float(text.scores[0] - text.scores[1]) if len(text) > 1 else 0.0
    asked_top = int(np.argmax(asked)) if asked is not None else -1
    out = np.zeros((len(rows), len(feature_names())), np.float32)
    for i, (j, result, answer) in enumerate(zip(rows, executed, fused, strict=True)):
        g = result.ranking
        t = int(type_idx[j])
        policy = [float(logits[j]), float(logits[j]) - top, float(order[j]), prob_of[j]]
        graph_top1 = int(g.node_ids[0]) if len(g) else None
        result_feats = [
            float(t),
            float(path_idx[j]),
            float(asked[t - 1]) if asked is not None and t > 0 else 0.0,
            float(t > 0 and t - 1 == asked_top),
            math.log1p(result.candidates),
            float(len(g)),
            float(g.scores[0]) if len(g) else 0.0,
            float(g.scores[0] - g.scores[1]) if len(g) > 1 else 0.0,
            len(text_top10 & set(g.node_ids[:10].tolist())) / 10.0,
            float(len(answer) > 0 and text_top1 is not None and int(answer.node_ids[0]) == text_top1),
            _inverse_rank(g, text_top1),
            _inverse_rank(text, graph_top1),
            text_margin,
            result.graph_weight,
        ]
        out[i] = policy + plan_feats[j].tolist() + result_feats
    return out


def feature_names() -> list[str]:
    return [*POLICY_FEATURES, *(f"plan_{f}" for f in FEATURES), *RESULT_FEATURES]


Run = Callable[[Sequence[tuple[int, str]]], list[Executed]]  # (question index, plan text) pairs -> their results


def shortlists(
    logits: np.ndarray,
    x,
    asked: np.ndarray | None,
    text: Sequence[Ranking],
    run: Run,
    k: int,
    weights: FusionWeights,
    graph_weights: Sequence[float] = (1.0,),
) -> list[Shortlist]:
    """Shortlist, execute (one batch) and featurize every question of a featurized batch ``x``
    (:class:`~grasp_core.planner.policy.model.Featurized`) with the policy's ``logits`` [B, C] and asked-type
    probabilities ``asked`` [B, T]: each executed candidate becomes one option per graph weight (one, at 1.0, when
    its graph ranking is empty: the weight changes nothing)."""
    mask, feats = x.mask.numpy(), x.feats.numpy()
    type_idx, path_idx = x.type_idx.numpy(), x.path_idx[..., 0].numpy()
    rows = [shortlist(logits[i], mask[i], x.plans[i], k) for i in range(len(x.plans))]
    results = iter(run([(i, x.plans[i][j]) for i, r in enumerate(rows) for j in r]))
    out = []
    for i, r in enumerate(rows):
        options = [
            (j, replace(e, graph_weight=w))
            for j, e in zip(r, [next(results) for _ in r])
            for w in (graph_weights if len(e.ranking) else (1.0,))
        ]
        r = [j for j, _ in options]
        executed = [e for _, e in options]
        a = asked[i] if asked is not None else None
        fused = fused_lists(text[i], executed, weights)
        f = candidate_features(logits[i], r, feats[i], type_idx[i], path_idx[i], a, executed, fused, text[i])
        out.append(Shortlist(r, f, executed, fused))
    return out


POOL_MIN_WEIGHT = 1e-3  # options the softmax gives less than this are left out of the pool
POOL_SIZE = 100  # candidates a pool keeps (the fused lists' length)


def candidate_pool(shortlist: Shortlist, scores: np.ndarray, rrf_k: float, temperature: float) -> Ranking:
    """The reranker's candidates for one question: RRF (constant ``rrf_k``) of every option's fused list, each
    weighted by the softmax of the chooser's ``scores`` at ``temperature`` (small: the chosen option's list with the
    runners-up's answers below it; large: the options vote equally)."""
    e = np.exp((np.asarray(scores, np.float64) - float(np.max(scores))) / temperature)
    p = e / e.sum()
    keep = np.flatnonzero(p >= POOL_MIN_WEIGHT)
    return rrf([shortlist.fused[i] for i in keep], [float(p[i]) for i in keep], k=rrf_k, top=POOL_SIZE)


@dataclass
class PlanChooser:
    """A trained chooser: the LightGBM model, how many of the policy's candidates it executes, the graph weights it
    offers each one at, the asked-type model."""

    booster: object  # lightgbm.Booster
    k: int
    graph_weights: tuple[float, ...]
    asked: AskedType | None
    asked_max_tokens: int  # the query encoder's token limit the asked-type model was fit with

    def scores(self, features: np.ndarray) -> np.ndarray:
        """The chooser's score of each option (rows of ``features``)."""
        return np.asarray(self.booster.predict(features, num_threads=1))  # type: ignore[attr-defined]

    def pick(self, features: np.ndarray) -> int:
        """Position (in the shortlist) of the chosen candidate: the highest score, the earliest on a tie."""
        return int(np.argmax(self.scores(features)))

    def save(self, directory: Path) -> None:
        self.booster.save_model(str(Path(directory) / MODEL_FILE))  # type: ignore[attr-defined]
        write_json(
            Path(directory) / META_FILE,
            {
                "k": self.k,
                "graph_weights": list(self.graph_weights),
                "features": feature_names(),
                "asked_max_tokens": self.asked_max_tokens,
            },
        )
        if self.asked is not None:
            self.asked.save(directory)

    @classmethod
    def load(cls, directory: Path) -> PlanChooser | None:
        """The chooser saved in a planner checkpoint, None when it has none (it plans greedily)."""
        directory = Path(directory)
        if not (directory / META_FILE).exists():
            return None
        from grasp_core.gbdt import load_booster

        meta = read_json(directory / META_FILE)
        if meta["features"] != feature_names():
            raise CorruptArtifactError(
                f"{directory}: the plan chooser was trained on other features; rematerialize the planner rounds"
            )
        booster = load_booster(directory / MODEL_FILE, "planner")
        weights = tuple(float(w) for w in meta["graph_weights"])
        return cls(booster, int(meta["k"]), weights, AskedType.load(directory), int(meta["asked_max_tokens"]))

    def asked_proba(self, encoder, queries: Sequence[str]) -> np.ndarray | None:
        """[B, T] asked-type probabilities of the questions (None without an asked-type model)."""
        if self.asked is None:
            return None
        return self.asked.proba(np.asarray(encoder.encode(list(queries), self.asked_max_tokens)), list(queries))
