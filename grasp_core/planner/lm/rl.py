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
from grasp_core.planner.config import GRPOTrainingConfig, PlanGrammarConfig, RLSamplingConfig
from grasp_core.planner.lm.checkpoint import load_planner, save_planner
from grasp_core.planner.lm.grammar import PlanGrammar
from grasp_core.planner.lm.sft import LogFn, trainer_args
from grasp_core.planner.scoring import PlannerEnv, PlanRewarder


def sample_and_score(llm, env: PlannerEnv, qids: Sequence[int], cfg: RLSamplingConfig, inference_cfg) -> pd.DataFrame:
    """One row per sampled plan: qid, sample, plan, reward, valid, n_anchors, n_candidates, fused_gold_rank."""
    from grasp_core.planner.lm.generate import sample_plans

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


def rft_examples(sft_examples: list[dict], best: pd.DataFrame, prompt_of: Callable[[int], str]) -> list[dict]:
    """The SFT data plus each query's best positive sample (prompt/completion pairs)."""
    return list(sft_examples) + [{"prompt": prompt_of(int(r.qid)), "completion": r.plan} for r in best.itertuples()]


def _grpo_trainer_class():
    """TRL's GRPOTrainer on the grammar-constrained policy, with resampling of all-flat batches (built lazily: TRL
    is heavy). Overrides pinned to TRL 1.16 (``pyproject.toml``): the rollout step, and the per-token log-probs."""
    import torch
    from trl import GRPOTrainer

    class PlanGRPOTrainer(GRPOTrainer):
        """GRPO on the policy that samples: p̃(t) = p(t) / Σ_{allowed} p, the model renormalized over the tokens
        the plan grammar allows at each step.

        Rollouts are decoded under each prompt's plan grammar (as planner inference and RL sampling are), and the
        allowed-token mask of every step is recorded (packed, 1 bit per vocabulary entry) and carried with the
        batch (``allowed_bits``: TRL shuffles and splits every tensor of the batch dict together). The loss's and the
        KL reference's per-token log-probs are then log-softmax over the allowed tokens only: a token the grammar
        forces has log p̃ = 0 and no gradient, and a negative advantage moves mass to the other *allowed* tokens,
        never onto tokens the sampler cannot emit (with TRL's full-vocabulary log-probs the gradient would carry
        an extra A·∇log Z term that does both). ``grammars`` maps a prompt's token ids (as TRL tokenizes it) to its
        :class:`PlanGrammar`.
        """

        def __init__(self, *args, grammars: dict, resample_flat: int, **kwargs):
            super().__init__(*args, **kwargs)
            self._grammars, self._resample_flat = grammars, resample_flat
            self._allowed: torch.Tensor | None = None  # the allowed_bits of the rows being scored

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
            processor = PlanGrammar.logits_processor(
                grammars, tok, list(self.eos_token_ids), longest, budget, 1, record=True
            )
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
            self._allowed = processor.allowed_bits()  # rows in prompt order, as TRL lays out the completions
            return completions, None

        def _generate_and_score_completions(self, inputs):
            out = self._score_constrained(inputs)
            for _ in range(self._resample_flat):
                if out["advantages"].abs().sum().item() > 0:
                    break
                out = self._score_constrained(inputs)
            return out

        def _score_constrained(self, inputs):
            out = super()._generate_and_score_completions(inputs)  # its log-probs read self._allowed
            out["allowed_bits"] = self._allowed
            return out

        def _compute_loss(self, model, inputs):
            self._allowed = inputs["allowed_bits"]
            return super()._compute_loss(model, inputs)

        def _get_per_token_logps_and_entropies(
            self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False, **extra
        ):
            """log p̃ of each completion token (and the entropy of p̃) over the recorded allowed tokens."""
            if extra.get("compute_aux_loss") or any(v is not None for k, v in extra.items() if k != "compute_aux_loss"):
                raise GraspError("GRPO on the plan grammar takes text-only dense models (no images, no MoE aux loss)")
            if self._allowed is None or len(self._allowed) != len(input_ids):
                raise GraspError("GRPO: no allowed-token masks recorded for these rows")
            batch_size = batch_size or len(input_ids)
            logps, entropies = [], []
            for s in range(0, len(input_ids), batch_size):
                ids, att = input_ids[s : s + batch_size], attention_mask[s : s + batch_size]
                logits = model(input_ids=ids, attention_mask=att, logits_to_keep=logits_to_keep + 1).logits
                lp, ent = constrained_logps(
                    logits[:, :-1].float() / self.temperature,
                    ids[:, -logits_to_keep:],
                    self._allowed[s : s + batch_size],
                    att[:, -logits_to_keep:].bool(),
                )
                logps.append(lp)
                entropies.append(ent)
            return torch.cat(logps), (torch.cat(entropies) if compute_entropy else None), None

    return PlanGRPOTrainer


