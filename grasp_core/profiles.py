"""Profiles are data: the `cpu` profile (offline default, runs on 2 cores) and the `gpu` profile (the paper).

Every component keeps its own frozen config class with the paper's defaults; a profile only picks values.
The `gpu` profile is the paper's setup (Appendix B): model directories come from ``$GRASP_MODEL_DIR``
(default ``./models``), holding ``Qwen3-1.7B``, ``Qwen3-Embedding-4B`` and ``Qwen3-Reranker-0.6B``
downloaded elsewhere (nothing downloads at run time here). In every profile the LLM teacher writes the plans
when ``$GRASP_TEACHER_URL`` names an OpenAI-compatible endpoint (model ``$GRASP_TEACHER_MODEL``), else the
programmatic teacher does; the LLM extractor (``extractor="llm"``) asks ``$GRASP_EXTRACTOR_URL``.

The `cpu` profile rescales what must shrink for the whole pipeline to run end to end on 2 cores (its step times
are in ``benchmarks/results/pipeline_hpo.json``, ``steps``), and says so field by field below (``# cpu:``
comments).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grasp_core.datasets import DatasetConfig
from grasp_core.embed.config import EncoderConfig, IndexConfig
from grasp_core.entities.config import GazetteerConfig, LLMExtractorConfig
from grasp_core.environment import env
from grasp_core.errors import GraspError
from grasp_core.graph.config import GraphStoreConfig
from grasp_core.llm.config import EndpointConfig
from grasp_core.names import GRAPH_STORES, PROFILE_NAMES, TRAVERSALS
from grasp_core.plan.config import ExecutionConfig
from grasp_core.planner.config import (
    CandidateConfig,
    ChooserConfig,
    GRPOTrainingConfig,
    InferenceConfig,
    PlanGrammarConfig,
    PlannerModelConfig,
    PolicyConfig,
    PolicyTrainingConfig,
    RewardConfig,
    RLSamplingConfig,
    SFTTrainingConfig,
    TinyModelConfig,
)
from grasp_core.rerank.config import (
    AskedTypeConfig,
    CausalLMScorerConfig,
    CrossEncoderScorerConfig,
    DocumentConfig,
    FeatureConfig,
    LTRConfig,
    RerankConfig,
    RerankerCandidatesConfig,
    RerankerTrainConfig,
)
from grasp_core.retrain_config import FeedbackConfig, RetrainConfig
from grasp_core.text.config import BM25Config, MFARConfig, OutOfFoldConfig


@dataclass(frozen=True)
class EvalConfig:
    latency_queries: int = field(default=100, metadata={"help": "queries timed end to end for the latency table"})


@dataclass(frozen=True)
class Profile:
    name: str
    device: str = "cpu"
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    feedback: FeedbackConfig = field(default_factory=FeedbackConfig)  # questions confirmed in use, as training data
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    graph_store: GraphStoreConfig = field(default_factory=GraphStoreConfig)
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    extractor: str = "gazetteer"  # the entity extractor: gazetteer | llm (over extractor_endpoint)
    gazetteer: GazetteerConfig = field(default_factory=GazetteerConfig)
    llm_extractor: LLMExtractorConfig = field(default_factory=LLMExtractorConfig)
    extractor_endpoint: EndpointConfig = field(default_factory=lambda: EndpointConfig(model="Qwen3-1.7B"))
    bm25: BM25Config = field(default_factory=BM25Config)
    mfar: MFARConfig = field(default_factory=MFARConfig)
    oof: OutOfFoldConfig = field(default_factory=OutOfFoldConfig)  # out-of-fold mFAR rankings of training queries
    text_retriever: str = "mfar"  # the text branch fused with the graph branch: mfar | bm25 | dense
    teacher: CandidateConfig = field(default_factory=CandidateConfig)  # the teacher's and the policy's candidate plans
    # the LLM teacher's endpoint; with no base_url the programmatic teacher writes the plans
    teacher_endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    planner: str = "lm"  # lm: a language model writes the plan (paper) | policy: selects a candidate plan (cpu)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    policy_train: PolicyTrainingConfig = field(default_factory=PolicyTrainingConfig)
    chooser: ChooserConfig = field(default_factory=ChooserConfig)
    planner_model: PlannerModelConfig = field(default_factory=PlannerModelConfig)
    sft: SFTTrainingConfig = field(default_factory=SFTTrainingConfig)
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    rl: RLSamplingConfig = field(default_factory=RLSamplingConfig)
    grpo: GRPOTrainingConfig = field(default_factory=GRPOTrainingConfig)
    reranker_kind: str = "ltr"  # ltr (cpu: LightGBM over features) | cross-encoder | causal-lm (gpu: Qwen3-Reranker)
    ltr: LTRConfig = field(default_factory=LTRConfig)
    rerank_features: FeatureConfig = field(default_factory=FeatureConfig)
    asked_type: AskedTypeConfig = field(default_factory=AskedTypeConfig)
    cross_encoder: CrossEncoderScorerConfig = field(default_factory=CrossEncoderScorerConfig)
    causal_reranker: CausalLMScorerConfig = field(default_factory=CausalLMScorerConfig)
    reranker_docs: DocumentConfig = field(default_factory=DocumentConfig)
    reranker_train: RerankerTrainConfig = field(default_factory=RerankerTrainConfig)
    rerank: RerankConfig = field(default_factory=RerankConfig)
    reranker_candidates: RerankerCandidatesConfig = field(default_factory=RerankerCandidatesConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    retrain: RetrainConfig = field(default_factory=RetrainConfig)  # the feedback sensor and the promotion guard

    def replace(self, **changes) -> Profile:
        return dataclasses.replace(self, **changes)


def _endpoints() -> dict:
    """The LLM teacher's and the LLM extractor's endpoints, from $GRASP_TEACHER_URL / $GRASP_TEACHER_MODEL and
    $GRASP_EXTRACTOR_URL / $GRASP_EXTRACTOR_MODEL (API keys from $OPENAI_API_KEY)."""
    return {
        "teacher_endpoint": EndpointConfig(env("GRASP_TEACHER_URL"), env("GRASP_TEACHER_MODEL", "Qwen3.6-27B")),
        "extractor_endpoint": EndpointConfig(env("GRASP_EXTRACTOR_URL"), env("GRASP_EXTRACTOR_MODEL", "Qwen3-1.7B")),
    }


def _cpu() -> Profile:
    return Profile(
        name="cpu",
        **_endpoints(),
        dataset=DatasetConfig(scale="small", n_queries=3000),
        # cpu: MiniLM's own limit is 256 tokens (paper: 512); bfloat16 where the CPU computes it natively (faster:
        # benchmarks/results/embedding_throughput.json)
        encoder=EncoderConfig(doc_max_tokens=256, dtype="auto"),
        teacher=CandidateConfig(max_candidates=16),  # cpu: fewer executed candidates per query
        # cpu: a ~1.4M-parameter model (besides embeddings) so that SFT on 500 plans fits minutes on 2 cores
        planner_model=PlannerModelConfig(
            tiny=TinyModelConfig(hidden_size=128, num_layers=3, num_heads=4, num_kv_heads=2, intermediate_size=384)
        ),
        # cpu: the sft, inference and planner_model values serve the tiny LM planner (planner="lm", tests)
        sft=SFTTrainingConfig(
            learning_rate=1e-3,  # cpu: from-scratch training (paper: 1e-4 for LoRA on a pretrained base)
            # cpu: a from-scratch model needs many more optimizer steps (paper: 3 epochs). On hpo's validation (SFT
            # alone, fused Hit@1), few large batches let the planner collapse onto one metapath, below the text branch
            # alone, and of the settings tried batch 16 x 10 epochs scored best. So: batch 16 x 10 epochs (~320 steps,
            # as many tokens as batch 32)
            epochs=10.0,
            use_lora=False,  # cpu: from scratch, so all weights train (docs/design.md)
            per_device_batch=16,
            effective_batch=16,
            max_length=1024,  # cpu: the tiny model's whole context (prompts are compact)
        ),
        # cpu: the tiny model decides the plan's structure and refs only: no free-text anchors and no relevance
        # text (the executor derives it from the query, as the teacher writes it). max_new_tokens stays at the
        # paper's 700: a plan cut there counts as invalid; the longest plan this grammar allows on synth-prime is
        # ~900 bytes (PlanGrammar.max_bytes), far fewer tokens with the schema names as single tokens
        inference=InferenceConfig(
            compact_prompt=True, grammar=PlanGrammarConfig(text_anchors=False, max_relevance_chars=0)
        ),
        # cpu: the planner is the plan-selection policy on the frozen MiniLM (docs/design.md, "The cpu planner"); the
        # tiny from-scratch LM stays for tests of the LM path. Measured on hpo: docs/planner.md
        planner="policy",
        # cpu: the policy's RFT continues from the round's start for 10 epochs at a third of the SFT's learning rate
        # (paper: retrain from the base for the SFT's epochs); every training query takes part (paper: all)
        rl=RLSamplingConfig(rft_from_base=False, rft_epochs=10.0, rft_learning_rate=1e-3),
        grpo=GRPOTrainingConfig(
            use_lora=False,  # cpu: the policy's head is small: all of it trains
            learning_rate=1e-3,  # cpu: Adam on a linear head (paper: 2e-5 for LoRA on an LLM)
            max_steps=150,  # cpu: (paper: ≤ 200)
            save_every=25,  # cpu: (paper: 50)
        ),
        # cpu: 128-token reranker inputs (paper: 2048): a cross-encoder pass's cost grows with its input length
        cross_encoder=CrossEncoderScorerConfig(max_length=128),
        reranker_docs=DocumentConfig(max_input_tokens=128),
        # cpu: G=8, 1 epoch, validated once, at the end (paper: G=24, 3 epochs, every half epoch, and the base model).
        # The cross-encoder's scoring head is new, so the base model is not a candidate; each validation
        # (100 queries x K=50) is the reranker step's largest cost
        reranker_train=RerankerTrainConfig(group_size=8, epochs=1, checkpoint_every_epochs=1.0, validate_base=False),
    )


def _gpu() -> Profile:
    models = Path(env("GRASP_MODEL_DIR", "models"))
    return Profile(
        name="gpu",
        device="cuda",
        **_endpoints(),
        dataset=DatasetConfig(scale="full", n_queries=10000),
        encoder=EncoderConfig(
            model_path=str(models / "Qwen3-Embedding-4B"),
            pooling="last_token",
            batch_size=32,
            device="cuda",
            dtype="auto",
        ),
        mfar=MFARConfig(dense_fields=None),
        planner_model=PlannerModelConfig(model_path=str(models / "Qwen3-1.7B")),
        reranker_kind="causal-lm",
        causal_reranker=CausalLMScorerConfig(model_path=str(models / "Qwen3-Reranker-0.6B")),
    )


def _smoke() -> Profile:
    """The cpu profile cut to the bone: every step runs, on a handful of queries (end-to-end tests, smoke runs)."""
    cpu = _cpu()
    return cpu.replace(
        name="smoke",
        dataset=DatasetConfig(scale="tiny", n_queries=120, term_queries=40, intent_queries=40),
        planner_model=PlannerModelConfig(
            tiny=TinyModelConfig(hidden_size=64, num_layers=2, intermediate_size=128),
            vocab_size=1024,
            tokenizer_node_texts=2000,
        ),
        teacher=CandidateConfig(max_candidates=12, pair_anchors=2),
        sft=dataclasses.replace(
            cpu.sft, n_examples=24, epochs=1.0, per_device_batch=8, effective_batch=8, max_length=768
        ),
        inference=dataclasses.replace(cpu.inference, max_new_tokens=320),
        rl=dataclasses.replace(cpu.rl, samples_per_query=4, max_queries=8, rft_epochs=1.0),
        grpo=dataclasses.replace(
            cpu.grpo,
            num_generations=4,
            prompts_per_step=2,
            max_steps=1,
            save_every=1,
            max_completion_length=320,
            val_queries=8,
        ),
        reranker_train=dataclasses.replace(cpu.reranker_train, group_size=4, epochs=1, queries_per_batch=4),
        ltr=dataclasses.replace(cpu.ltr, max_rounds=50, early_stopping_rounds=10, min_data_in_leaf=5),
        rerank=dataclasses.replace(cpu.rerank, top_k=10, grid_w=(1.0, math.inf), grid_k=(60.0,)),
        eval=EvalConfig(latency_queries=3),
        retrain=RetrainConfig(retrain_after=20, guard_queries=50),  # smoke: a stream of tens of questions retrains
    )


def _gpu_smoke() -> Profile:
    """The `gpu` profile's code paths at test sizes, on the CPU: the LM planner (LoRA SFT and GRPO through TRL, the
    plan grammar with free text, the full prompts), the causal-LM reranker with LoRA, last-token pooling in the
    encoder. Its models come from ``$GRASP_MODEL_DIR`` under the gpu profile's names; the end-to-end test builds tiny
    ones from config there (``tests/tiny_models.py``). Every budget is cut to a handful (``# gpu-smoke:``): the test
    runs each step once, it measures nothing."""
    gpu, smoke = _gpu(), _smoke()
    return gpu.replace(
        name="gpu-smoke",
        device="cpu",
        # gpu-smoke: 60 queries and 12 term look-ups (smoke: 120 and 300): every validation and test pass decodes
        # under a per-query grammar, so the splits' sizes are most of the run's time
        dataset=dataclasses.replace(smoke.dataset, n_queries=60, term_queries=12, intent_queries=0),
        encoder=dataclasses.replace(gpu.encoder, device="cpu", dtype="float32", batch_size=16),
        mfar=dataclasses.replace(gpu.mfar, epochs=2),  # gpu-smoke: (gpu: ≤ 20, early stopping)
        teacher=smoke.teacher,
        # gpu-smoke: one optimizer step on 8 teacher plans (the full prompts are ~1.1k tokens of the stand-in's BPE)
        sft=dataclasses.replace(
            smoke.sft,
            n_examples=8,
            use_lora=True,
            lora_r=8,
            lora_alpha=16,
            learning_rate=1e-3,
            max_length=gpu.sft.max_length,
        ),
        # gpu-smoke: at most 2 anchors of 2 hops, 16-character free text (gpu: 3, 3, 100 and 200 characters): the
        # grammar is rebuilt per query, and a random model writes free text to its limit
        inference=dataclasses.replace(
            gpu.inference,
            max_new_tokens=192,
            grammar=dataclasses.replace(
                gpu.inference.grammar, max_anchors=2, max_hops=2, max_text_chars=16, max_relevance_chars=16
            ),
        ),
        rl=dataclasses.replace(
            smoke.rl, samples_per_query=2, max_queries=4, rft_from_base=True, rft_epochs=1.0, rft_learning_rate=None
        ),
        grpo=dataclasses.replace(
            smoke.grpo,
            use_lora=True,
            lora_r=4,
            lora_alpha=8,
            learning_rate=1e-4,
            num_generations=2,
            max_completion_length=192,
            val_queries=4,
        ),
        causal_reranker=dataclasses.replace(
            gpu.causal_reranker, device="cpu", dtype="float32", max_length=128, batch_size=8, lora_r=4, lora_alpha=8
        ),
        reranker_docs=smoke.reranker_docs,
        reranker_train=smoke.reranker_train,
        rerank=smoke.rerank,
        eval=EvalConfig(latency_queries=2),
    )


def with_graph_store(profile: Profile, backend: str = "", traversal: str = "") -> Profile:
    """``profile`` on another graph store backend (``ladybug`` | ``neo4j``) and/or plan traversal (``arrays`` |
    ``store``); an empty value keeps the profile's. ``neo4j`` reads its server from NEO4J_URI / NEO4J_USER /
    NEO4J_PASSWORD (:meth:`GraphStoreConfig.neo4j_auth`)."""
    if backend and backend not in GRAPH_STORES:
        raise GraspError(f"unknown graph store {backend!r}: choose one of {GRAPH_STORES}")
    if traversal and traversal not in TRAVERSALS:
        raise GraspError(f"unknown traversal {traversal!r}: choose one of {TRAVERSALS}")
    changes: dict[str, Any] = {}
    if backend:
        changes["graph_store"] = dataclasses.replace(profile.graph_store, backend=backend)  # type: ignore[arg-type]
    if traversal:
        changes["execution"] = dataclasses.replace(profile.execution, traversal=traversal)  # type: ignore[arg-type]
    return profile.replace(**changes) if changes else profile


def get_profile(name: str) -> Profile:
    if name == "cpu":
        return _cpu()
    if name == "gpu":
        return _gpu()
    if name == "smoke":
        return _smoke()
    if name == "gpu-smoke":
        return _gpu_smoke()
    raise GraspError(f"unknown profile {name!r}: choose one of {PROFILE_NAMES}")
