"""SFT, one RFT and a few GRPO steps on a tiny SKB with the tiny model.

The round's mechanics (sampling, RFT data, GRPO on the informative queries, checkpoint selection, the adapter moving
the weights) are asserted. Whether GRPO *learns* is measured apart, without sampling noise, and is a known open
defect at this size: comparing 8 sampled plans per query before and after (the former check) measured sampling
noise: the SFT and RFT planners' sampled means were -0.047 and -0.072 while their likelihood-weighted expected
rewards over the same sampled plans were -0.060 and -0.061, and GRPO moved the latter by 0.0003.
"""

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from grasp_core.io import read_json
from grasp_core.llm.backends import TransformersLLM
from grasp_core.planner.checkpoint import load_planner
from grasp_core.planner.reward import COUNT_LABELS, RANK_LABELS, RewardTable
from grasp_core.planner.rl import (
    best_positive_samples,
    informative_queries,
    rft_examples,
    sample_and_score,
    train_grpo,
)
from grasp_core.planner.sft import train_sft
from grasp_core.planner.train_settings import GRPOSettings, RLSettings
from tests.planner.conftest import CPU_INFER, N_SFT, SFT_FAST

N_RL = 16  # training queries outside the SFT data where the text ranking misses: a plan can only gain there
SAMPLING = RLSettings(samples_per_query=8, temperature=1.0)


# A reward table as a reranker would fill it: a list's value falls with its gold answer's rank, so a plan that lifts
# the gold answer anywhere into the top 50 earns something. (The prior table rewards only a new fused rank 1: on this
# tiny world 2 of 16 queries ever got a positive sample, too sparse a signal for a few GRPO steps.)
GRADED = RewardTable(
    np.repeat(np.array([[1.0], [0.6], [0.35], [0.2], [0.1], [0.05], [0.0]]), len(COUNT_LABELS), axis=1),
    np.full((len(RANK_LABELS), len(COUNT_LABELS)), 100),
)


def sampled(path, env, qids, seed):
    torch.manual_seed(seed)
    return sample_and_score(TransformersLLM(path, batch_size=32), env, qids, SAMPLING, CPU_INFER)


