"""The ``cpu`` planner: a plan-selection policy on the pretrained encoder (``docs/design.md``, "The cpu planner").

``π(plan | query, table)`` is a softmax over the query's candidates — :func:`candidate_plans` for every node type
as target, plus :data:`ABSTAIN` — of a score computed from the frozen offline encoder and plan features:

- the **query vector** ``q`` (MiniLM, unit norm);
- a **verbalization** of each plan (target type, relation path, anchor type: ``"disease: phenotype phenotype
  of disease"``); it depends on the schema only, so its vector is encoded once per process and cached;
- **plan features** (:data:`FEATURES`): link cosine and degree of the anchor's row, hops, anchors, match mode,
  partial matching (``"match": "most"``), the row's role and share of the query, ``q · verbalization``.

Heads (:class:`PolicyConfig.head`), all trained on these frozen features:
- ``features``: a linear function of the plan features and one bias per target type;
- ``linear``: + target-type and relation-path probes on ``q`` (``q · W_type[t] + q · W_path[path]``), which learn
  from the training queries which phrasings ask for which type and path;
- ``mlp``: ``linear`` + a small MLP over ``[q ⊙ v, v, features]`` (``v`` the verbalization vector), which can
  score paths never seen in training by their wording.

An empty entity table gives the zero-hop plans only (the policy picks the target type); a query with no
candidate at all gets no plan and an empty graph ranking (reason ``no_candidates``), never an exception.
This module is the serving path: it imports no training code (that is :mod:`grasp_core.planner.policy.train`).
"""

from __future__ import annotations

import math
import re
import weakref
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from grasp_core.entities.table import EntityTable
from grasp_core.errors import GraspError
from grasp_core.io import read_json, write_json
from grasp_core.plan.model import ABSTAIN
from grasp_core.planner.attempt import PlanAttempt
from grasp_core.planner.candidates import candidate_plans, json_text
from grasp_core.planner.config import FEATURES, HEADS, CandidateConfig, PolicyConfig
from grasp_core.planner.policy.chooser import Executed, PlanChooser, Run, candidate_pool, shortlists
from grasp_core.ranking import FusionWeights, Ranking, fuse
from grasp_core.skb.schema import Schema
from grasp_core.truncation import Cut

META = "policy.json"
WEIGHTS = "policy.pt"


def path_keys(plan: dict) -> list[str]:
    """One key per anchor: ``anchor type|rel>type|…`` from the anchor to ``target`` (a directed hop's relation as
    ``rel:out`` or ``rel:in``); a zero-hop plan: ``|target``; a term look-up: ``type|self``."""
    if not plan["anchors"]:
        return [f"|{plan['target']['type']}"]
    if not plan["hops"]:
        return [f"{plan['anchors'][0]['type']}|self"]
    keys = []
    for anchor in plan["anchors"]:
        var, parts, types = anchor["var"], [anchor["type"]], {h["to"]: h.get("to_type") for h in plan["hops"]}
        while var != "target":
            hop = next(h for h in plan["hops"] if h["from"] == var)
            var = hop["to"]
            rel = f"{hop['rel']}:{hop['dir']}" if hop.get("dir") else hop["rel"]
            parts.append(f"{rel}>{types[var] or plan['target']['type']}")
        keys.append("|".join(parts))
    return keys


_DIRECTED = re.compile(r":(out|in)>")  # a directed hop's relation in a path key
_WORDS = {"out": " forward>", "in": " backward>"}


def verbalize(plan: dict) -> str:
    """Target type and relation path(s) in words, e.g. ``"disease: phenotype phenotype of disease"``."""
    target = plan["target"]["type"]
    if not plan["anchors"]:
        return target
    paths = []
    for key in path_keys(plan):
        start, *steps = key.split("|")
        words = [_DIRECTED.sub(lambda m: _WORDS[m[1]], s).replace(">", " ") for s in steps]
        paths.append(" ".join([start] + [w if w != "self" else "itself" for w in words]).strip())
    return f"{target}: " + " and ".join(paths)


