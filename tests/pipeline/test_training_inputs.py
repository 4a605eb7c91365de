"""No training input ever holds a ``test-human`` query: the real pipeline steps on a tiny SKB with such rows.

A tiny synth-prime SKB gets synthesized train/val/test queries plus ``test-human`` rows whose text carries a
marker. The steps run for real (MiniLM, faiss, LadybugDB, the programmatic teacher, the planner tokenizer,
SFT, the reranker's hard negatives and the ltr reranker, mFAR; smoke profile); every text the encoder sees while training and every training example is checked.
"""

from __future__ import annotations

import dataclasses
import os

import pandas as pd
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from grasp_core.artifacts import Artifacts
from grasp_core.components import Components
from grasp_core.entities.llm_extractor import gazetteer_demonstrations
from grasp_core.io import atomic_dir
from grasp_core.pipeline.asked_type import fit_asked_type_model
from grasp_core.pipeline.evaluation import eval_metrics_step
from grasp_core.pipeline.graph import entity_tables_step, graph_store_step, node_embeddings_step, vector_indexes_step
from grasp_core.pipeline.planner import (
    planner_base_step,
    planner_round_step,
    reward_table_step,
    rft_samples_step,
    sft_step,
    teacher_plans_step,
)
from grasp_core.pipeline.planner_inputs import load_teacher_plans
from grasp_core.pipeline.planner_lm import tokenizer_examples
from grasp_core.pipeline.planner_policy import ROUND_EXECUTED, PolicyData, PolicyKind
from grasp_core.pipeline.reranker import LISTS_FILE, hard_negatives_step, reranker_step
from grasp_core.pipeline.text import mfar_model_step, text_index_step, text_rankings_step
from grasp_core.planner.samples import rl_queries
from grasp_core.profiles import get_profile
from grasp_core.questions.querygen import synthesize_queries
from grasp_core.rerank.ranker import LTRReranker
from grasp_core.skb.format import HUMAN_QID_OFFSET, write_queries, write_skb
from grasp_core.sources.synth import build_synth_skb
from tests.answer_parity import assert_retrieve_answers_as_evaluated

pytestmark = pytest.mark.slow  # builds a tiny world and trains tiny models (about 20 s of CPU)

MARKER = "quokkamarker"  # a word no synthesized query or node text holds
N_HUMAN = 6


@pytest.fixture(scope="module")
def components(tmp_path_factory):
    art = Artifacts.for_dataset("synth-prime", tmp_path_factory.mktemp("artifacts"))
    graph = build_synth_skb("prime", "tiny")
    synth = synthesize_queries(graph, 90 + N_HUMAN, seed=0)
    # the last rows become test-human: real questions with real gold, text marked
    human = synth.tail(N_HUMAN).assign(
        qid=HUMAN_QID_OFFSET + pd.RangeIndex(N_HUMAN), split="test-human", query=lambda d: d["query"] + f" {MARKER}"
    )
    queries = pd.concat([synth.head(90), human], ignore_index=True)
    assert MARKER not in " ".join(graph.documents())
    write_skb(graph, art.path("skb"))
    with atomic_dir(art.path("queries")) as tmp:
        write_queries(queries, tmp / "queries.parquet")
    components = Components(art, get_profile("smoke"))
    for step in (node_embeddings_step, vector_indexes_step, graph_store_step, entity_tables_step, text_index_step):
        step(components)
    yield components
    components.close()


@pytest.fixture(scope="module")
def encoded_in_training(components):
    """Every text the (real) encoder encodes while the training steps run."""
    seen: list[str] = []
    encode = components.encoder.encode

    def recording(texts, *args, **kwargs):
        seen.extend(texts)
        return encode(texts, *args, **kwargs)

    def training(*steps):
        components.encoder.encode = recording
        try:
            for step in steps:
                step(components)
        finally:
            components.encoder.encode = encode

    training(teacher_plans_step, planner_base_step, mfar_model_step)
    text_rankings_step(components)  # inference: ranks every split's queries, the evaluation's input
    training(sft_step, hard_negatives_step, reranker_step)
    return seen


def human_qids(components) -> set[int]:
    return set(components.split("test-human")["qid"].astype(int))


def test_the_marked_rows_are_there(components):
    assert len(human_qids(components)) == N_HUMAN
    assert all(MARKER in q for q in components.split("test-human")["query"])


def test_no_training_step_encodes_a_test_human_text(encoded_in_training):
    assert encoded_in_training  # the teacher's relevance texts and mFAR's training queries went through it
    assert not [t for t in encoded_in_training if MARKER in t]


def test_teacher_plans_sft_and_rl_draw_on_train_and_val_only(components, encoded_in_training):
    plans = load_teacher_plans(components)
    assert set(plans["split"]) <= {"train", "val", "test"} and not set(plans["qid"]) & human_qids(components)
    assert (
        components.profile.planner == "policy"
    )  # the smoke profile's planner: its SFT queries and executed candidates
    assert PolicyData(components).train_qids and not set(PolicyData(components).train_qids) & human_qids(components)
    executed = pd.read_parquet(components.art.require("teacher_plans") / "executed.parquet")
    assert len(executed) and not set(executed["qid"].astype(int)) & human_qids(components)
    prompts, completions = tokenizer_examples(components)  # what the `lm` planner's tokenizer would be trained on
    assert len(prompts) and not [t for t in list(prompts) + list(completions) if MARKER in t]
    assert not set(rl_queries(components.split("train"), components.profile.rl)) & human_qids(components)


