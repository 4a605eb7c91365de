"""One ``manifest_intact`` asset check per asset: its artifact's files match its manifest (every file's size and
content hash, :func:`grasp_core.manifest.verify`), the check ``grasp verify DATASET`` makes for all of them.

The checks are separate from the materializations (run them from the UI or with
``dagster asset check -m grasp_assets.definitions --select 'ASSET' --partition DATASET``), so checking an
artifact never rebuilds it.
"""

import warnings

import dagster as dg

from grasp_assets.partitions import ROUND, dataset_of
from grasp_assets.resources import SettingsResource
from grasp_assets.stages import ROUND_ASSETS
from grasp_core.errors import GraspError

CHECK = "manifest_intact"


def manifest_checks(assets: list[dg.AssetsDefinition]) -> list[dg.AssetChecksDefinition]:
    # a partitioned check is a Dagster "preview" feature: its notice, printed once per stage, is not the user's business
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return [_check(key, asset.partitions_def) for asset in assets for key in asset.keys]


def _check(key: dg.AssetKey, partitions_def) -> dg.AssetChecksDefinition:
    name = key.to_user_string()

    @dg.asset_check(
        asset=key,
        name=CHECK,
        partitions_def=partitions_def,
        description="every file of the artifact has the size and content hash its manifest records",
    )
    def check(context: dg.AssetCheckExecutionContext, settings: SettingsResource) -> dg.AssetCheckResult:
        partition = context.partition_key
        round_key = partition.keys_by_dimension[ROUND] if name in ROUND_ASSETS else None  # type: ignore[attr-defined]
        art = settings.artifacts(dataset_of(context))
        try:
            found = art.verify(name, round_key)
        except GraspError as exc:  # missing (never built, interrupted) or corrupt
            return dg.AssetCheckResult(passed=False, metadata={"problem": dg.MetadataValue.text(str(exc))})
        return dg.AssetCheckResult(
            passed=True,
            metadata={
                "files": len(found.files),
                "bytes": sum(e.size for e in found.files.values()),
                "digest": dg.MetadataValue.text(found.digest),
            },
        )

    return check
