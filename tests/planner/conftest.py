"""One tiny synth-prime world for the planner tests, built once per session with real components.

Real MiniLM encoder, faiss NodeIndex, LadybugDB store, PlanExecutor, GazetteerExtractor, BM25 text rankings,
the programmatic teacher's plans for the training split, and a tiny planner base (tokenizer trained on this
SKB, a Qwen3-shaped model from config).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from grasp_core.embed.config import EncoderConfig
from grasp_core.embed.encoder import load_encoder
from grasp_core.embed.node_embeddings import build_node_embeddings, load_node_embeddings
from grasp_core.embed.vector_index import NodeIndex
from grasp_core.entities.gazetteer import GazetteerExtractor
from grasp_core.graph.config import GraphStoreConfig
from grasp_core.graph.open import open_graph_store
from grasp_core.llm.chat import render_prompt
from grasp_core.plan.execute import PlanExecutor
from grasp_core.planner.config import InferenceConfig, PlanGrammarConfig, SFTTrainingConfig, TinyModelConfig
from grasp_core.planner.lm.base import (
    PlannerModelConfig,
    base_model_path,
    build_planner_base,
)
from grasp_core.planner.lm.prompt import build_planner_messages, canonical_plan_json
from grasp_core.planner.lm.sft import train_sft
from grasp_core.planner.reward import RewardTable
from grasp_core.planner.scoring import PlannerEnv
from grasp_core.planner.teachers.programmatic import ProgrammaticTeacher
from grasp_core.questions.querygen import synthesize_queries, with_queries
from grasp_core.sources.synth import build_synth_skb
from grasp_core.text.bm25 import BM25Retriever

N_QUERIES = 240  # 144 train / 48 val / 48 test
# Small enough to train in seconds on one loaded core, big enough to learn the plan format.
N_SFT = 96  # teacher plans in the warm start; the next gold-first training queries are the RL queries
# Fast from-scratch SFT of the tiny model (a high learning rate is what a 0.4M-parameter model trained from scratch needs).
SFT_FAST = SFTTrainingConfig(
    n_examples=N_SFT,
    epochs=3.0,
    learning_rate=5e-3,
    warmup_ratio=0.1,
    effective_batch=8,
    per_device_batch=8,
    use_lora=False,
    max_length=768,
)
# The cpu profile's decoding: the planner writes the structure and refs; the executor derives the relevance text.
CPU_INFER = InferenceConfig(compact_prompt=True, grammar=PlanGrammarConfig(text_anchors=False, max_relevance_chars=0))
TINY = TinyModelConfig(
    hidden_size=96, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=192, max_positions=1024
)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """On a loaded 2-core machine two OpenMP threads spin against each other; one thread is faster there."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@dataclass
class World:
    skb: object
    executor: PlanExecutor
    tables: dict  # qid -> EntityTable
    text: dict  # qid -> BM25 Ranking
    queries: dict  # qid -> query text
    gold: dict  # qid -> gold ids
    train: list[int]
    val: list[int]
    teacher: ProgrammaticTeacher
    taught: dict  # train qid -> TeacherPlan

    def env(self, table: RewardTable | None = None) -> PlannerEnv:
        return PlannerEnv(
            self.skb.schema,
            self.executor,
            self.queries,
            self.tables,
            self.text,
            self.gold,
            self.skb.num_nodes,
            table if table is not None else RewardTable.prior(),
        )

    def sft_qids(self) -> list[int]:
        """Training queries whose teacher plan ranks a gold answer first (≤ 20 answers)."""
        return [q for q in self.train if self.taught[q].gold_rank == 1 and len(self.gold[q]) <= 20]

    def completion(self, qid: int) -> str:
        return canonical_plan_json(self.taught[qid].plan, self.tables[qid], with_relevance=False)


@pytest.fixture(scope="session")
def world(tmp_path_factory) -> World:
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("world")
    skb = build_synth_skb("prime", "tiny")
    skb = with_queries(skb, synthesize_queries(skb, N_QUERIES, seed=0))
    encoder = load_encoder(EncoderConfig())
    index = NodeIndex.build(skb, load_node_embeddings(build_node_embeddings(skb, encoder, tmp / "emb")))
    store = open_graph_store(GraphStoreConfig(), tmp / "graph")
    store.load(skb)
    executor = PlanExecutor(skb, index, encoder, store)
    q = skb.queries
    qids = q["qid"].astype(int).tolist()
    texts = q["query"].tolist()
    tables = dict(zip(qids, GazetteerExtractor(skb, index, encoder).extract(texts)))
    text = dict(zip(qids, BM25Retriever.build(skb).rank(texts)))
    gold = {int(k): [int(x) for x in v] for k, v in zip(q["qid"], q["answer_ids"])}
    queries = dict(zip(qids, texts))
    train = q[q["split"] == "train"]["qid"].astype(int).tolist()
    val = q[q["split"] == "val"]["qid"].astype(int).tolist()
    teacher = ProgrammaticTeacher(skb.schema, skb.nodes["type"].tolist(), executor)
    taught = dict(
        zip(train, teacher.teach([queries[i] for i in train], [tables[i] for i in train], [gold[i] for i in train]))
    )
    yield World(skb, executor, tables, text, queries, gold, train, val, teacher, taught)
    store.close()


@pytest.fixture(scope="session")
def planner_base(world, tmp_path_factory) -> str:
    """A tiny planner base whose tokenizer saw this SKB, the compact prompts and the teacher plans."""
    qids = world.sft_qids()
    prompts = [
        "\n".join(
            m["content"] for m in build_planner_messages(world.skb.schema, world.tables[i], world.queries[i], True)
        )
        for i in qids
    ]
    plans = [world.completion(i) for i in qids]
    out = tmp_path_factory.mktemp("base") / "planner_base"
    build_planner_base(world.skb, prompts, plans, PlannerModelConfig(tiny=TINY, vocab_size=1500), out)
    return base_model_path(out)


@pytest.fixture(scope="session")
def tokenizer(planner_base):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(planner_base)


@pytest.fixture(scope="session")
def prompt_of(world, tokenizer):
    def prompt(qid: int) -> str:
        messages = build_planner_messages(world.skb.schema, world.tables[qid], world.queries[qid], compact=True)
        return render_prompt(tokenizer, messages)

    return prompt


@pytest.fixture(scope="session")
def sft_examples(world, prompt_of) -> list[dict]:
    return [{"prompt": prompt_of(q), "completion": world.completion(q)} for q in world.sft_qids()]


@pytest.fixture(scope="session")
def sft_planner(planner_base, sft_examples, tmp_path_factory):
    """(checkpoint path, train_sft result) of the full fine-tune on the first N_SFT teacher plans."""
    out = tmp_path_factory.mktemp("sft") / "sft"
    return out, train_sft(planner_base, sft_examples[:N_SFT], SFT_FAST, out)
