"""Supervised fine-tuning of the planner on teacher plans (paper §3.2, Appendix B), with TRL's SFTTrainer.

Data: the first ``n_examples`` training queries, in a fixed shuffled order, whose teacher plan is valid,
ranks a gold answer first, and whose query has at most ``max_answers`` gold answers. Each example is the
rendered planner prompt (system prompt + entity table + query) and the canonical plan JSON as completion;
the loss is on the completion only. The same trainer serves RFT (base + SFT data + best RL samples).

A pretrained base (the ``gpu`` profile's Qwen3-1.7B) is trained with LoRA (r=64, α=128, all linear layers);
the ``cpu`` planner is trained from scratch, so it updates all weights (``use_lora=False``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from grasp_core.io import atomic_dir
from grasp_core.planner.config import SFTTrainingConfig
from grasp_core.planner.lm.checkpoint import is_full_model, load_planner, save_planner

LogFn = Callable[[int, dict], None]


def trainer_args(seed: int, device: str) -> dict:
    """What every TRL trainer of the planner is given: log every step, save nothing (checkpoints are ours), no
    reporting, the seed, float32 on CPU (``use_cpu`` where there is no GPU), data loaded in-process."""
    return {
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "seed": seed,
        "use_cpu": device == "cpu",
        "bf16": False,
        "dataloader_num_workers": 0,
    }


def shuffled_train_order(qids: np.ndarray, seed: int) -> np.ndarray:
    """The fixed shuffled order of the training queries (the paper's 'first N in a fixed random order')."""
    return np.random.default_rng(seed).permutation(np.sort(np.asarray(qids)))


def select_sft_examples(teacher: pd.DataFrame, train_qids: np.ndarray, cfg: SFTTrainingConfig) -> pd.DataFrame:
    """Rows of ``teacher`` (qid, plan, gold_rank, n_answers, …) usable for SFT, in the fixed order, at most N."""
    by_qid = teacher.set_index("qid")
    keep = []
    for qid in shuffled_train_order(train_qids, cfg.seed):
        if qid not in by_qid.index:
            continue
        row = by_qid.loc[qid]
        if row["plan"] is not None and row["gold_rank"] == 1 and row["n_answers"] <= cfg.max_answers:
            keep.append(qid)
            if len(keep) == cfg.n_examples:
                break
    return by_qid.loc[keep].reset_index()


class _LogCallback:
    """Forwards the trainer's logs (loss, lr, …) to ``log_fn`` (MLflow in the pipeline)."""

    def __new__(cls, log_fn: LogFn):
        from transformers import TrainerCallback

        class _Callback(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs:
                    log_fn(state.global_step, {k: v for k, v in logs.items() if isinstance(v, (int, float))})

        return _Callback()


def train_sft(
    model_path: str | Path,
    examples: list[dict],
    cfg: SFTTrainingConfig,
    out_dir: str | Path,
    log_fn: LogFn | None = None,
    device: str = "cpu",
) -> dict:
    """Train on ``examples`` ({"prompt", "completion"} strings) from the planner at ``model_path``.

    Writes the trained planner to ``out_dir`` atomically and returns the loss history.
    """
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    model, tokenizer = load_planner(model_path, device=device)
    base_path = str(model_path)
    peft_config = None
    if cfg.use_lora:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=cfg.lora_r, lora_alpha=cfg.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM"
        )
    history: list[dict] = []

    def record(step: int, logs: dict) -> None:
        history.append({"step": step, **logs})
        if log_fn:
            log_fn(step, logs)

    accumulation = max(1, cfg.effective_batch // cfg.per_device_batch)
    with atomic_dir(out_dir) as tmp:
        args = SFTConfig(
            output_dir=str(Path(tmp) / "trainer"),
            num_train_epochs=cfg.epochs,
            learning_rate=cfg.learning_rate,
            lr_scheduler_type="cosine",
            warmup_steps=cfg.warmup_ratio,  # transformers 5: a value < 1 is a share of the steps (no warmup_ratio)
            per_device_train_batch_size=cfg.per_device_batch,
            gradient_accumulation_steps=accumulation,
            max_length=cfg.max_length,
            completion_only_loss=True,
            **trainer_args(cfg.seed, device),
            disable_tqdm=False,
        )
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=Dataset.from_list(examples),
            processing_class=tokenizer,
            peft_config=peft_config,
            callbacks=[_LogCallback(record)],
        )
        trainer.train()
        trained = trainer.model
        if cfg.use_lora and not is_full_model(base_path):
            trained = trained.merge_and_unload()  # an adapter must sit on a full model: merge over a LoRA base
        save_planner(trained, tokenizer, Path(tmp), base=base_path, extra={"trained_on": len(examples)})
        import shutil

        shutil.rmtree(Path(tmp) / "trainer", ignore_errors=True)
    return {"history": history, "examples": len(examples)}
