"""The plan chooser: learning from the reward of executed plans, choosing with what a plan returns, the gate."""

import itertools

import numpy as np
import pytest
import torch

from grasp_core.embed.config import EncoderConfig
from grasp_core.embed.encoder import load_encoder
from grasp_core.entities.table import EntityRow, EntityTable, Link
from grasp_core.planner.attempt import check_plan
from grasp_core.planner.candidates import candidate_plans, json_text
from grasp_core.planner.config import CandidateConfig, ChooserConfig, PolicyConfig, RewardConfig
from grasp_core.planner.policy.chooser import (
    POOL_SIZE,
    Executed,
    PlanChooser,
    Shortlist,
    candidate_pool,
    feature_names,
    fused_lists,
    shortlist,
    shortlists,
)
from grasp_core.planner.policy.chooser_train import choose_k, fit_chooser, fused_hit1_labels, hit1, picks
from grasp_core.planner.policy.model import load_policy, new_policy, path_keys
from grasp_core.planner.rounds import Gate
from grasp_core.ranking import Ranking, fuse, fusion, graph_weighted, rrf

NAMES = feature_names()
WEIGHTS = (0.5, 2.0)
COL = {n: i for i, n in enumerate(NAMES)}
FAST = ChooserConfig(n_estimators=60, min_child_samples=5)


def _task(n: int, seed: int) -> tuple[list[Shortlist], list[np.ndarray], list[np.ndarray]]:
    """Questions of 6 candidates each. The teacher annotates the candidate with the highest link cosine (what an
    imitation learner can see); the reward goes to the one whose graph list agrees with the text branch's first
    answer, which the teacher's annotation says nothing about: imitation cannot win."""
    rng = np.random.default_rng(seed)
    lists, rewards, teacher = [], [], []
    for _ in range(n):
        f = np.zeros((6, len(NAMES)), np.float32)
        f[:, COL["policy_logit"]] = rng.normal(size=6)
        f[:, COL["policy_rank"]] = np.argsort(np.argsort(-f[:, COL["policy_logit"]]))
        f[:, COL["plan_link_cosine"]] = rng.uniform(0.5, 1.0, 6)
        f[:, COL["text_top1_in_graph"]] = rng.uniform(0.0, 0.4, 6)
        win = int(rng.integers(6))
        f[win, COL["text_top1_in_graph"]] = 1.0
        lists.append(Shortlist(list(range(6)), f, [Executed(Ranking.empty(), 0)] * 6, [Ranking.empty()] * 6))
        rewards.append(np.eye(6)[win])
        teacher.append(np.eye(6)[int(np.argmax(f[:, COL["plan_link_cosine"]]))])
    return lists, rewards, teacher


def test_the_chooser_trained_on_rewards_beats_the_one_trained_on_the_teachers_choice():
    train, train_rewards, train_teacher = _task(300, 0)
    test, test_rewards, _ = _task(200, 1)
    learned = fit_chooser(train, train_rewards, FAST)
    imitated = fit_chooser(train, train_teacher, FAST)
    by_reward = hit1(test, test_rewards, picks(learned, test, 6))
    by_imitation = hit1(test, test_rewards, picks(imitated, test, 6))
    assert by_reward >= 90.0 and by_imitation <= 35.0  # chance is 1 in 6


def test_an_option_is_labelled_by_fusion_at_its_own_graph_weight():
    """The text branch misses the answer; the graph list has it first. At graph weight 0.5 fusion keeps the text
    branch's first answer on top, at 2.0 the graph's: the same plan, two labels."""
    text, graph = Ranking(np.array([10, 11]), np.array([2.0, 1.0], np.float32)), Ranking(np.array([7]), np.ones(1))
    options = [Executed(graph, 1, graph_weight=w) for w in (0.5, 2.0)]
    fused = fused_lists(text, options, RewardConfig())
    labels = fused_hit1_labels(Shortlist([0, 0], np.zeros((2, len(NAMES))), options, fused), [7])
    assert labels.tolist() == [0.0, 1.0]
    fused = fusion([text, text], [graph, graph], RewardConfig(), graph_weights=[0.5, 2.0])
    assert [int(r.node_ids[0]) for r in fused] == [10, 7]


def test_k_is_chosen_on_validation_and_the_smallest_wins_a_tie():
    lists, rewards, _ = _task(200, 2)
    booster = fit_chooser(lists, rewards, FAST)
    k, by_k = choose_k(booster, lists, rewards, (1, 3, 6))
    assert set(by_k) == {1, 3, 6} and k == 6 and by_k[6] > by_k[3] > by_k[1] - 1e-9
    # where every k ties (no question has a rewarded candidate), the smallest k is kept
    flat = [np.zeros(6) for _ in lists]
    assert choose_k(booster, lists, flat, (3, 1, 6))[0] == 1