def test_reranker_trains_on_train_queries_only(components, encoded_in_training):
    negatives = pd.read_parquet(components.art.require("reranker_hard_negatives") / "hard_negatives.parquet")
    train = set(components.split("train")["qid"].astype(int))
    assert len(negatives) and set(negatives["qid"].astype(int)) <= train
    lists = pd.read_parquet(
        components.art.require("reranker_hard_negatives") / LISTS_FILE
    )  # the ltr ranker's training lists
    assert set(lists["qid"].astype(int)) == train  # every train query (LTRConfig.train_queries = None)
    assert isinstance(
        components.reranker(), LTRReranker
    )  # the smoke profile's kind, loaded from the artifact just built


def test_extractor_demonstrations_come_from_train(components):
    demos = gazetteer_demonstrations(components.skb, components.extractor, pool=90)
    assert demos and not [query for query, _ in demos if MARKER in query]


def test_retrieve_answers_every_test_and_test_human_query_as_the_evaluation_ranked_it(components, encoded_in_training):
    eval_metrics_step(components)  # the served planner is the SFT one here (no RL round ran)
    checked = assert_retrieve_answers_as_evaluated(components)
    assert checked == {"test": len(components.split("test")), "test-human": N_HUMAN} and checked["test"] > 5


def test_the_entity_tables_keep_the_gazetteers_dictionary_for_a_process_that_answers(components, monkeypatch):
    import dataclasses

    import grasp_core.entities.gazetteer as gazetteer
    from grasp_core.entities.dictionary import FILE, build_dictionary, read_dictionary

    built = build_dictionary(components.graph, components.profile.gazetteer)
    assert (components.art.require("entity_tables") / FILE).is_file() and built.entries
    monkeypatch.setattr(gazetteer, "build_dictionary", lambda *a: pytest.fail("built, not read"))
    reader = Components(components.art, components.profile)
    assert reader.gazetteer.dictionary == built  # read back, as built
    other = dataclasses.replace(components.profile.gazetteer, min_chars=components.profile.gazetteer.min_chars + 1)
    profile = dataclasses.replace(components.profile, gazetteer=other)
    assert (
        read_dictionary(
            components.art.require("entity_tables") / FILE, Components(components.art, profile).dictionary_key()
        )
        is None
    )
    monkeypatch.undo()
    assert Components(components.art, profile).gazetteer.dictionary == build_dictionary(components.graph, other)


def test_sft_imitates_only_the_first_sft_queries_and_rl_still_sees_every_taught_query(components, encoded_in_training):
    profile = components.profile
    limited = Components(
        components.art,
        dataclasses.replace(profile, policy_train=dataclasses.replace(profile.policy_train, sft_queries=5)),
    )
    try:
        every, some = PolicyData(components), PolicyData(limited)
        keep_all, keep_some = every.sft_targets()[1], some.sft_targets()[1]
        assert len(keep_all) > 5 and keep_some == [i for i in keep_all if i < 5]
        assert some.train_qids == every.train_qids  # the RL rounds sample from every taught query
    finally:
        limited.close()


def test_a_round_keeps_what_it_executed_and_the_next_round_runs_none_of_it_again(components, encoded_in_training):
    reward_table_step(components)
    rft_samples_step(components, "1")
    planner_round_step(components, "1")
    start = components.art.require("planner", "1")
    kept = pd.read_parquet(start / ROUND_EXECUTED)
    teacher = pd.read_parquet(components.art.require("teacher_plans") / "executed.parquet")
    assert len(kept) and not set(zip(kept["qid"], kept["plan"])) & set(zip(teacher["qid"], teacher["plan"]))
    data = PolicyData(components, PolicyKind().load(components, start), start)
    executed = []
    execute = components.executor.execute_batch
    components.executor.execute_batch = lambda plans, *a: executed.extend(plans) or execute(plans, *a)
    try:
        asked, _ = fit_asked_type_model(components)
        train_q = [int(q) for q in components.split("train")["qid"] if data.env.gold.get(int(q))]
        for qids in (train_q, data.val_qids, data.heldout_qids):  # val: never taught, known from round 1 alone
            data.shortlists(qids, asked, max(components.profile.chooser.shortlist))
    finally:
        components.executor.execute_batch = execute
    assert executed == []  # round 1's shortlists of the same policy: every plan known from teacher_plans or round 1
    fresh = PolicyData(components, PolicyKind().load(components, start))  # without round 1's plans
    components.executor.execute_batch = lambda plans, *a: executed.extend(plans) or execute(plans, *a)
    try:
        fresh.shortlists(fresh.val_qids, asked, max(components.profile.chooser.shortlist))
    finally:
        components.executor.execute_batch = execute
    assert executed
