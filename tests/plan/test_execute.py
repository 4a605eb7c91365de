"""Plan execution on a tiny handmade SKB with the real MiniLM encoder, faiss index and LadybugDB store.

Graph (ids):  anatomy 0 retina, 1 retinal vessel, 2 liver | gene 3 RHO, 4 RPE65, 5 ALB
              drug 6 voretigene, 7 vitamin A, 8 albumin infusion | disease 9 retinitis pigmentosa, 10 cirrhosis
expression present: 0-3, 0-4, 1-4, 2-5   target: 6-4, 7-3, 8-5   indication: 6-9, 7-9, 8-10   ppi: 3-4
"""

import json

import numpy as np
import pandas as pd
import pytest

from grasp_core.embed.config import EncoderConfig
from grasp_core.embed.encoder import load_encoder
from grasp_core.embed.node_embeddings import build_node_embeddings, load_node_embeddings
from grasp_core.embed.vector_index import NodeIndex
from grasp_core.entities.table import EntityRow, EntityTable
from grasp_core.graph.config import GraphStoreConfig
from grasp_core.graph.open import open_graph_store
from grasp_core.plan.config import ExecutionConfig
from grasp_core.plan.execute import PlanExecutor
from grasp_core.skb.format import SKB
from grasp_core.skb.schema import Relation, Schema
from tests.plan.oracle import random_skb
from tests.plan.test_parse_validate import GOOD, INVALID, TABLE

NODES = [
    ("anatomy", "retina", "light-sensitive tissue at the back of the eye"),
    ("anatomy", "retinal vessel", "blood vessels supplying the retina"),
    ("anatomy", "liver", "organ that filters the blood"),
    ("gene/protein", "RHO", "rhodopsin, the photoreceptor pigment"),
    ("gene/protein", "RPE65", "retinoid isomerohydrolase of the pigment epithelium"),
    ("gene/protein", "ALB", "albumin, the main plasma protein"),
    ("drug", "voretigene", "gene therapy for inherited retinal dystrophy"),
    ("drug", "vitamin A", "supplement that supports night vision"),
    ("drug", "albumin infusion", "plasma expander for liver failure"),
    ("disease", "retinitis pigmentosa", "inherited degeneration of the retina"),
    ("disease", "cirrhosis", "scarring of the liver"),
]
EDGES = [
    (0, "expression present", 3),
    (0, "expression present", 4),
    (1, "expression present", 4),
    (2, "expression present", 5),
    (6, "target", 4),
    (7, "target", 3),
    (8, "target", 5),
    (6, "indication", 9),
    (7, "indication", 9),
    (8, "indication", 10),
    (3, "ppi", 4),
]
SCHEMA = Schema(
    "hand",
    {"anatomy": ("details",), "gene/protein": ("details",), "drug": ("details",), "disease": ("details",)},
    (
        Relation("expression present", "anatomy", "gene/protein"),
        Relation("target", "drug", "gene/protein"),
        Relation("indication", "drug", "disease"),
        Relation("ppi", "gene/protein", "gene/protein"),
    ),
)
CFG = ExecutionConfig(name_k=2, name_tau=0.0)  # keep 2 bindings (any positive cosine) so max and sums matter


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exec")
    nodes = pd.DataFrame(
        {
            "node_id": np.arange(len(NODES)),
            "key": [f"K{i}" for i in range(len(NODES))],
            "type": [t for t, _, _ in NODES],
            "name": [n for _, n, _ in NODES],
            "details": [d for _, _, d in NODES],
        }
    )
    edges = pd.DataFrame(EDGES, columns=["src", "rel", "dst"])
    skb = SKB(SCHEMA, nodes, edges, pd.DataFrame({"qid": [], "split": [], "query": [], "answer_ids": []}))
    encoder = load_encoder(EncoderConfig())
    embeddings = load_node_embeddings(build_node_embeddings(skb, encoder, tmp / "emb"))
    store = open_graph_store(GraphStoreConfig(), tmp / "graph")
    store.load(skb)
    executor = PlanExecutor(skb, NodeIndex.build(skb, embeddings), encoder, store, CFG)
    yield executor, embeddings, encoder
    store.close()


