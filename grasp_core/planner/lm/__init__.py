"""The ``lm`` planner kind: a language model writes the plan (the paper), trained by SFT and RL rounds."""
