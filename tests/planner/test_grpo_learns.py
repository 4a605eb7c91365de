"""GRPO learns, measured without sampling noise: a toy whose reward is decided by the plan's first grammar choice
(the target type), read as the constrained policy's exact probability of that choice before and after training."""

import json

import pytest
import torch
from llguidance.torch import allocate_token_bitmask, fill_next_token_bitmask
from transformers import AutoTokenizer

from grasp_core.entities.table import EntityTable
from grasp_core.llm.chat import render_prompt
from grasp_core.planner.config import GRPOTrainingConfig, PlanGrammarConfig, PlannerModelConfig, TinyModelConfig
from grasp_core.planner.lm.base import base_model_path, build_planner_base
from grasp_core.planner.lm.grammar import PlanGrammar, ll_tokenizer, matcher, unpack_bits
from grasp_core.planner.lm.prompt import build_planner_messages
from grasp_core.planner.lm.rl import train_grpo
from grasp_core.planner.reward import RewardTable
from grasp_core.planner.scoring import PlannerEnv
from grasp_core.sources.synth import build_synth_skb

GRAMMAR = PlanGrammarConfig(text_anchors=False, max_relevance_chars=0)  # the cpu profile's

REWARDED = "disease"  # the toy's first grammar choice: the plan's target type


def choice_probability(model, tokenizer, prompt: str, grammar: PlanGrammar, target_type: str) -> float:
    """p̃(target type = ``target_type``): the constrained policy's exact probability that the plan's first grammar
    choice is that type, summed over every tokenization of the type name (a grammar matcher is advanced along the
    forced prefix ``{"target":{"type":"``, then each allowed token that keeps the text on ``<type>"`` is followed)."""
    ll = ll_tokenizer(tokenizer, [tokenizer.eos_token_id])
    m = matcher(grammar, ll)
    bitmask = allocate_token_bitmask(1, ll.vocab_size)

    def allowed(state) -> list[int]:
        fill_next_token_bitmask(state, bitmask, 0)
        return unpack_bits(bitmask[0], len(tokenizer)).nonzero().flatten().tolist()

    ids = tokenizer(text=prompt)["input_ids"]
    while len(nxt := allowed(m)) == 1:  # the forced prefix
        m.consume_token(nxt[0])
        ids = [*ids, nxt[0]]
    goal, total = f'{target_type}"', 0.0
    frontier = [(ids, "", m, 1.0)]
    with torch.no_grad():
        while frontier:
            ids, text, state, prob = frontier.pop()
            options = allowed(state)
            logits = model(torch.tensor([ids])).logits[0, -1, options].float()
            for t, p in zip(options, logits.softmax(-1).tolist()):
                new = text + tokenizer.decode([t])
                if new.startswith(goal):
                    total += prob * p
                elif goal.startswith(new):
                    nxt_state = state.deep_copy()
                    nxt_state.consume_token(t)
                    frontier.append(([*ids, t], new, nxt_state, prob * p))
    return total


def target_type_reward(rewarded: bool):
    """1 for a plan whose target type is REWARDED (``rewarded``) or is not (the mirror), 0 otherwise."""

    def reward(completions, qid, **_):
        types = [json.loads(c)["target"]["type"] for c in completions]
        return [float((t == REWARDED) == rewarded) for t in types]

    return reward


TOY = GRPOTrainingConfig(
    use_lora=False,
    num_generations=8,
    prompts_per_step=1,
    learning_rate=1e-3,
    beta=0.0,
    max_completion_length=512,
    max_steps=8,
    save_every=8,
    resample_flat=3,
)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """An untrained tiny planner (tokenizer trained on a tiny synth-prime's node texts) and one query with an empty
    entity table: every plan is zero-hop, so the target type is the plan's only free choice."""
    skb = build_synth_skb("prime", "tiny")
    out = tmp_path_factory.mktemp("toy") / "base"
    tiny = TinyModelConfig(hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=64)
    build_planner_base(skb, [], [], PlannerModelConfig(tiny=tiny, vocab_size=1024, tokenizer_node_texts=300), out)
    base = base_model_path(out)
    table = EntityTable()
    messages = build_planner_messages(skb.schema, table, "which diseases present with headache?", compact=True)
    prompt = render_prompt(AutoTokenizer.from_pretrained(base), messages)
    env = PlannerEnv(skb.schema, None, {0: "q"}, {0: table}, {}, {0: []}, skb.num_nodes, RewardTable.prior())
    return base, env, prompt, PlanGrammar(skb.schema, table, GRAMMAR)


@pytest.mark.parametrize("rewarded", [True, False], ids=["rewarded", "mirrored"])
def test_grpo_moves_the_constrained_probability_of_the_rewarded_choice(toy, tmp_path, rewarded):
    base, env, prompt, grammar = toy
    curve = []

    def measure(model, tokenizer) -> float:  # read at step 0 and at the end
        model.eval()
        curve.append(choice_probability(model, tokenizer, prompt, grammar, REWARDED))
        return curve[-1]

    torch.manual_seed(0)
    train_grpo(
        base,
        env,
        [0],
        lambda q: prompt,
        measure,
        TOY,
        tmp_path / "grpo",
        grammar=GRAMMAR,
        reward_func=target_type_reward(rewarded),
    )
    before, after = curve
    print(f"p~({REWARDED}) {before:.3f} -> {after:.3f} ({'rewarded' if rewarded else 'mirrored'})")
    assert 0.05 < before < 0.2  # the untrained model: near uniform over the schema's 10 types
    # measured (8 steps, lr 1e-3, one torch thread): 0.105 -> 0.143 rewarded, 0.105 -> 0.074 mirrored
    if rewarded:
        assert after > before + 0.02
    else:
        assert after < 0.85 * before
