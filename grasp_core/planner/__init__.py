"""The planner: what turns a question and its entity table into a plan (the plan language and its executor are
:mod:`grasp_core.plan`).

- ``interface``: the two planner kinds as one interface to the answer path (``Planner``, ``load_planner``).
- ``config``: every planner setting, one dataclass per profile section.
- ``lm/``: the ``lm`` kind, a language model that writes the plan (the paper): its base model, tokenizer and tiny
  offline model, prompt, grammar-constrained generation, checkpoints, and its training (SFT, the RL round).
- ``policy/``: the ``policy`` kind (the ``cpu`` planner), a policy over a finite set of candidate plans: its model,
  its training (SFT, RFT, GRPO), and the chooser that re-decides among executed shortlisted plans.
- ``teachers/``: the plans training imitates: the programmatic teacher (executes the candidates with the gold) and
  the LLM teacher behind an endpoint.
- Shared by both kinds: ``attempt`` (a planner's answer for one question), ``candidates`` (the plans a question can get), ``metapaths``, ``reward`` (the fused reward
  table), ``scoring`` (executing and scoring sampled plans), ``samples`` (what a round samples and keeps) and
  ``rounds`` (the RL rounds and their gate).

The training steps each asset runs are in :mod:`grasp_core.pipeline` (``planner``, ``planner_lm``,
``planner_policy``, ``planner_inputs``, ``rft_samples``): one step per asset, beside the other assets' steps.
"""
