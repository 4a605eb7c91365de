"""One RL round of the planner (paper §3.2, Appendix B): sample → RFT → GRPO → keep the best checkpoint.

1. **Sample** 8 plans per training query at T=1.0 from the round's starting planner (the SFT planner in
   round 1, the previous round's kept planner after) and score each with the fused-gain reward.
   Queries with more than 20 gold answers are excluded from RL.
2. **RFT** retrains *from the base model* on the SFT data plus, for every query, its highest-reward sample
   when that reward is positive (ties: fewer anchors, then fewer candidates); see :func:`rft_examples`.
3. **GRPO** continues from the (merged) RFT model on the training queries whose sampled rewards were not
   all equal, with TRL's GRPOTrainer and the reward function executing plans: new LoRA adapters (r=32,
   α=64) on a pretrained base, 8 completions per prompt, 16 prompts per step, lr 2e-5, KL 0.01, rewards
   not scaled by the group std, ≤ 512 completion tokens, ≤ 200 steps, a checkpoint every 50 steps.
   Rollouts are decoded under each prompt's plan grammar (as RL sampling and inference are), by overriding
   the trainer's generation step. A batch whose groups all have equal rewards (no learning signal) is
   sampled again, up to 3 times (TRL has no per-group resampling; we resample the batch when *every*
   group is flat, and the all-equal queries of step 1 are left out up front, as the paper does). A query
   list shorter than one step's prompts is repeated.
4. The checkpoint (the RFT model at step 0 included) with the best validation fused Hit@1 is kept.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from grasp_core.errors import GraspError
from grasp_core.io import atomic_dir, write_json
from grasp_core.planner.checkpoint import load_planner, save_planner
from grasp_core.planner.grammar import PlanGrammar, PlanGrammarConfig
from grasp_core.planner.scoring import PlannerEnv, PlanRewarder
from grasp_core.planner.sft import LogFn
from grasp_core.planner.train_settings import GRPOSettings, RLSettings


def rl_queries(train: pd.DataFrame, cfg: RLSettings) -> list[int]:
    """Training query ids used in RL: ≤ max_answers gold answers, optionally a seeded subset."""
    keep = train[train["answer_ids"].map(len) <= cfg.max_answers]["qid"].astype(int).tolist()
    if cfg.max_queries is not None and len(keep) > cfg.max_queries:
        import numpy as np

        keep = sorted(np.random.default_rng(cfg.seed).choice(keep, cfg.max_queries, replace=False).tolist())
    return keep


def sample_and_score(llm, env: PlannerEnv, qids: Sequence[int], cfg: RLSettings, inference_cfg) -> pd.DataFrame:
    """One row per sampled plan: qid, sample, plan, reward, valid, n_anchors, n_candidates, fused_gold_rank."""
    from grasp_core.planner.inference import sample_plans

    qids = list(qids)
    plans = sample_plans(
        llm,
        env.schema,
        [env.queries[q] for q in qids],
        [env.tables[q] for q in qids],
        n=cfg.samples_per_query,
        temperature=cfg.temperature,
        cfg=inference_cfg,
    )
    flat_q = [q for q, ps in zip(qids, plans) for _ in ps]
    flat_p = [p for ps in plans for p in ps]
    scores = PlanRewarder(env).score(flat_q, flat_p)
    return pd.DataFrame(
        {
            "qid": flat_q,
            "sample": [i for ps in plans for i in range(len(ps))],
            "plan": flat_p,
            "reward": [s.reward for s in scores],
            "valid": [s.valid for s in scores],
            "n_anchors": [s.n_anchors for s in scores],
            "n_candidates": [s.n_candidates for s in scores],
            "fused_gold_rank": [s.gold_rank for s in scores],
        }
    )


def best_positive_samples(samples: pd.DataFrame) -> pd.DataFrame:
    """Each query's highest-reward sample when positive; ties: fewer anchors, then fewer candidates."""
    pos = samples[samples["reward"] > 0]
    ordered = pos.sort_values(
        ["qid", "reward", "n_anchors", "n_candidates", "sample"], ascending=[True, False, True, True, True]
    )
    return ordered.groupby("qid", as_index=False).head(1).reset_index(drop=True)