def plan_logprobs(path, candidates: pd.DataFrame, prompt_of) -> np.ndarray:
    """Each candidate plan's log-likelihood (plan tokens + EOS given the query's prompt) under the planner at ``path``."""
    model, tokenizer = load_planner(path)
    model.eval()
    logp = []
    with torch.no_grad():
        for row in candidates.itertuples():
            prompt = tokenizer(text=prompt_of(int(row.qid)))["input_ids"]
            plan = tokenizer(text=row.plan, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            logits = model(torch.tensor([prompt + plan])).logits[0, len(prompt) - 1 : -1]
            logp.append(torch.log_softmax(logits.float(), -1)[torch.arange(len(plan)), plan].sum().item())
    return np.array(logp)


def rl_qids(world) -> list[int]:
    in_sft = set(world.sft_qids()[:N_SFT])
    return [
        q
        for q in world.train
        if q not in in_sft
        and len(world.gold[q]) <= 20
        and world.text[q].rank_of(world.gold[q]) != 1
        and world.taught[q].gold_rank is not None
    ][:N_RL]


def test_sft_rft_grpo_round_trains_and_selects_checkpoints(
    world, planner_base, sft_planner, sft_examples, prompt_of, tmp_path
):
    sft_path, _ = sft_planner
    env = world.env(GRADED)
    qids = rl_qids(world)
    assert len(qids) == N_RL
    before = sampled(sft_path, env, qids, seed=0)
    assert len(before) == len(qids) * 8 and before["valid"].all()  # constrained decoding: every sample is a plan

    best = best_positive_samples(before)
    assert len(best) >= 2 and (best["reward"] > 0).all() and best["qid"].is_unique
    examples = rft_examples(sft_examples[:N_SFT], best, prompt_of)
    assert len(examples) == N_SFT + len(best)
    train_sft(planner_base, examples, SFT_FAST, tmp_path / "rft")  # RFT restarts from the base

    calls = []

    def evaluate_val(model, tokenizer) -> float:  # a rising stand-in so the last GRPO checkpoint is kept
        calls.append(model.training)
        return float(len(calls))

    rewards_of = before.groupby("qid")["reward"]
    assert set(informative_queries(before)) == {q for q, r in rewards_of if r.max() > r.min()}
    cfg = GRPOSettings(
        use_lora=True,
        lora_r=8,
        lora_alpha=16,
        num_generations=4,
        prompts_per_step=4,
        learning_rate=3e-3,
        max_completion_length=512,
        max_steps=6,
        save_every=3,
        resample_flat=1,
    )
    train_q = informative_queries(before)  # as the pipeline does: GRPO learns only where rewards differ
    result = train_grpo(
        tmp_path / "rft", env, train_q, prompt_of, evaluate_val, cfg, tmp_path / "grpo", grammar=CPU_INFER.grammar
    )
    assert [s["step"] for s in result["selection"]] == [0, 3, 6] and result["best_step"] == 6
    assert read_json(tmp_path / "grpo" / "selection.json")["best_step"] == 6
    rewards = [h["reward"] for h in result["history"] if "reward" in h]
    assert len(rewards) == 6
    # the GRPO adapter moved the merged RFT weights
    rft, grpo = (
        load_file(str(tmp_path / "rft" / "model.safetensors")),
        load_file(str(tmp_path / "grpo" / "model.safetensors")),
    )
    moved = [k for k in rft if "proj" in k and not torch.equal(rft[k], grpo[k])]
    assert len(moved) == len([k for k in rft if "proj" in k]), moved


@pytest.mark.xfail(strict=True, reason="GRPO does not yet move the tiny planner towards higher reward (see docstring)")
def test_grpo_moves_the_plan_likelihoods_towards_higher_reward(world, sft_planner, prompt_of, tmp_path):
    """GRPO's own objective, measured without sampling noise: after a few steps on four queries, the fixed
    candidate plans sampled before training must gain log-likelihood in proportion to their group advantage.

    Known to fail (measured on this tiny world, lr 2e-2, 4 steps): every candidate loses 7-67 nats and the
    advantage-weighted change is -14.3; at lr 5e-2 it is -48. Grad norms are ~0.01-0.05 and Adam turns them into
    lr-sized steps that only damage the planner's likelihood of its own plans. With the generated grammar's plan
    format the weighted change came out +1.1 once, but every candidate still lost 3-11 nats, the ones with a
    positive advantage included: so the test also asks those to gain.
    """
    sft_path, _ = sft_planner
    env = world.env(GRADED)
    before = sampled(sft_path, env, rl_qids(world), seed=0)
    spread = before.groupby("qid")["reward"].agg(lambda r: r.max() - r.min())
    top = spread[spread > 0].sort_values(ascending=False, kind="stable").index[:4].astype(int).tolist()
    cands = before[before["qid"].isin(top)].drop_duplicates(["qid", "plan"])
    advantage = (cands["reward"] - cands.groupby("qid")["reward"].transform("mean")).to_numpy()
    cfg = GRPOSettings(
        use_lora=True,
        lora_r=8,
        lora_alpha=16,
        num_generations=8,
        prompts_per_step=2,
        learning_rate=2e-2,
        max_completion_length=512,
        max_steps=4,
        save_every=2,
        resample_flat=1,
    )
    calls = []
    train_grpo(
        sft_path,
        env,
        top,
        prompt_of,
        lambda model, tokenizer: float(len(calls.append(1) or calls)),  # rising: the last checkpoint is kept
        cfg,
        tmp_path / "grpo",
        grammar=CPU_INFER.grammar,
    )
    change = plan_logprobs(tmp_path / "grpo", cands, prompt_of) - plan_logprobs(sft_path, cands, prompt_of)
    print(f"advantage-weighted log-likelihood change {float(advantage @ change):.2f}; changes {np.round(change, 1)}")
    assert float(advantage @ change) > 0
    assert change[advantage > 0].mean() > 0
