"""The settings of planner training: SFT (and RFT), RL sampling, GRPO, the plan-selection policy's training
(profile sections ``sft``, ``rl``, ``grpo``, ``policy_train``; the teacher's candidates: ``planner/candidates.py``).

Kept apart from the trainers so that reading a profile (as serving does) never loads training code.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SFTSettings:
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
class RLSettings:
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
class GRPOSettings:
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
class PolicyTrainSettings:
    train_queries: int | None = field(
        default=None,
        metadata={"help": "training queries taught with every candidate executed, in the SFT order (None: all)"},
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