def test_the_shortlist_is_the_policys_best_k_plus_abstain():
    logits = np.array([0.1, 2.0, -1.0, 1.5, 0.0])
    mask = np.array([True, True, True, True, False])
    plans = ['{"abstain":true}', "a", "b", "c", "d"]
    assert shortlist(logits, mask, plans, 2) == [1, 3, 0]  # abstain appended
    assert shortlist(logits, mask, plans, 3) == [1, 3, 0]  # abstain is among the best 3 already
    assert shortlist(logits, mask, ["a", "b", "c", "d", "e"], 2) == [1, 3]  # no abstain offered


@pytest.mark.parametrize(
    ("val", "previous", "heldout", "heldout_previous", "passes"),
    [
        (50.0, 45.0, 48.0, 44.0, True),  # rose on both
        (50.0, 45.0, 44.0, 44.0, False),  # rose where it was selected, tied on the held-out queries
        (50.0, 45.0, 43.0, 44.0, False),  # selection overfit: lower on the held-out queries
        (45.0, 45.0, 48.0, 44.0, True),  # rose on the held-out queries, tied on the selecting ones
        (44.0, 45.0, 48.0, 44.0, False),  # fell on the selecting queries
        (50.0, 45.0, None, None, True),  # a start without a held-out reading (an older checkpoint)
        (45.0, 45.0, None, None, False),
    ],
)
def test_the_gate_refuses_a_round_that_does_not_beat_its_start_on_held_out_validation(
    val, previous, heldout, heldout_previous, passes, tmp_path
):
    gate = Gate(val, previous, heldout, heldout_previous)
    assert gate.passed is passes
    gate.write(tmp_path)
    assert Gate.read(tmp_path) == gate


def test_a_policy_with_a_chooser_picks_an_executed_candidate_and_reloads_the_same(world, tmp_path):
    """On the tiny world with the real encoder and executor: the pick's result is the executed plan's own, and a
    saved policy with its chooser chooses the same after loading."""
    torch.manual_seed(0)
    encoder = load_encoder(EncoderConfig())
    cfg = world.teacher.cfg
    probe = new_policy(world.skb.schema, encoder, cfg, [], PolicyConfig())
    keys = sorted(
        {
            k
            for q in world.train
            for c in probe.featurizer.candidates(world.queries[q], world.tables[q])
            if c
            for k in path_keys(c)
        }
    )
    policy = new_policy(world.skb.schema, encoder, cfg, keys, PolicyConfig())
    env = world.env()

    def lists_of(qids):
        x = policy.featurizer([world.queries[q] for q in qids], [world.tables[q] for q in qids])
        with torch.no_grad():
            logits = policy.head(x).numpy()

        def run(pairs):
            out = env.executor.execute_batch(
                [p for _, p in pairs],
                [world.queries[qids[i]] for i, _ in pairs],
                [world.tables[qids[i]] for i, _ in pairs],
            )
            return [Executed(r, t.candidates) for r, t in out]

        lists = shortlists(logits, x, None, [env.text[q] for q in qids], run, 4, env.reward_cfg, WEIGHTS)
        return lists, [fused_hit1_labels(s, world.gold[q]) for q, s in zip(qids, lists)]

    lists, labels = lists_of(world.train)
    assert all(len(set(s.rows)) <= 5 for s in lists) and sum(len(s.rows) for s in lists) > len(lists)
    for s in lists:  # every candidate with a result at each weight, an empty one once
        for j in set(s.rows):
            got = sorted(e.graph_weight for r, e in zip(s.rows, s.executed) if r == j)
            assert got == (sorted(WEIGHTS) if len(s.executed[s.rows.index(j)].ranking) else [1.0])
    policy.chooser = PlanChooser(fit_chooser(lists, labels, FAST), 4, WEIGHTS, None, 64)
    qids = world.val[:16]
    queries, tables = [world.queries[q] for q in qids], [world.tables[q] for q in qids]
    text = [env.text[q] for q in qids]

    def run(pairs):
        out = env.executor.execute_batch(
            [p for _, p in pairs], [queries[i] for i, _ in pairs], [tables[i] for i, _ in pairs]
        )
        return [Executed(r, t.candidates, t) for r, t in out]

    attempts, chosen, pools = policy.choose(queries, tables, text, run, env.reward_cfg, pool_temperature=1e-4)
    again = env.executor.execute_batch([a.text for a in attempts], queries, tables)
    assert pools is not None and len(pools) == len(queries)
    for (ranking, _), c, pool, t in zip(again, chosen, pools, text):
        assert ranking.node_ids.tolist() == c.ranking.node_ids.tolist()
        assert c.graph_weight in WEIGHTS or (c.graph_weight == 1.0 and not len(ranking))
        # a cold pool is the chosen option's fused list (the runners-up weigh under POOL_MIN_WEIGHT), or, where the
        # chooser scores the chosen plan the same at both graph weights (an exact tie), both of its fused lists
        fused = {w: fuse(t, c.ranking, graph_weighted(env.reward_cfg, w)) for w in (*WEIGHTS, c.graph_weight)}
        tie = rrf([fused[w] for w in WEIGHTS], [0.5, 0.5], k=env.reward_cfg.rrf_k, top=POOL_SIZE)
        assert pool.node_ids.tolist() in (fused[c.graph_weight].node_ids.tolist(), tie.node_ids.tolist())
    assert policy.choose(queries, tables, text, run, env.reward_cfg)[2] is None
    policy.save(tmp_path, cfg)
    loaded = load_policy(tmp_path, world.skb.schema, encoder)
    assert loaded.chooser is not None and loaded.chooser.k == 4 and loaded.chooser.graph_weights == WEIGHTS
    assert [a.text for a in loaded.choose(queries, tables, text, run, env.reward_cfg)[0]] == [a.text for a in attempts]


