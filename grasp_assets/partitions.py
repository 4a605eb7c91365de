"""Partitions: one per dataset (built-in keys and user SKBs, all dynamic), and dataset × RL round.

Dagster allows a multi-partition dimension to be dynamic only as a DynamicPartitionsDefinition, so the
built-in dataset keys are registered like user SKBs (by the `dataset_registry` sensor and by
`grasp pipeline`), rather than as a separate static definition.
"""

import dagster as dg

from grasp_core.planner.rounds import ROUNDS

DATASET, ROUND = "dataset", "round"

dataset_partitions = dg.DynamicPartitionsDefinition(name=DATASET)
round_partitions = dg.StaticPartitionsDefinition(list(ROUNDS))
dataset_round_partitions = dg.MultiPartitionsDefinition({DATASET: dataset_partitions, ROUND: round_partitions})


def dataset_of(context) -> str:
    """The dataset key of a run, for single- and multi-partitioned assets alike."""
    key = context.partition_key
    return key.keys_by_dimension[DATASET] if isinstance(key, dg.MultiPartitionKey) else key


def round_of(context) -> str:
    return context.partition_key.keys_by_dimension[ROUND]
