"""Thin Delta helpers shared by the stages: existence, versions, idempotent MERGE."""

from __future__ import annotations

from collections.abc import Sequence

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession


def table_exists(spark: SparkSession, path: str) -> bool:
    """Whether a Delta table exists at ``path``."""
    return DeltaTable.isDeltaTable(spark, path)


def table_version(spark: SparkSession, path: str) -> int:
    """Latest committed version of a Delta table, -1 if there is none yet."""
    if not table_exists(spark, path):
        return -1
    return int(DeltaTable.forPath(spark, path).history(1).select("version").first()[0])


def merge_insert(
    spark: SparkSession,
    df: DataFrame,
    path: str,
    keys: Sequence[str],
    partition_by: Sequence[str] = (),
    update: bool = False,
    evolve_schema: bool = False,
) -> None:
    """MERGE ``df`` into the table at ``path`` on ``keys``: insert new keys; with ``update``,
    also overwrite matched rows. Creates the table on first use. Re-running is a no-op.
    With ``evolve_schema`` columns new to the table are added (older rows get null)."""
    if not table_exists(spark, path):
        writer = df.write.format("delta").mode("append")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.save(path)
        return
    condition = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in keys)
    merge = DeltaTable.forPath(spark, path).alias("t").merge(df.alias("s"), condition)
    if evolve_schema:
        merge = merge.withSchemaEvolution()
    if update:
        merge = merge.whenMatchedUpdateAll()
    merge.whenNotMatchedInsertAll().execute()