@dataclass
class Featurized:
    """Padded feature tensors of a batch of queries' candidates (``C`` = most candidates of any query)."""

    query: torch.Tensor  # [B, D]
    type_idx: torch.Tensor  # [B, C] 0 = abstain, 1 + node type index
    path_idx: torch.Tensor  # [B, C, 2] 0 = none/unknown, else 1 + index into the path vocabulary
    verbal_idx: torch.Tensor  # [B, C] row of ``verbal_table`` (0: abstain and padding, a zero vector)
    verbal_table: torch.Tensor  # [V, D] verbalization vectors
    feats: torch.Tensor  # [B, C, F]
    mask: torch.Tensor  # [B, C] real candidates
    plans: list[list[str]]  # plan texts per query, in candidate order (ABSTAIN first when offered)

    def select(self, rows: Sequence[int] | torch.Tensor) -> Featurized:
        rows = torch.as_tensor(rows, dtype=torch.long)
        return Featurized(
            self.query[rows],
            self.type_idx[rows],
            self.path_idx[rows],
            self.verbal_idx[rows],
            self.verbal_table,
            self.feats[rows],
            self.mask[rows],
            [self.plans[i] for i in rows.tolist()],
        )


class PolicyHead(nn.Module):
    def __init__(self, cfg: PolicyConfig, n_types: int, n_paths: int, dim: int):
        super().__init__()
        if cfg.head not in HEADS:
            raise GraspError(f"PolicyConfig.head must be one of {HEADS}, got {cfg.head!r}")
        self.cfg = cfg
        self.type_bias = nn.Parameter(torch.zeros(n_types + 1))
        self.feat = nn.Linear(len(FEATURES), 1, bias=False)
        if cfg.head in ("linear", "mlp"):
            self.type_probe = nn.Parameter(torch.zeros(n_types + 1, dim))
            self.path_probe = nn.Parameter(torch.zeros(n_paths + 1, dim))
        if cfg.head == "mlp":
            self.mlp = nn.Sequential(
                nn.Linear(2 * dim + len(FEATURES), cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, 1)
            )

    def forward(self, x: Featurized) -> torch.Tensor:
        """Scores [B, C]; padding gets -inf."""
        score = self.type_bias[x.type_idx] + self.feat(x.feats).squeeze(-1)
        if self.cfg.head in ("linear", "mlp"):
            q = x.query[:, None, :]
            score = score + (self.type_probe[x.type_idx] * q).sum(-1)
            path = self.path_probe[x.path_idx] * (x.path_idx > 0)[..., None]  # [B, C, 2, D]
            score = score + (path.sum(2) * q).sum(-1)
        if self.cfg.head == "mlp":
            verbal = x.verbal_table[x.verbal_idx]
            q = x.query[:, None, :].expand_as(verbal)
            score = score + self.mlp(torch.cat([q * verbal, verbal, x.feats], -1)).squeeze(-1)
        return score.masked_fill(~x.mask, float("-inf"))


# Verbalization vectors per (encoder object, truncation), shared by every Featurizer of the process: the
# verbalizations name types and relations only, so one SKB has a few hundred to a few thousand of them, and each
# training step, evaluation and server would otherwise encode the same ones again (most of a featurization's cost).
# Keyed by the encoder object, not its ``identity``: load_encoder hands every caller of a config the same object,
# while an identity can outlive a change of weights (train_mfar fine-tunes a copy that keeps it); an entry goes
# with its encoder.
_VERBAL_VECTORS: weakref.WeakKeyDictionary[Any, dict[int, dict[str, np.ndarray]]] = weakref.WeakKeyDictionary()