def informative_queries(samples: pd.DataFrame) -> list[int]:
    """Queries whose sampled rewards are not all equal (the only ones GRPO can learn from)."""
    spread = samples.groupby("qid")["reward"].agg(lambda r: r.max() - r.min())
    return spread[spread > 1e-9].index.astype(int).tolist()


def rft_examples(sft_examples: list[dict], best: pd.DataFrame, prompt_of: Callable[[int], str]) -> list[dict]:
    """The SFT data plus each query's best positive sample (prompt/completion pairs)."""
    return list(sft_examples) + [{"prompt": prompt_of(int(r.qid)), "completion": r.plan} for r in best.itertuples()]


def _grpo_trainer_class():
    """TRL's GRPOTrainer with grammar-constrained rollouts and resampling of all-flat batches (built lazily: TRL is heavy)."""
    import torch
    from trl import GRPOTrainer

    class PlanGRPOTrainer(GRPOTrainer):
        """Rollouts are decoded under each prompt's plan grammar, as planner inference and RL sampling are.

        ``grammars`` maps a prompt's token ids (as TRL tokenizes it) to its :class:`PlanGrammar`. The policy
        gradient is taken on the model's unconstrained log-probabilities of the sampled tokens (TRL recomputes
        them), which pushes probability onto the grammar-valid tokens that earned a reward.
        """

        def __init__(self, *args, grammars: dict, resample_flat: int, **kwargs):
            super().__init__(*args, **kwargs)
            self._grammars, self._resample_flat = grammars, resample_flat

        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
            from transformers.generation import LogitsProcessorList

            missing = [i for i, ids in enumerate(prompt_ids) if tuple(ids) not in self._grammars]
            if missing:
                raise GraspError(
                    f"GRPO: {len(missing)} prompts have no plan grammar (prompt text changed after tokenization?)"
                )
            tok = self.processing_class
            longest = max(len(ids) for ids in prompt_ids)
            input_ids = torch.full((len(prompt_ids), longest), tok.pad_token_id, dtype=torch.long)
            attention = torch.zeros_like(input_ids)
            for r, ids in enumerate(prompt_ids):  # left padding
                input_ids[r, longest - len(ids) :] = torch.tensor(ids)
                attention[r, longest - len(ids) :] = 1
            limit = getattr(self.model.config, "max_position_embeddings", None) or longest + self.max_completion_length
            budget = min(self.max_completion_length, limit - longest)
            if budget <= 0:
                raise GraspError(f"GRPO: a {longest}-token prompt leaves no room in the model's {limit}-token context")
            grammars = [self._grammars[tuple(ids)] for ids in prompt_ids]
            processor = PlanGrammar.logits_processor(grammars, tok, list(self.eos_token_ids), longest, budget, 1)
            device = self.accelerator.device
            with torch.no_grad():
                out = self.accelerator.unwrap_model(self.model).generate(
                    input_ids=input_ids.to(device),
                    attention_mask=attention.to(device),
                    generation_config=self.generation_config,
                    max_new_tokens=budget,
                    logits_processor=LogitsProcessorList([processor]),
                )
            completions = []
            for row in out[:, longest:].tolist():  # cut after the first EOS (kept), drop the padding after it
                ends = [i for i, t in enumerate(row) if t in self.eos_token_ids]
                completions.append(row[: ends[0] + 1] if ends else row)
            return completions, None

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            for _ in range(self._resample_flat):
                if out["advantages"].abs().sum().item() > 0:
                    break
                out = super()._generate_and_score_completions(inputs)
            return out

    return PlanGRPOTrainer