def cos(embeddings, encoder, text, ids, kind):
    q = encoder.encode([text], CFG.max_tokens)[0]
    return {i: float(embeddings.of(kind)[i] @ q) for i in ids}


def plan_text(anchors, hops, target="drug", relevance="gene therapy for blindness"):
    return json.dumps(
        {
            "target": {"type": target},
            "anchors": anchors,
            "relevance_text": relevance,
            "hops": [{"from": f, "rel": r, "to": t} for f, r, t in hops],
        }
    )


RETINA = {"var": "a1", "type": "anatomy", "text": "retina"}
TWO_HOPS = [("a1", "expression present", "x1"), ("x1", "target", "target")]


def expect(scores: dict[int, float]) -> list[int]:
    return sorted(scores, key=lambda i: (-scores[i], i))


def test_two_hop_plan_matches_the_hand_computed_ranking(env):
    executor, emb, enc = env
    ranking, trace = executor.execute(plan_text([RETINA], TWO_HOPS), "which drug?")
    c = cos(emb, enc, "retina", [0, 1, 2], "name")
    bound = sorted(c, key=lambda i: -c[i])[:2]
    assert set(bound) == {0, 1} and trace.error is None
    assert [(b.node_id, b.name) for b in trace.bindings["a1"]] == [(i, NODES[i][1]) for i in bound]
    rel = cos(emb, enc, "gene therapy for blindness", [6, 7, 8], "doc")
    # paths: 0-4-6 and 1-4-6 reach drug 6 (max of the two), 0-3-7 reaches drug 7; drug 8 only via liver
    want = {6: max(c[0], c[1]) + rel[6], 7: c[0] + rel[7]}
    assert ranking.node_ids.tolist() == expect(want)
    np.testing.assert_allclose(ranking.scores, [want[i] for i in expect(want)], atol=1e-5)
    assert (
        trace.candidates == 2
        and "MATCH" in trace.cypher
        and set(trace.seconds) == {"validate", "link", "traverse", "rescore"}
    )
    assert executor.explain_paths(None, trace, 6) == {"a1": [(bound[0], 4, 6), (bound[1], 4, 6)]}
    assert executor.explain_paths(None, trace, 7, limit=1) == {"a1": [(0, 3, 7)]}


def test_multi_anchor_intersection_sums_the_anchor_scores(env):
    executor, emb, enc = env
    anchors = [RETINA, {"var": "a2", "ref": "E1", "match_mode": "name"}]
    table = EntityTable((EntityRow("E1", "retinitis pigmentosa", "anchor", ("disease",)),))
    ranking, trace = executor.execute(plan_text(anchors, TWO_HOPS + [("a2", "indication", "target")]), "q", table)
    c = cos(emb, enc, "retina", [0, 1], "name")
    d = cos(emb, enc, "retinitis pigmentosa", [9, 10], "name")
    assert {b.node_id for b in trace.bindings["a2"]} == {
        9,
        10,
    }  # cirrhosis is bound too, but drug 8 is not reached by a1
    rel = cos(emb, enc, "gene therapy for blindness", [6, 7], "doc")
    want = {6: max(c[0], c[1]) + d[9] + rel[6], 7: c[0] + d[9] + rel[7]}
    assert ranking.node_ids.tolist() == expect(want)
    np.testing.assert_allclose(ranking.scores, [want[i] for i in expect(want)], atol=1e-5)


def test_the_in_process_traversal_and_the_store_query_give_the_same_rankings(env):
    """``traversal="arrays"`` (the default) and ``"store"`` (the Cypher query) answer every plan identically."""
    executor, *_ = env
    assert executor.cfg.traversal == "arrays"
    on_store = PlanExecutor(
        executor.skb,
        executor.index,
        executor.encoder,
        executor.store,
        ExecutionConfig(**{**vars(CFG), "traversal": "store"}),
    )
    table = EntityTable((EntityRow("E1", "retinitis pigmentosa", "anchor", ("disease",)),))
    liver = {"var": "a1", "type": "anatomy", "text": "liver"}
    plans = [
        plan_text([RETINA], TWO_HOPS),
        plan_text([RETINA, {"var": "a2", "ref": "E1"}], TWO_HOPS + [("a2", "indication", "target")]),
        plan_text([liver], [("a1", "expression present", "x1"), ("x1", "ppi", "x2"), ("x2", "target", "target")]),
        plan_text([RETINA], [("a1", "expression present", "x1"), ("x1", "ppi", "target")], target="gene/protein"),
    ]
    reached = 0
    for plan in plans:
        (r1, t1), (r2, t2) = executor.execute(plan, "q", table), on_store.execute(plan, "q", table)
        assert r1.node_ids.tolist() == r2.node_ids.tolist() and r1.scores.tolist() == r2.scores.tolist()
        assert (t1.error, t1.candidates, t1.cypher, t1.bindings) == (t2.error, t2.candidates, t2.cypher, t2.bindings)
        reached += len(r1) > 0
    assert reached == len(plans)
    with pytest.raises(ValueError, match="traversal must be 'arrays' or 'store'"):
        PlanExecutor(executor.skb, None, None, None, ExecutionConfig(traversal="memory"))