class Featurizer:
    """Candidates and their features for (query, entity table) pairs; verbalization vectors cached per process."""

    def __init__(self, schema: Schema, encoder, cand_cfg: CandidateConfig, paths: Sequence[str], cfg: PolicyConfig):
        self.schema, self.encoder, self.cand_cfg, self.cfg = schema, encoder, cand_cfg, cfg
        self.types = list(schema.node_types)
        self.paths = {p: i + 1 for i, p in enumerate(paths)}
        self._verbal = _VERBAL_VECTORS.setdefault(encoder, {}).setdefault(cfg.max_query_tokens, {})

    def candidates(self, query: str, table: EntityTable) -> list[dict | None]:
        """None (abstain) first, then every plan; an empty table gets the zero-hop plans only."""
        plans: list[dict | None] = [*candidate_plans(self.schema, table, query, self.types, self.cand_cfg)]
        return plans if not table.rows else [None, *plans]

    def _verbal_vectors(self, texts: list[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self._verbal]
        if new:
            self._verbal.update(zip(new, self.encoder.encode(new, self.cfg.max_query_tokens)))
        return np.stack([self._verbal[t] for t in texts]) if texts else np.zeros((0, self.encoder.dim), np.float32)

    def __call__(
        self, queries: Sequence[str], tables: Sequence[EntityTable], query_vectors: np.ndarray | None = None
    ) -> Featurized:
        if query_vectors is None:
            query_vectors = self.encoder.encode(list(queries), self.cfg.max_query_tokens)
        cands = [self.candidates(q, t) for q, t in zip(queries, tables)]
        width = max([len(c) for c in cands] + [1])
        b, dim, nf = len(cands), query_vectors.shape[1], len(FEATURES)
        type_idx = np.zeros((b, width), np.int64)
        path_idx = np.zeros((b, width, 2), np.int64)
        feats = np.zeros((b, width, nf), np.float32)
        mask = np.zeros((b, width), bool)
        verbal_idx = np.zeros((b, width), np.int64)
        texts: dict[str, int] = {}  # distinct verbalizations -> row of the table (from 1)
        plans: list[list[str]] = []
        col = {f: i for i, f in enumerate(FEATURES)}
        for i, (query, table, cs) in enumerate(zip(queries, tables, cands)):
            plans.append([])
            words = max(1, len(query.split()))
            for j, plan in enumerate(cs):
                mask[i, j] = True
                if plan is None:
                    plans[i].append(ABSTAIN)
                    feats[i, j, col["abstain"]] = 1.0
                    continue
                plans[i].append(json_text(plan))
                type_idx[i, j] = 1 + self.types.index(plan["target"]["type"])
                keys = path_keys(plan)
                for k, key in enumerate(keys[:2]):
                    path_idx[i, j, k] = self.paths.get(key, 0)
                verbal_idx[i, j] = texts.setdefault(verbalize(plan), len(texts) + 1)
                f = feats[i, j]
                f[col["zero_hop"]] = float(not plan["hops"] and not plan["anchors"])
                f[col["term_lookup"]] = float(not plan["hops"] and bool(plan["anchors"]))
                f[col["hops"]] = len(plan["hops"]) / 3.0
                f[col["two_anchors"]] = float(len(plan["anchors"]) == 2)
                f[col["doc_mode"]] = float(any(a["match_mode"] == "doc" for a in plan["anchors"]))
                f[col["path_known"]] = float(all(self.paths.get(key, 0) for key in keys))
                f[col["match_most"]] = float(plan.get("match") == "most")
                if plan["anchors"]:
                    rows = [table.require_row(a["ref"]) for a in plan["anchors"]]
                    links = [r.links[a["type"]][0] for r, a in zip(rows, plan["anchors"])]
                    f[col["link_cosine"]] = min(link.score for link in links)
                    f[col["log_degree"]] = min(math.log1p(link.degree) for link in links) / 5.0
                    f[col["role_anchor"]] = float(all(r.role == "anchor" for r in rows))
                    f[col["role_target"]] = float(any(r.role == "target" for r in rows))
                    f[col["row_best_type"]] = float(
                        all(
                            r.links[a["type"]][0].score >= max(ls[0].score for ls in r.links.values() if ls) - 1e-6
                            for r, a in zip(rows, plan["anchors"])
                        )
                    )
                    f[col["mention_share"]] = sum(len(r.mention.split()) for r in rows) / words
        verbal = np.concatenate([np.zeros((1, dim), np.float32), self._verbal_vectors(list(texts))])
        feats[..., col["verbal_cosine"]] = np.einsum("bcd,bd->bc", verbal[verbal_idx], query_vectors)
        return Featurized(
            torch.from_numpy(query_vectors.astype(np.float32)),
            torch.from_numpy(type_idx),
            torch.from_numpy(path_idx),
            torch.from_numpy(verbal_idx),
            torch.from_numpy(verbal),
            torch.from_numpy(feats),
            torch.from_numpy(mask),
            plans,
        )


class PlanPolicy:
    """A trained policy with its featurizer: the planner object of the ``policy`` planner kind. With a
    :class:`~grasp_core.planner.policy.chooser.PlanChooser` (the RL rounds train one) it plans by :meth:`choose`: the
    policy shortlists, the executed results decide."""

    def __init__(self, head: PolicyHead, featurizer: Featurizer, chooser: PlanChooser | None = None):
        self.head, self.featurizer, self.chooser = head.eval(), featurizer, chooser

    @property
    def cfg(self) -> PolicyConfig:
        return self.head.cfg

    def logits(self, x: Featurized) -> torch.Tensor:
        return self.head(x)

    def read(self, query: str, table: EntityTable) -> Cut:
        """The query as the policy reads it: its encoder's first ``max_query_tokens`` tokens."""
        encoder = self.featurizer.encoder
        return encoder.cut(query, self.cfg.max_query_tokens)

    def plan(self, queries: Sequence[str], tables: Sequence[EntityTable]) -> list[PlanAttempt]:
        """The most probable candidate per query (greedy, as planner inference is)."""
        x = self.featurizer(queries, tables)
        with torch.no_grad():
            best = self.head(x).argmax(-1).tolist()
        return [
            PlanAttempt(p[j], True, None, 1) if p else PlanAttempt("", False, "no_candidates", 1)
            for p, j in zip(x.plans, best)
        ]

    def choose(
        self,
        queries: Sequence[str],
        tables: Sequence[EntityTable],
        text: Sequence[Ranking],
        run: Run,
        weights: FusionWeights,
        k: int | None = None,
        pool_temperature: float | None = None,
    ) -> tuple[list[PlanAttempt], list[Executed], list[Ranking] | None]:
        """Per query, the chooser's pick among the policy's ``k`` best candidates (default: the chooser's own k)
        and ABSTAIN, executed by ``run``, each at the chooser's graph weights; the pick's result comes back with it
        (no second execution), carrying the graph weight it is fused with. With a ``pool_temperature``, each
        query's :func:`~grasp_core.planner.policy.chooser.candidate_pool` comes third (else None)."""
        if self.chooser is None:
            raise GraspError("this policy has no plan chooser: plan() it, or train it in an RL round")
        x = self.featurizer(queries, tables)
        with torch.no_grad():
            logits = self.head(x).numpy()
        asked = self.chooser.asked_proba(self.featurizer.encoder, queries)
        lists = shortlists(logits, x, asked, text, run, k or self.chooser.k, weights, self.chooser.graph_weights)
        attempts, chosen, pools = [], [], []
        for plans, s, t in zip(x.plans, lists, text):
            if not s.rows:
                attempts.append(PlanAttempt("", False, "no_candidates", 1))
                chosen.append(Executed(Ranking.empty(), 0))
                pools.append(fuse(t, Ranking.empty(), weights))  # the text list alone, as fusion gives
                continue
            scores = self.chooser.scores(s.features)
            pick = int(np.argmax(scores))
            attempts.append(PlanAttempt(plans[s.rows[pick]], True, None, 1))
            chosen.append(s.executed[pick])
            if pool_temperature is not None:
                pools.append(candidate_pool(s, scores, weights.rrf_k, pool_temperature))
        return attempts, chosen, (pools if pool_temperature is not None else None)

    def save(self, out_dir: Path, cand_cfg: CandidateConfig, extra: dict | None = None) -> None:
        """Write the head and what rebuilds its featurizer (the caller writes ``out_dir`` atomically)."""
        torch.save(self.head.state_dict(), Path(out_dir) / WEIGHTS)
        meta = {
            "kind": "policy",
            "config": asdict(self.cfg),
            "candidates": asdict(cand_cfg),
            "types": self.featurizer.types,
            "features": list(FEATURES),
            "paths": list(self.featurizer.paths),
            **(extra or {}),
        }
        write_json(Path(out_dir) / META, meta)
        if self.chooser is not None:
            self.chooser.save(out_dir)


def new_policy(
    schema: Schema, encoder, cand_cfg: CandidateConfig, paths: Sequence[str], cfg: PolicyConfig
) -> PlanPolicy:
    featurizer = Featurizer(schema, encoder, cand_cfg, paths, cfg)
    return PlanPolicy(PolicyHead(cfg, len(featurizer.types), len(featurizer.paths), encoder.dim), featurizer)


def load_policy(path: str | Path, schema: Schema, encoder) -> PlanPolicy:
    """The policy saved at ``path`` (a ``policy.json`` + ``policy.pt`` directory) over ``schema``."""
    path = Path(path)
    if not (path / META).exists():
        raise GraspError(f"{path} holds no plan-selection policy ({META}); build the planner assets first")
    meta = read_json(path / META)
    if meta["types"] != list(schema.node_types):
        raise GraspError(f"the policy at {path} was trained on another schema (types {meta['types']}); retrain it")
    if meta.get("features") != list(FEATURES):  # a checkpoint of older code (no list, or another one)
        raise GraspError(
            f"the policy at {path} was trained on other plan features than this code computes; rematerialize the "
            "planner assets (grasp pipeline <dataset>)"
        )
    cfg, cand = PolicyConfig(**meta["config"]), CandidateConfig(**meta["candidates"])
    policy = new_policy(schema, encoder, cand, meta["paths"], cfg)
    policy.head.load_state_dict(torch.load(path / WEIGHTS, weights_only=True))
    policy.chooser = PlanChooser.load(path)
    return policy
