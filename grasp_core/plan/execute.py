"""Plan execution (paper §3.1, ``docs/design.md``): validate -> link anchors -> traverse -> dense rescoring.

``PlanExecutor.execute`` is on the serving and reward path, so it never raises: a plan that does not parse
or validate, an anchor with nothing to bind, a plan that reaches nothing or a failing store all give an
empty :class:`Ranking` and a :class:`Trace` whose ``error`` says why (a :class:`PlanError` reason,
``no_bindings``, ``no_candidates``, ``store`` or ``internal``), for any plan text, query and entity table (a
property-based test holds it to that). A lone surrogate in an anchor or relevance text is read as U+FFFD.

Decisions the paper leaves open:
- An empty relevance text means the query minus the anchors' texts (:mod:`grasp_core.plan.relevance`).
- Anchor texts and relevance texts of a whole batch are embedded in
  one encoder call, truncated at ``ExecutionConfig.max_tokens``; in a batch each trace's ``link`` time holds
  its equal share of that call plus its own index searches.
- The threshold "cosine >= tau x best" is read as ``best - (1 - tau) * |best|`` so that it still keeps the best
  match when the best cosine is negative (identical to ``tau x best`` otherwise).
- A ref anchor links its entity row's mention text, searched in the index of the anchor's resolved type.
- Zero-hop plans: the candidates are the ``top_k`` nodes of the target type nearest to the relevance text
  (anchor score 0, so the score is that cosine).
- Term look-ups (no hops, one anchor of the target's type): the candidates are the anchor's bindings, scored
  like any plan's (binding score + the relevance text's cosine to the document); in name mode a binding's
  score is its best name-or-alias cosine, so a lay description finds the term its synonym names.
- The traversal runs in process over the graph's CSR arrays (:mod:`grasp_core.plan.traverse`, the default)
  or as the plan's Cypher query on the graph store (``traversal="store"``); both return the same rows, and
  the trace keeps the Cypher text either way (explanations show it, ``explain_paths`` runs on the store).
- ``max_frontier`` (default None: exact) caps every main-chain hop in both (:mod:`grasp_core.plan.cypher`, point 4).
- A ``"most"`` plan (partial matching) runs one query per path on the store, and its scores are added per node
  (the trace's Cypher holds the queries, separated by ``;``).
- Rescoring is exact (candidate document vectors times the relevance vector) for at most
  ``exact_rescore_max`` candidates; beyond that the target type's document index is searched to that same
  depth and only candidates found there are scored (the others' cosine is below the depth-th best anyway).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence

import numpy as np

from grasp_core.entities.table import EntityTable
from grasp_core.errors import GraphStoreError, PlanError
from grasp_core.graph.adjacency import Adjacency
from grasp_core.plan.config import ExecutionConfig
from grasp_core.plan.cypher import CompiledPlan, compile_paths, compile_plan
from grasp_core.plan.model import ABSTAIN, Anchor, Plan
from grasp_core.plan.parse import parse_plan
from grasp_core.plan.relevance import relevance_text
from grasp_core.plan.trace import Binding, Trace
from grasp_core.plan.traverse import add_branches, traverse
from grasp_core.plan.validate import is_term_lookup, validate_plan
from grasp_core.ranking import Ranking
from grasp_core.skb.format import SKB

log = logging.getLogger(__name__)
MEMO_SIZE = 20_000  # text vectors kept by an executor (20k x 384 floats = 31 MB with MiniLM)
LINK_MEMO_SIZE = 20_000  # anchors' bindings kept by an executor (a few bindings each)


class PlanExecutor:
    def __init__(self, skb: SKB, index, encoder, store, cfg: ExecutionConfig = ExecutionConfig()):
        if cfg.traversal not in ("arrays", "store"):
            raise ValueError(f"ExecutionConfig.traversal must be 'arrays' or 'store', not {cfg.traversal!r}")
        self.skb, self.index, self.encoder, self.store, self.cfg = skb, index, encoder, store, cfg
        self._names = skb.nodes["name"].astype(str).to_numpy()
        self._memo: dict[str, np.ndarray] = {}
        self._links: dict[tuple[str | None, str, bytes], tuple[Binding, ...]] = {}
        # the graph's adjacency lists, built once with the executor (size and build time at Prime's scale:
        # benchmarks/results/plan_execution.json)
        self.adjacency = Adjacency.build(skb) if cfg.traversal == "arrays" else None

    def execute(
        self, plan_or_text: Plan | str, query: str, entity_table: EntityTable | None = None
    ) -> tuple[Ranking, Trace]:
        return self.execute_batch([plan_or_text], [query], [entity_table])[0]

    def execute_batch(
        self, plans: Sequence[Plan | str], queries: Sequence[str], tables: Sequence[EntityTable | None] | None = None
    ) -> list[tuple[Ranking, Trace]]:
        tables = list(tables) if tables is not None else [None] * len(plans)
        if not len(plans) == len(queries) == len(tables):
            raise ValueError(f"{len(plans)} plans, {len(queries)} queries and {len(tables)} entity tables")
        traces = [self._validate(p, t) for p, t in zip(plans, tables)]
        texts: list[str] = []
        slots: list[tuple[list[int], int] | None] = []  # slots[i] = (anchor texts' rows, relevance row) of plan i
        for trace, query, table in zip(traces, queries, tables):
            own = self._texts(trace, query, table)
            if own is None:
                slots.append(None)
                continue
            slots.append(([len(texts) + i for i in range(len(own) - 1)], len(texts) + len(own) - 1))
            texts += own
        start = time.perf_counter()
        vectors = self._encode_each(texts, traces, slots)
        share = (time.perf_counter() - start) / max(1, sum(s is not None for s in slots))
        results = []
        for trace, slot in zip(traces, slots):
            if slot is None or trace.error is not None:
                results.append((Ranking.empty(), trace))
                continue
            trace.seconds["link"] += share
            results.append((self._run(trace, vectors[slot[0]], vectors[slot[1]]), trace))
        return results

    def _texts(self, trace: Trace, query: str, table: EntityTable | None) -> list[str] | None:
        """The plan's anchor texts then its relevance text, as the encoder can read them (a lone surrogate, e.g.
        from a broken byte in a pasted text, becomes U+FFFD); None for a plan that does not run."""
        if trace.plan is None:
            return None
        try:
            anchors = [_readable(_anchor_text(a, table)) for a in trace.plan.anchors]
            return anchors + [_readable(trace.plan.relevance_text.strip() or relevance_text(str(query), anchors))]
        except Exception as exc:  # never raise on the serving path
            log.exception("plan texts failed unexpectedly")
            trace.plan, trace.error, trace.message = None, "internal", repr(exc)
            return None

    def _encode_each(self, texts: list[str], traces: list[Trace], slots: list) -> np.ndarray:
        """:meth:`_encode` of the whole batch; if that fails, plan by plan, so only the failing plans fail."""
        try:
            return self._encode(texts)
        except Exception:
            log.exception("encoding a batch of plan texts failed; encoding plan by plan")
        vectors = np.zeros((len(texts), self.encoder.dim), np.float32)
        for trace, slot in zip(traces, slots):
            if slot is None:
                continue
            rows = [*slot[0], slot[1]]
            try:
                vectors[rows] = self._encode([texts[i] for i in rows])
            except Exception as exc:
                trace.error, trace.message = "internal", repr(exc)
        return vectors

    def _encode(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts``; each distinct text is encoded once per process (plans of one query share their
        anchor and relevance texts, and the teacher executes them in several calls); the newest ``MEMO_SIZE`` kept."""
        if not texts:
            return np.zeros((0, 1), np.float32)
        new = list(dict.fromkeys(t for t in texts if t not in self._memo))
        fresh = dict(zip(new, self.encoder.encode(new, self.cfg.max_tokens))) if new else {}
        out = np.stack([fresh[t] if t in fresh else self._memo[t] for t in texts])
        for text, vec in fresh.items():
            if len(self._memo) >= MEMO_SIZE:
                self._memo.pop(next(iter(self._memo)))  # the oldest entry
            self._memo[text] = vec
        return out

    def _validate(self, plan_or_text: Plan | str, table: EntityTable | None) -> Trace:
        trace, start = Trace(), time.perf_counter()
        if plan_or_text == ABSTAIN:
            trace.error, trace.message = "abstain", "the planner abstained: the answers are the text ranking's"
            return trace
        try:
            plan = parse_plan(plan_or_text) if isinstance(plan_or_text, str) else plan_or_text
            trace.plan = validate_plan(plan, self.skb.schema, table)
            unlinked = [
                a.ref for a in plan.anchors if a.ref is not None and (table is None or table.row(a.ref) is None)
            ]
            if unlinked:
                trace.plan = None
                raise PlanError("unknown_ref", f"{unlinked[0]!r} is not a row of the query's entity table")
        except PlanError as exc:
            trace.error, trace.message = exc.reason, exc.message
        except Exception as exc:  # never raise on the serving path
            log.exception("plan validation failed unexpectedly")
            trace.error, trace.message = "internal", repr(exc)
        trace.seconds["validate"] = time.perf_counter() - start
        return trace

    def _run(self, trace: Trace, anchor_vectors: np.ndarray, relevance: np.ndarray) -> Ranking:
        try:
            return self._link_traverse_rescore(trace, anchor_vectors, relevance)
        except PlanError as exc:
            trace.error, trace.message = exc.reason, exc.message
        except GraphStoreError as exc:
            trace.error, trace.message = "store", str(exc)
        except Exception as exc:  # never raise on the serving path
            log.exception("plan execution failed unexpectedly")
            trace.error, trace.message = "internal", repr(exc)
        return Ranking.empty()

    def _link_traverse_rescore(self, trace: Trace, anchor_vectors: np.ndarray, relevance: np.ndarray) -> Ranking:
        plan = trace.plan
        assert plan is not None  # only validated plans are executed
        target_type = plan.target.type
        if not plan.hops and not plan.anchors:
            start = time.perf_counter()
            scores, ids = self.index.search(target_type, "doc", relevance[None], self.cfg.top_k)
            keep = ids[0] >= 0
            trace.candidates = int(keep.sum())
            trace.seconds["rescore"] = time.perf_counter() - start
            return self._finish(trace, Ranking.from_scores(ids[0][keep], scores[0][keep], self.cfg.top_k))

        start = time.perf_counter()
        for anchor, vector in zip(plan.anchors, anchor_vectors):
            trace.bindings[anchor.var] = self._link(anchor, vector)
        trace.seconds["link"] += time.perf_counter() - start
        if any(not b for b in trace.bindings.values()):
            empty = next(v for v, b in trace.bindings.items() if not b)
            raise PlanError("no_bindings", f"anchor {empty!r} matched no node of type {plan.anchor(empty).type!r}")

        if is_term_lookup(plan):
            return self._look_up(trace, relevance)

        start = time.perf_counter()
        pairs = {v: [(b.node_id, b.score) for b in bs] for v, bs in trace.bindings.items()}
        queries = [  # a "most" plan: one query per path, their scores added per node (traverse.add_branches)
            compile_plan(p, self.skb.schema, pairs, dialect=self.store.dialect, max_frontier=self.cfg.max_frontier)
            for p in (plan.branches() if plan.partial else [plan])
        ]
        trace.cypher = ";\n".join(q.text for q in queries)
        trace.params = queries[0].params if len(queries) == 1 else {str(i): q.params for i, q in enumerate(queries)}
        if self.adjacency is not None:
            ids, scores = traverse(plan, self.adjacency, pairs, self.cfg.max_frontier)
        else:
            ids, scores = add_branches([self._run_store(q) for q in queries])
        trace.seconds["traverse"] = time.perf_counter() - start
        trace.candidates = len(ids)
        if not len(ids):
            raise PlanError("no_candidates", "no node satisfies the plan")

        start = time.perf_counter()
        anchor_scores = scores.astype(np.float32)
        ids, cosine, anchor_scores = self._cosine(target_type, ids, anchor_scores, relevance)
        ranking = Ranking.from_scores(ids, anchor_scores + cosine, self.cfg.top_k)
        trace.seconds["rescore"] = time.perf_counter() - start
        return ranking

    def _run_store(self, query: CompiledPlan) -> tuple[np.ndarray, np.ndarray]:
        rows = self.store.run(query.text, query.params)
        return np.fromiter((r[0] for r in rows), np.int64, len(rows)), np.fromiter(
            (r[1] for r in rows), np.float64, len(rows)
        )

    def _look_up(self, trace: Trace, relevance: np.ndarray) -> Ranking:
        start = time.perf_counter()
        bindings = next(iter(trace.bindings.values()))
        ids = np.asarray([b.node_id for b in bindings], np.int64)
        scores = np.asarray([b.score for b in bindings], np.float32)
        trace.candidates = len(ids)
        ranking = Ranking.from_scores(ids, scores + self.index.vectors("doc", ids) @ relevance, self.cfg.top_k)
        trace.seconds["rescore"] = time.perf_counter() - start
        return ranking

    def _finish(self, trace: Trace, ranking: Ranking) -> Ranking:
        if not len(ranking):
            target = trace.plan.target.type if trace.plan is not None else "?"
            trace.error, trace.message = "no_candidates", f"no node of type {target!r}"
        return ranking

    def _link(self, anchor: Anchor, vector: np.ndarray) -> list[Binding]:
        """The anchor's bindings. The candidate plans of one question share their anchors, so each (type, mode,
        vector) is searched once per executor (the newest ``LINK_MEMO_SIZE`` kept): the same bindings, bit for bit,
        without the repeated exhaustive index searches that took a third of a plan's execution."""
        key = (anchor.type, anchor.match_mode, vector.tobytes())
        known = self._links.get(key)
        if known is None:
            known = self._links[key] = self._search_bindings(anchor, vector)
            if len(self._links) > LINK_MEMO_SIZE:
                self._links.pop(next(iter(self._links)))  # the oldest entry
        return list(known)

    def _search_bindings(self, anchor: Anchor, vector: np.ndarray) -> tuple[Binding, ...]:
        k, tau = (
            (self.cfg.name_k, self.cfg.name_tau) if anchor.match_mode == "name" else (self.cfg.doc_k, self.cfg.doc_tau)
        )
        scores, ids = self.index.search(anchor.type, anchor.match_mode, vector[None], k)
        scores, ids = scores[0][ids[0] >= 0], ids[0][ids[0] >= 0]
        if not len(ids):
            return ()
        best = float(scores[0])
        keep = scores >= best - (1.0 - tau) * abs(best)
        return tuple(Binding(int(i), str(self._names[i]), float(s)) for i, s in zip(ids[keep], scores[keep]))

    def _cosine(
        self, target_type: str, ids: np.ndarray, anchor_scores: np.ndarray, relevance: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, cosine, anchor scores) of the candidates that get a relevance cosine."""
        if len(ids) <= self.cfg.exact_rescore_max:
            return ids, self.index.vectors("doc", ids) @ relevance, anchor_scores
        scores, found = self.index.search(target_type, "doc", relevance[None], self.cfg.exact_rescore_max)
        order = np.argsort(ids)
        pos = np.clip(np.searchsorted(ids, found[0], sorter=order), 0, len(ids) - 1)
        hit = ids[order[pos]] == found[0]
        return found[0][hit], scores[0][hit], anchor_scores[order[pos[hit]]]

    def explain_paths(
        self, plan: Plan | None, trace: Trace, node_id: int, limit: int = 3
    ) -> dict[str, list[tuple[int, ...]]]:
        """Per anchor, up to ``limit`` node-id paths from one of its bindings to ``node_id``, best binding first.

        ``plan`` defaults to the trace's resolved plan. Returns {} for a plan that did not run.
        """
        plan = plan if plan is not None else trace.plan
        if plan is None or not trace.bindings or not plan.hops:
            return {}  # no plan, or a zero-hop plan or term look-up: no path
        plan = validate_plan(plan, self.skb.schema) if plan is not trace.plan else plan
        out = {}
        for var, bindings in trace.bindings.items():
            score = {b.node_id: b.score for b in bindings}
            compiled = compile_paths(
                plan, self.skb.schema, var, {var: [(b.node_id, b.score) for b in bindings]}, node_id
            )
            paths = sorted(
                {tuple(int(x) for x in row) for row in self.store.run(compiled.text, compiled.params)},
                key=lambda p: (-score[p[0]], p),
            )
            out[var] = paths[:limit]
        return out


def _readable(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _anchor_text(anchor: Anchor, table: EntityTable | None) -> str:
    """The text an anchor links: its own, or its entity row's mention (refs were checked in ``_validate``)."""
    if anchor.text is not None:
        return anchor.text
    assert table is not None and anchor.ref is not None  # _validate accepted the ref against this table
    return table.require_row(anchor.ref).mention