def test_empty_relevance_text_rescores_by_the_query_minus_the_anchors(env):
    executor, emb, enc = env
    ranking, _ = executor.execute(
        plan_text([RETINA], TWO_HOPS, relevance=""), "Night vision supplement for the Retina?"
    )
    c = cos(emb, enc, "retina", [0, 1], "name")
    rel = cos(
        emb, enc, "Night vision supplement for the?", [6, 7], "doc"
    )  # the teacher's relevance text for this query
    want = {6: max(c[0], c[1]) + rel[6], 7: c[0] + rel[7]}
    np.testing.assert_allclose(ranking.scores, [want[i] for i in expect(want)], atol=1e-5)


def test_zero_hop_plan_is_dense_search_of_the_target_type(env):
    executor, emb, enc = env
    ranking, trace = executor.execute(plan_text([], [], relevance="plasma expander"), "ignored")
    rel = cos(emb, enc, "plasma expander", [6, 7, 8], "doc")
    assert ranking.node_ids.tolist() == expect(rel) and trace.cypher == "" and trace.candidates == 3
    np.testing.assert_allclose(ranking.scores, [rel[i] for i in expect(rel)], atol=1e-5)


def test_default_thresholds_keep_only_near_best_bindings(env):
    executor, *_ = env
    strict = PlanExecutor(executor.skb, executor.index, executor.encoder, executor.store)
    ranking, trace = strict.execute(plan_text([RETINA], TWO_HOPS), "q")
    assert [b.node_id for b in trace.bindings["a1"]] == [0]  # "retinal vessel" is below 0.95 x best
    assert sorted(ranking.node_ids.tolist()) == [6, 7]


@pytest.mark.parametrize("change, reason", INVALID, ids=[f"{r}-{i}" for i, (_, r) in enumerate(INVALID)])
def test_invalid_plans_give_an_empty_ranking_and_the_reason(change, reason):
    executor = PlanExecutor(random_skb(), index=None, encoder=None, store=None)  # nothing past validation runs
    ranking, trace = executor.execute(json.dumps(dict(GOOD, **change)), "q", TABLE)
    assert len(ranking) == 0 and trace.error == reason and trace.plan is None


@pytest.mark.parametrize(
    "text, reason",
    [
        ("not json", "json"),
        ('{"target": {"type": "drug"},}', "json"),
        ('{"target": {"type": "drug"}, "x": 1}', "schema"),
    ],
)
def test_unparseable_plans_give_an_empty_ranking(env, text, reason):
    ranking, trace = env[0].execute(text, "q")
    assert len(ranking) == 0 and trace.error == reason


def test_unreached_plans_and_missing_refs_give_reasons(env):
    executor, *_ = env
    liver = {"var": "a1", "type": "anatomy", "text": "liver"}
    strict = PlanExecutor(executor.skb, executor.index, executor.encoder, executor.store)
    ranking, trace = strict.execute(plan_text([liver], TWO_HOPS), "q")
    assert ranking.node_ids.tolist() == [8]  # sanity: liver reaches albumin infusion
    ppi_plan = plan_text([liver], [("a1", "expression present", "x1"), ("x1", "ppi", "x2"), ("x2", "target", "target")])
    ranking, trace = strict.execute(ppi_plan, "q")
    assert len(ranking) == 0 and trace.error == "no_candidates"  # ALB has no ppi partner
    ref_plan = plan_text([{"var": "a1", "ref": "E1", "type": "anatomy"}], TWO_HOPS)
    ranking, trace = strict.execute(ref_plan, "q")  # typed ref, but no entity table to read the mention from
    assert len(ranking) == 0 and trace.error == "unknown_ref"