def train_grpo(
    model_path: str | Path,
    env: PlannerEnv,
    train_qids: Sequence[int],
    prompt_of: Callable[[int], str],
    evaluate_val: Callable[[object, object], float],
    cfg: GRPOSettings,
    out_dir: str | Path,
    log_fn: LogFn | None = None,
    device: str = "cpu",
    grammar: PlanGrammarConfig = PlanGrammarConfig(),
) -> dict:
    """GRPO from the planner at ``model_path``; writes the best checkpoint (by ``evaluate_val``) to ``out_dir``.

    ``evaluate_val(model, tokenizer) -> validation fused Hit@1`` is called at step 0 and every
    ``cfg.save_every`` steps (and at the end); the best model is saved merged (a full planner checkpoint).
    """
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig

    model, tokenizer = load_planner(model_path, device=device)
    tokenizer.padding_side = "left"
    rewarder = PlanRewarder(env)
    if not train_qids:
        raise GraspError("GRPO needs at least one training query")
    # a step takes prompts_per_step prompts: repeat a shorter query list (else TRL would run no step at all)
    qids = [int(train_qids[i % len(train_qids)]) for i in range(max(len(train_qids), cfg.prompts_per_step))]
    dataset = Dataset.from_list([{"prompt": prompt_of(q), "qid": q} for q in qids])
    peft_config = None
    if cfg.use_lora:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=cfg.lora_r, lora_alpha=cfg.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM"
        )
    history: list[dict] = []
    selection: list[dict] = []

    with atomic_dir(out_dir) as tmp:
        work = Path(tmp) / "work"
        best = {"hit1": evaluate_val(model, tokenizer), "step": 0}
        selection.append({"step": 0, "val_fused_hit1": best["hit1"]})
        save_planner(model, tokenizer, Path(tmp) / "best")

        class _Select(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs:
                    row = {k: v for k, v in logs.items() if isinstance(v, (int, float))}
                    history.append({"step": state.global_step, **row})
                    if log_fn:
                        log_fn(state.global_step, row)

            def on_step_end(self, args, state, control, model=None, **kwargs):
                if state.global_step % cfg.save_every and state.global_step != state.max_steps:
                    return
                hit1 = evaluate_val(model, tokenizer)
                selection.append({"step": state.global_step, "val_fused_hit1": hit1})
                if log_fn:
                    log_fn(state.global_step, {"val_fused_hit1": hit1})
                if hit1 > best["hit1"]:
                    best.update(hit1=hit1, step=state.global_step)
                    shutil.rmtree(Path(tmp) / "best", ignore_errors=True)
                    _save_merged(model, tokenizer, Path(tmp) / "best")
                model.train()

        batch = cfg.prompts_per_step * cfg.num_generations
        args = GRPOConfig(
            output_dir=str(work),
            learning_rate=cfg.learning_rate,
            beta=cfg.beta,
            num_generations=cfg.num_generations,
            per_device_train_batch_size=batch,
            generation_batch_size=batch,
            gradient_accumulation_steps=1,
            temperature=cfg.temperature,
            top_k=0,
            top_p=1.0,
            max_completion_length=cfg.max_completion_length,
            max_steps=cfg.max_steps,
            scale_rewards="none",
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            seed=cfg.seed,
            use_cpu=device == "cpu",
            bf16=False,
            dataloader_num_workers=0,
        )
        grammars = {
            tuple(tokenizer(text=prompt_of(q))["input_ids"]): PlanGrammar(env.schema, env.tables[q], grammar)
            for q in set(qids)
        }
        trainer = _grpo_trainer_class()(
            model=model,
            reward_funcs=[rewarder.reward_function()],
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=peft_config,
            callbacks=[_Select()],
            grammars=grammars,
            resample_flat=cfg.resample_flat,
        )
        trainer.train()
        shutil.rmtree(work, ignore_errors=True)
        for item in (Path(tmp) / "best").iterdir():
            shutil.move(str(item), Path(tmp) / item.name)
        (Path(tmp) / "best").rmdir()
        write_json(Path(tmp) / "selection.json", {"best_step": best["step"], "checkpoints": selection})
    return {"history": history, "selection": selection, "best_step": best["step"], "best_val_fused_hit1": best["hit1"]}


def _save_merged(model, tokenizer, out: Path) -> None:
    """Save a full copy of ``model`` (a PEFT model is merged into a copy, training continues unmerged)."""
    import copy

    if hasattr(model, "peft_config"):
        model = copy.deepcopy(model).merge_and_unload()
    save_planner(model, tokenizer, out)
