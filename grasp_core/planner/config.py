"""Every setting of the planner, one dataclass per profile section: the model (``planner_model``), how plans are
decoded (``inference``, with the plan grammar's limits), the candidate plans of the teacher and the policy (``teacher``), the reward
(``reward``), the policy and its chooser (``policy``, ``chooser``), and training (``sft``, ``rl``, ``grpo``,
``policy_train``).

Kept apart from the code that uses them, so that reading a profile (as serving does) imports no torch,
transformers, llguidance or training code.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SFTTrainingConfig:
    n_examples: int = field(default=500, metadata={"help": "teacher plans used for the warm start (paper: N=500)"})
    max_answers: int = field(default=20, metadata={"help": "queries with more gold answers are not used"})
    epochs: float = field(default=3.0, metadata={"help": "training epochs"})
    learning_rate: float = field(default=1e-4, metadata={"help": "peak learning rate (cosine decay)"})
    warmup_ratio: float = field(default=0.03, metadata={"help": "share of steps used for warmup"})
    effective_batch: int = field(default=32, metadata={"help": "examples per optimizer step"})
    per_device_batch: int = field(
        default=8, metadata={"help": "examples per forward pass (gradient accumulation fills the rest)"}
    )
    use_lora: bool = field(
        default=True,
        metadata={"help": "LoRA on a pretrained base; False trains all weights (from-scratch cpu planner)"},
    )
    lora_r: int = field(default=64, metadata={"help": "LoRA rank"})
    lora_alpha: int = field(default=128, metadata={"help": "LoRA alpha"})
    max_length: int = field(default=2048, metadata={"help": "longest prompt + plan in tokens"})
    seed: int = field(default=0, metadata={"help": "data order and initialization seed"})


@dataclass(frozen=True)
class RLSamplingConfig:
    samples_per_query: int = field(default=8, metadata={"help": "plans sampled per training query"})
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature of RL exploration"})
    max_answers: int = field(
        default=20, metadata={"help": "training queries with more gold answers are excluded from RL"}
    )
    max_queries: int | None = field(default=None, metadata={"help": "cap on training queries per round (None: all)"})
    rft_from_base: bool = field(
        default=True,
        metadata={
            "help": "RFT retrains from the base model (paper); False continues from the planner the round starts from"
        },
    )
    rft_epochs: float | None = field(default=None, metadata={"help": "RFT epochs (None: the SFT epochs)"})
    rft_learning_rate: float | None = field(default=None, metadata={"help": "RFT learning rate (None: the SFT's)"})
    seed: int = field(default=0, metadata={"help": "query subset and sampling seed"})


@dataclass(frozen=True)
class GRPOTrainingConfig:
    use_lora: bool = field(
        default=True, metadata={"help": "new LoRA adapters on the merged RFT model (False: all weights)"}
    )
    lora_r: int = field(default=32, metadata={"help": "LoRA rank"})
    lora_alpha: int = field(default=64, metadata={"help": "LoRA alpha"})
    num_generations: int = field(default=8, metadata={"help": "completions per prompt (the group)"})
    prompts_per_step: int = field(default=16, metadata={"help": "prompts per optimizer step"})
    learning_rate: float = field(default=2e-5, metadata={"help": "learning rate"})
    beta: float = field(default=0.01, metadata={"help": "KL coefficient"})
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature"})
    max_completion_length: int = field(default=512, metadata={"help": "longest completion"})
    max_steps: int = field(default=200, metadata={"help": "optimizer steps at most"})
    save_every: int = field(default=50, metadata={"help": "evaluate (and keep if best) every this many steps"})
    resample_flat: int = field(
        default=3, metadata={"help": "resample a batch whose groups all have equal rewards, up to this many times"}
    )
    val_queries: int | None = field(
        default=None, metadata={"help": "validation queries used to pick the checkpoint (None: all)"}
    )
    seed: int = field(default=0, metadata={"help": "seed"})


@dataclass(frozen=True)
class PolicyTrainingConfig:
    train_queries: int | None = field(
        default=None,
        metadata={"help": "training queries taught with every candidate executed, in the SFT order (None: all)"},
    )
    sft_queries: int | None = field(
        default=500,
        metadata={
            "help": "taught queries SFT (and each round's RFT) imitates, the first in the SFT order; RL samples all "
            "taught queries (None: all; the paper imitates at most 500 and varies it in its Table A5)"
        },
    )
    epochs: int = field(default=30, metadata={"help": "SFT epochs over the training queries"})
    learning_rate: float = field(default=3e-3, metadata={"help": "Adam learning rate of SFT and RFT"})
    weight_decay: float = field(default=1e-4, metadata={"help": "Adam weight decay"})
    batch_size: int = field(default=64, metadata={"help": "queries per optimizer step"})
    soft_weight: float = field(
        default=0.5, metadata={"help": "share of the listwise reward target in the SFT target (0: teacher only)"}
    )
    soft_temperature: float = field(default=0.25, metadata={"help": "temperature of the listwise reward target"})
    validate_every: int = field(default=5, metadata={"help": "SFT epochs between validation checkpoints"})
    seed: int = field(default=0, metadata={"help": "initialization, data order and sampling seed"})


@dataclass(frozen=True)
class TinyModelConfig:
    hidden_size: int = field(default=256, metadata={"help": "Width of the residual stream."})
    num_layers: int = field(default=4, metadata={"help": "Transformer blocks."})
    num_heads: int = field(default=4, metadata={"help": "Query heads (head dim = hidden_size / num_heads)."})
    num_kv_heads: int = field(default=2, metadata={"help": "Key/value heads (grouped-query attention)."})
    intermediate_size: int = field(default=512, metadata={"help": "Width of the SwiGLU MLP."})
    max_positions: int = field(default=1024, metadata={"help": "Longest prompt + plan, in tokens."})
    rope_theta: float = field(default=10_000.0, metadata={"help": "RoPE base frequency."})
    seed: int = field(default=0, metadata={"help": "Seed of the random initialization."})


@dataclass(frozen=True)
class PlannerModelConfig:
    model_path: str | None = field(
        default=None,
        metadata={"help": "local directory of a pretrained base (gpu: Qwen3-1.7B); None builds the tiny offline model"},
    )
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig, metadata={"help": "shape of the offline model"})
    vocab_size: int = field(default=4096, metadata={"help": "BPE vocabulary of the offline tokenizer"})
    tokenizer_node_texts: int = field(
        default=20_000, metadata={"help": "node documents sampled to train the tokenizer"}
    )
    enable_thinking: bool = field(default=False, metadata={"help": "Qwen3 thinking mode (the paper disables it)"})


@dataclass(frozen=True)
class PlanGrammarConfig:
    max_anchors: int = field(
        default=4, metadata={"help": "Most anchors in one plan (the cpu candidates intersect up to 4 findings)."}
    )
    max_hops: int = field(default=3, metadata={"help": "Most hops on one anchor's path to the target."})
    text_anchors: bool = field(
        default=True, metadata={"help": "Allow free-text doc-mode anchors besides refs to entity-table rows."}
    )
    max_text_chars: int = field(default=100, metadata={"help": "Longest free-text anchor, in characters."})
    max_relevance_chars: int = field(default=200, metadata={"help": "Longest relevance_text, in characters."})


@dataclass(frozen=True)
class InferenceConfig:
    max_new_tokens: int = field(default=700, metadata={"help": "longest plan generated"})
    retries: int = field(default=2, metadata={"help": "extra samples when a plan fails"})
    retry_temperature: float = field(default=0.7, metadata={"help": "temperature of the retries"})
    constrained: bool = field(default=True, metadata={"help": "constrain decoding to the plan grammar (local models)"})
    compact_prompt: bool = field(
        default=False, metadata={"help": "terse schema listing in the system prompt (short-context models)"}
    )
    grammar: PlanGrammarConfig = field(
        default_factory=PlanGrammarConfig,
        metadata={"help": "what constrained decoding allows; training targets follow it"},
    )


HEADS = ("features", "linear", "mlp")
# the plan features of every candidate (:class:`~grasp_core.planner.policy.model.Featurizer`), in column order
FEATURES = (
    "abstain",
    "zero_hop",
    "term_lookup",
    "hops",
    "two_anchors",
    "doc_mode",
    "link_cosine",
    "log_degree",
    "role_anchor",
    "role_target",
    "row_best_type",
    "mention_share",
    "verbal_cosine",
    "path_known",
    "match_most",
)


@dataclass(frozen=True)
class PolicyConfig:
    head: str = field(default="mlp", metadata={"help": f"scoring head on frozen encoder features: {HEADS}"})
    hidden: int = field(default=64, metadata={"help": "hidden units of the mlp head"})
    max_query_tokens: int = field(default=64, metadata={"help": "truncation of the query for the encoder"})


@dataclass(frozen=True)
class ChooserConfig:
    enabled: bool = field(
        default=True, metadata={"help": "train a chooser over executed candidates in the RL rounds (False: greedy)"}
    )
    shortlist: tuple[int, ...] = field(
        default=(1, 3, 5, 8),
        metadata={"help": "policy candidates executed per question, tried on validation (ABSTAIN is always added)"},
    )
    graph_weights: tuple[float, ...] = field(
        default=(0.5, 1.0, 2.0),
        metadata={
            "help": "RRF weights of the graph ranking the chooser picks among with each candidate (the text "
            "ranking keeps reward.w_text); (1.0,): every question fused at the fixed weights"
        },
    )
    n_estimators: int = field(default=300, metadata={"help": "LightGBM boosting rounds"})
    num_leaves: int = field(default=7, metadata={"help": "LightGBM leaves per tree"})
    learning_rate: float = field(default=0.05, metadata={"help": "LightGBM learning rate"})
    min_child_samples: int = field(default=20, metadata={"help": "LightGBM: fewest candidates in a leaf"})
    seed: int = field(default=0, metadata={"help": "LightGBM seed (training runs on one thread, deterministic)"})


@dataclass(frozen=True)
class CandidateConfig:
    max_hops: int = field(default=3, metadata={"help": "longest metapath enumerated"})
    paths_per_anchor: int = field(default=6, metadata={"help": "metapaths tried per (entity row, node type)"})
    max_candidates: int = field(default=40, metadata={"help": "single-anchor plans kept per target type"})
    max_directed: int = field(
        default=0,
        metadata={
            "help": "directed variants of paths with a hop within one type ('parents of X', 'kinds of X') kept per "
            "target type, besides max_candidates; 0 (default) offers none: at 8 the hpo planner chose them for 4 "
            "of 600 test questions and scored lower on validation (docs/planner.md)"
        },
    )
    pair_anchors: int = field(
        default=4, metadata={"help": "rows whose one-hop plans are combined into intersections (pairs and larger)"}
    )
    max_intersection: int = field(
        default=4, metadata={"help": "most one-hop plans one intersection joins ('several findings: which disease?')"}
    )
    min_link_score: float = field(
        default=0.5, metadata={"help": "entity-table links below this cosine are not used as anchors"}
    )
    partial: bool = field(
        default=True,
        metadata={"help": "offer partial matches ('match': 'most') of the findings over each relation as candidates"},
    )


@dataclass(frozen=True)
class RewardConfig:
    invalid_penalty: float = field(default=-0.1, metadata={"help": "reward of an invalid or unparseable plan"})
    shrink_n: int = field(
        default=50, metadata={"help": "cells with fewer validation queries are shrunk toward their row"}
    )
    rrf_k: float = field(default=60.0, metadata={"help": "RRF k of the fusion, fixed during RL"})
    w_text: float = field(default=1.0, metadata={"help": "RRF weight of the text ranking"})
    w_graph: float = field(default=1.0, metadata={"help": "RRF weight of the graph ranking"})