def test_batch_embeds_once_and_equals_single_execution(env, monkeypatch):
    executor, *_ = env
    plans = [plan_text([RETINA], TWO_HOPS), "garbage", plan_text([], [], relevance="liver")]
    singles = [executor.execute(p, "q") for p in plans]
    calls = []
    original = executor.encoder.encode
    monkeypatch.setattr(
        executor.encoder, "encode", lambda texts, n, **kw: calls.append(len(texts)) or original(texts, n)
    )
    executor._memo.clear()
    batch = executor.execute_batch(plans + plans[:1], ["q"] * 4)
    assert calls == [3]  # one anchor text + two relevance texts, one encoder call; the repeated plan adds none
    again = executor.execute_batch(plans, ["q"] * 3)
    assert calls == [3]  # texts seen before are not encoded again
    for (r1, t1), (r2, t2), (r3, _) in zip(singles, batch, again):
        assert r1.node_ids.tolist() == r2.node_ids.tolist() == r3.node_ids.tolist() and t1.error == t2.error
        np.testing.assert_allclose(r1.scores, r2.scores, atol=1e-5)
        np.testing.assert_array_equal(r2.scores, r3.scores)


def test_a_shared_anchor_is_searched_once_with_the_same_bindings(env, monkeypatch):
    executor, *_ = env
    drugs = plan_text([RETINA], TWO_HOPS)
    genes = plan_text([RETINA], [("a1", "expression present", "target")], target="gene/protein")
    liver = plan_text([{"var": "a1", "type": "anatomy", "text": "liver"}], TWO_HOPS)
    fresh = [executor.execute(p, "q") for p in (drugs, genes, liver)]
    executor._links.clear()
    searches = []
    original = executor.index.search
    monkeypatch.setattr(
        executor.index, "search", lambda t, kind, v, k: searches.append((t, kind)) or original(t, kind, v, k)
    )
    batch = executor.execute_batch([drugs, genes, liver, drugs], ["q"] * 4)
    # "retina" (three plans) and "liver" are linked once each; rescoring needs no index search at this size
    assert searches == [("anatomy", "name"), ("anatomy", "name")]
    for (r1, t1), (r2, t2) in zip(fresh + fresh[:1], batch):
        assert r1.node_ids.tolist() == r2.node_ids.tolist() and t1.bindings == t2.bindings
        np.testing.assert_array_equal(r1.scores, r2.scores)
    batch[0][1].bindings["a1"].clear()  # a trace's bindings are its own
    assert executor.execute(drugs, "q")[1].bindings == fresh[0][1].bindings


def test_injection_through_texts_leaves_the_store_untouched(env):
    executor, *_ = env
    evil = (
        "x\"}) MATCH (n) DETACH DELETE n // '); DROP TABLE `N_drug`; CREATE NODE TABLE Evil(id INT64, PRIMARY KEY(id))"
    )
    before = executor.store.counts()
    anchors = [dict(RETINA, text=evil)]
    _, trace = executor.execute(plan_text(anchors, TWO_HOPS, relevance=evil), evil)
    assert trace.error in (None, "no_candidates") and evil not in trace.cypher
    assert executor.store.counts() == before
    assert sorted(executor.store.run("CALL show_tables() RETURN name")) == [
        ("N_anatomy",),
        ("N_disease",),
        ("N_drug",),
        ("N_gene_protein",),
        ("R_expression_present",),
        ("R_indication",),
        ("R_ppi",),
        ("R_target",),
    ]