def test_the_candidate_pool_weighs_each_option_by_the_choosers_confidence():
    """Two options besides ABSTAIN: a cold pool is the best-scored option's fused list; a warm one adds the
    runner-up's answers, and a node both options return ranks above one that only the runner-up returns."""
    weights = RewardConfig()
    text = Ranking(np.array([1, 2, 3]), np.array([3.0, 2.0, 1.0], np.float32))
    first = Executed(Ranking(np.array([4, 5]), np.array([0.9, 0.8], np.float32)), 2)
    second = Executed(Ranking(np.array([5, 6]), np.array([0.9, 0.8], np.float32)), 2)
    executed = [first, second]
    options = Shortlist([0, 1], np.zeros((2, len(NAMES)), np.float32), executed, fused_lists(text, executed, weights))
    scores = np.array([2.0, 1.0])
    cold = candidate_pool(options, scores, weights.rrf_k, 0.01)
    assert cold.node_ids.tolist() == fuse(text, first.ranking, weights).node_ids.tolist()
    warm = candidate_pool(options, scores, weights.rrf_k, 2.0)
    assert set(warm.node_ids.tolist()) == {1, 2, 3, 4, 5, 6}
    assert warm.rank_of([5]) < warm.rank_of([4]) and warm.rank_of([4]) < warm.rank_of([6])


def test_a_three_finding_question_ranks_the_disease_with_all_three_above_one_with_two(world):
    """Three phenotypes in one question: the three-way intersection is a candidate, and executed it ranks a disease
    that has all three above one that has two (which it leaves out); its partial match ("most") is one too, and
    ranks the disease with all three above the one with two, which it keeps."""
    skb = world.skb
    types = skb.nodes["type"].astype(str).to_numpy()
    e = skb.edges[skb.edges["rel"] == "phenotype present"]
    has: dict[int, set[int]] = {}
    for s, d in zip(e["src"], e["dst"]):
        disease, finding = (s, d) if types[s] == "disease" else (d, s)
        has.setdefault(int(disease), set()).add(int(finding))
    found = next(
        (d, trio, other)
        for d, fs in sorted(has.items())
        for trio in itertools.combinations(sorted(fs), 3)
        for other, gs in sorted(has.items())
        if other != d and len(gs & set(trio)) == 2
    )
    disease, trio, partial = found
    names = skb.nodes["name"].astype(str).tolist()
    rows = tuple(
        EntityRow(
            f"E{i}", names[f], "anchor", ("effect/phenotype",), {"effect/phenotype": (Link(f, names[f], 1.0, 3),)}
        )
        for i, f in enumerate(trio, 1)
    )
    query = f"{names[trio[0]]}, {names[trio[1]]} and {names[trio[2]]}: which disease?"
    table = EntityTable(rows)
    plans = candidate_plans(skb.schema, table, query, ["disease"], CandidateConfig())
    triples = [p for p in plans if len(p["anchors"]) == 3]
    assert triples and all(check_plan(json_text(p), skb.schema, table) is None for p in triples)
    present = next(p for p in triples if {h["rel"] for h in p["hops"]} == {"phenotype present"} and "match" not in p)
    ranking, trace = world.executor.execute_batch([json_text(present)], [query], [table])[0]
    assert trace.error is None
    assert ranking.rank_of([disease]) is not None and ranking.rank_of([partial]) is None
    most = next(p for p in triples if p.get("match") == "most" and p["hops"] == present["hops"])
    ranking, trace = world.executor.execute_batch([json_text(most)], [query], [table])[0]
    assert trace.error is None and len(trace.cypher.split(";\n")) == 3  # one query per finding
    assert ranking.rank_of([disease]) < ranking.rank_of([partial])
