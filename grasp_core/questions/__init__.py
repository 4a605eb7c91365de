"""Question synthesis: the train/val/test questions of a dataset and their gold answers, made from its SKB.

- ``querygen``: the STaRK protocol (template, grounding, property, wording, gold) for ``hpo`` and ``synth-*``.
- ``properties``: when a phrase of a node is a property a question may ask for, and when a node has it.
- ``kb_graph``: the SKB as the synthesizer walks it (a CSR adjacency per relation and direction, text fields).
- ``generic_queries``: the same protocol from any SKB's schema, for user SKBs that ship no questions.
- ``wording``: how ``generic_queries`` words a question from the schema's names, and a user's ``wording.json``.
- ``hpo_questions``: hpo question patterns per template and register (``data/hpo_questions.json``).
- ``synonyms``: the synonym groups the synthetic texts and their questions swap (``data/synonyms.json``).
- ``paraphrase``: the optional LLM rewording of synthesized questions, keeping their anchors and property.
- ``term_queries``: "what is the term for <a description>?" questions.
- ``intent_queries``: search-box look-ups of a name and "several findings -> which one?" lists.
- ``human_queries``: hpo's hand-written ``test-human`` / ``val-human`` questions (``data/hpo_*_human.jsonl``),
  gold from their graph queries.
- ``feedback_queries``: questions people asked ``grasp serve`` and the answers they confirmed, as training and
  ``feedback`` questions.

Of the knowledge-base packages it imports the data model (:mod:`grasp_core.skb`) only, never a data source
(:mod:`grasp_core.sources` sits above it); nothing of the answer path or the training steps.
"""
