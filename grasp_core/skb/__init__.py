"""The knowledge-base data model: what every data source (:mod:`grasp_core.sources`) writes and everything else reads.

- ``schema``: node types with their text fields, and typed relations (``schema.json``).
- ``format``: the on-disk SKB (``schema.json``, ``nodes.parquet``, ``edges.parquet``, ``queries.parquet``), its
  in-memory ``SKB``, validation, and atomic reading and writing.
"""