def test_beyond_the_exact_limit_candidates_are_rescored_through_the_index(env):
    executor, emb, enc = env
    approx = PlanExecutor(
        executor.skb,
        executor.index,
        executor.encoder,
        executor.store,
        ExecutionConfig(name_k=2, name_tau=0.0, exact_rescore_max=2),
    )
    plan = plan_text([RETINA], TWO_HOPS, relevance="night vision supplement")
    exact, _ = executor.execute(plan, "q")
    ranking, trace = approx.execute(plan, "q")
    assert trace.candidates == 2 and len(exact) == 2  # at the limit: still exact
    rel = cos(emb, enc, "night vision supplement", [6, 7, 8], "doc")
    top2 = sorted(rel, key=lambda i: -rel[i])[:2]
    tiny = PlanExecutor(
        executor.skb,
        executor.index,
        executor.encoder,
        executor.store,
        ExecutionConfig(name_k=2, name_tau=0.0, exact_rescore_max=1),
    )
    ranking, _ = tiny.execute(plan, "q")  # depth-1 search keeps the best-cosine drug only if it is a candidate
    want = [i for i in top2[:1] if i in (6, 7)]
    assert ranking.node_ids.tolist() == want
    if want:
        np.testing.assert_allclose(ranking.scores, exact.scores[exact.node_ids == want[0]], atol=1e-5)


# ------------------------------------------------------------------ never raises, for any input (hypothesis)

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ANY_TEXT = st.lists(  # any text, lone surrogates and control characters included (st.text leaves surrogates out)
    st.characters() | st.sampled_from(["\ud800", "\udcff", "\udfff", "\x00", "\x1b", "\u202e"]), max_size=40
).map("".join)
TYPES = st.sampled_from([*SCHEMA.node_types, "organ", "", "Drug"])
RELS = st.sampled_from([*SCHEMA.relation_names, "cures", ""])
VARS = st.sampled_from(["a1", "a2", "x1", "target", "", "E1"])
ANCHOR = st.fixed_dictionaries(
    {"var": VARS},
    optional={
        "type": TYPES,
        "text": ANY_TEXT,
        "ref": st.sampled_from(["E1", "E2", "E9"]),
        "match_mode": st.sampled_from(["name", "doc", "fuzzy"]),
    },
)
HOP = st.fixed_dictionaries({"from": VARS, "rel": RELS, "to": VARS}, optional={"to_type": TYPES})
PLAN = st.fixed_dictionaries(
    {"target": st.fixed_dictionaries({"type": TYPES}), "anchors": st.lists(ANCHOR, max_size=3)},
    optional={"hops": st.lists(HOP, max_size=3), "relevance_text": ANY_TEXT},
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
    max_leaves=8,
)
VALID_SHAPE = st.builds(  # a valid plan with any anchor and relevance texts (the random shapes rarely validate)
    lambda anchor, relevance: {
        **GOOD,
        "anchors": [{**GOOD["anchors"][0], "text": anchor}],
        "relevance_text": relevance,
    },
    ANY_TEXT,
    ANY_TEXT,
)
PLAN_TEXT = (VALID_SHAPE | PLAN).map(json.dumps) | JSON.map(json.dumps) | ANY_TEXT
TABLES = st.none() | st.builds(
    lambda mention, types: EntityTable((EntityRow("E1", mention, "anchor", types), TABLE.rows[0])),
    ANY_TEXT,
    st.lists(TYPES, max_size=2).map(tuple),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(st.tuples(PLAN_TEXT, ANY_TEXT, TABLES), min_size=1, max_size=3))
def test_execute_batch_never_raises(env, batch):
    executor, _, _ = env
    plans, queries, tables = (list(x) for x in zip(*batch))
    results = executor.execute_batch(plans, queries, tables)
    assert len(results) == len(plans)
    for ranking, trace in results:
        assert (trace.error is None) == (len(ranking) > 0 or trace.plan is not None and trace.error is None)
        assert trace.error is None or isinstance(trace.error, str)
        assert set(ranking.node_ids.tolist()) <= set(range(len(NODES)))


def test_a_lone_surrogate_in_an_anchor_text_costs_nothing_to_the_batch(env):
    executor, _, _ = env
    bad = plan_text([{"var": "a1", "type": "anatomy", "text": "ret\ud800ina"}], TWO_HOPS)
    good = plan_text([RETINA], TWO_HOPS)
    (r_bad, t_bad), (r_good, t_good) = executor.execute_batch([bad, good], ["which drug?", "which drug?"])
    assert (
        t_good.error is None and r_good.node_ids.tolist() == executor.execute(good, "which drug?")[0].node_ids.tolist()
    )
    assert t_bad.error is None and len(r_bad) > 0  # read as "ret\ufffdina"