def constrained_logps(logits, tokens, allowed_bits, mask):
    """Per-token log-probs of ``tokens`` (and the entropy) under softmax(``logits``) renormalized over the allowed
    tokens: ``logits`` ``(rows, T, V)``, ``tokens`` and ``mask`` ``(rows, T)``, ``allowed_bits`` the packed masks
    ``(rows, ≥T or fewer, words)``. Positions outside ``mask`` (padding) get 0 for both."""
    import torch

    from grasp_core.planner.lm.grammar import unpack_bits

    steps = logits.shape[1]
    bits = allowed_bits[:, :steps].to(logits.device)
    allowed = unpack_bits(bits, logits.shape[-1])
    if allowed.shape[1] < steps:  # steps past the recorded ones are padding: leave every token allowed there
        pad = allowed.new_ones(allowed.shape[0], steps - allowed.shape[1], allowed.shape[2])
        allowed = torch.cat([allowed, pad], dim=1)
    allowed = allowed | ~mask.unsqueeze(-1)  # padding: never an empty row (no NaN), zeroed below
    logp = logits.masked_fill(~allowed, float("-inf")).log_softmax(-1)
    token_logp = logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        entropy = -(logp.exp() * logp.masked_fill(~allowed, 0.0)).sum(-1)
    return torch.where(mask, token_logp, 0.0), torch.where(mask, entropy, 0.0)


def train_grpo(
    model_path: str | Path,
    env: PlannerEnv,
    train_qids: Sequence[int],
    prompt_of: Callable[[int], str],
    evaluate_val: Callable[[object, object], float],
    cfg: GRPOTrainingConfig,
    out_dir: str | Path,
    log_fn: LogFn | None = None,
    device: str = "cpu",
    grammar: PlanGrammarConfig = PlanGrammarConfig(),
    reward_func: Callable | None = None,
) -> dict:
    """GRPO from the planner at ``model_path``; writes the best checkpoint (by ``evaluate_val``) to ``out_dir``.

    ``evaluate_val(model, tokenizer) -> validation fused Hit@1`` is called at step 0 and every
    ``cfg.save_every`` steps (and at the end); the best model is saved merged (a full planner checkpoint).
    ``reward_func`` is a TRL reward function ``f(completions, qid, **columns) -> rewards`` (default: the
    fused-gain reward of ``env``).
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
            # Σ_t A·∇log p̃ per completion over a constant (completions × max_completion_length): the policy gradient
            # of the expected reward, each token weighted alike; "grpo" divides by each completion's own length
            # (a length bias when reward follows plan length), docs/planner.md
            loss_type="dr_grpo",
            **trainer_args(cfg.seed, device),
        )
        grammars = {
            tuple(tokenizer(text=prompt_of(q))["input_ids"]): PlanGrammar(env.schema, env.tables[q], grammar)
            for q in set(qids)
        }
        trainer = _grpo_trainer_class()(
            model=model,
            reward_funcs=[reward_func or rewarder.reward_function()],
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
