"""Validated candidates → silver (MERGE on the natural key) and failures → quarantine.

Invariant (tested): every pending bronze row ends in exactly one silver table or in quarantine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyspark.sql.functions as F
from pyspark.sql import DataFrame, SparkSession, Window

from pipelines.delta_io import merge_insert, table_exists
from pipelines.parse import FAILURE_COLUMNS, with_fields
from pipelines.tables import SILVER_TABLES, SilverTable, bronze_path, quarantine_path, silver_path


@dataclass
class PromoteReport:
    """Counts of one promotion."""

    rows_in: int
    silver: dict[str, int]
    quarantined: int
    rules: dict[str, int]


def pending_bronze(spark: SparkSession, lake: Path, app: str) -> DataFrame:
    """Bronze rows of ``app`` that are neither in silver nor in quarantine yet."""
    bronze = spark.read.format("delta").load(bronze_path(lake)).where(F.col("app") == app)
    done_paths = [silver_path(lake, t) for t in SILVER_TABLES] + [quarantine_path(lake)]
    for path in done_paths:
        if table_exists(spark, path):
            done = spark.read.format("delta").load(path).select("row_id")
            bronze = bronze.join(done, "row_id", "left_anti")
    return bronze


def duplicate_failures(
    spark: SparkSession, lake: Path, table: SilverTable, rows: DataFrame
) -> DataFrame:
    """Rows whose natural key repeats within the batch or already sits in silver."""
    key = list(table.key)
    first = Window.partitionBy(*key).orderBy("row_id")
    ranked = rows.withColumn("_rn", F.row_number().over(first)).withColumn(
        "_first", F.first("row_id").over(first)
    )
    in_batch = ranked.where(F.col("_rn") > 1).select(
        "row_id",
        F.lit(table.name).alias("table"),
        F.lit("unique(key)").alias("rule"),
        F.lit(",".join(key)).alias("field"),
        F.concat(F.lit(f"duplicate key ({', '.join(key)}) of row "), F.col("_first")).alias(
            "detail"
        ),
    )
    path = silver_path(lake, table.name)
    if not table_exists(spark, path):
        return in_batch
    existing = spark.read.format("delta").load(path).select(
        *[F.col(k).alias(f"_e_{k}") for k in key], F.col("row_id").alias("_existing")
    )
    in_silver = (
        ranked.where(F.col("_rn") == 1)
        .join(existing, [F.col(k).eqNullSafe(F.col(f"_e_{k}")) for k in key])
        .select(
            "row_id",
            F.lit(table.name).alias("table"),
            F.lit("unique(key)").alias("rule"),
            F.lit(",".join(key)).alias("field"),
            F.concat(F.lit("key already in silver as row "), F.col("_existing")).alias("detail"),
        )
    )
    return in_batch.unionByName(in_silver)


def quarantine_rows(bronze: DataFrame, failures: DataFrame) -> DataFrame:
    """One quarantine row per failed bronze row: raw line, first rule, all reasons, the value."""
    # the first rule shown is the most direct one: column checks before cross-column bounds
    priority = F.col("rule").contains("pair").cast("int")
    by_row = failures.groupBy("row_id").agg(
        F.sort_array(
            F.collect_list(F.struct(priority.alias("p"), "rule", "table", "field", "detail"))
        ).alias("_f")
    )
    joined = with_fields(bronze).join(by_row, "row_id")
    first = F.col("_f")[0]
    field = first["field"]
    # the offending value as written in the raw line (field "<line>"/"<file>": none)
    value = F.when(~field.startswith("<"), F.col("_fields")[field])
    return joined.select(
        "row_id",
        "batch_id",
        "app",
        "source_file",
        "line_no",
        "raw",
        F.get_json_object("raw", "$.kind").alias("kind"),
        first["table"].alias("table"),
        first["rule"].alias("rule"),
        field.alias("field"),
        F.substring(value, 1, 200).alias("value"),
        F.concat_ws("; ", F.transform("_f", lambda f: f["detail"])).alias("reason"),
        F.transform("_f", lambda f: f["rule"]).alias("rules"),
        "ingested_at",
    )


def silver_rows(candidates: DataFrame, bad: DataFrame, batch_id: str) -> DataFrame:
    """Clean candidates with lineage columns and the date partition."""
    return (
        candidates.join(bad, "row_id", "left_anti")
        .drop("ts_raw")
        .withColumn("date", F.to_date("ts"))
        .withColumn("batch_id", F.lit(batch_id))
    )


def promote(
    spark: SparkSession,
    lake: Path,
    bronze: DataFrame,
    candidates: dict[str, DataFrame],
    failures: DataFrame,
    batch_id: str,
) -> PromoteReport:
    """Write clean rows to silver and failed rows to quarantine; return the counts."""
    failures = failures.select(*FAILURE_COLUMNS)
    for name, rows in candidates.items():
        clean = rows.join(failures.select("row_id"), "row_id", "left_anti")
        failures = failures.unionByName(duplicate_failures(spark, lake, SILVER_TABLES[name], clean))
    failures = failures.localCheckpoint(eager=True)
    bad = failures.select("row_id").distinct().localCheckpoint(eager=True)
    silver_counts: dict[str, int] = {}
    for name, rows in candidates.items():
        table = SILVER_TABLES[name]
        clean = silver_rows(rows, bad, batch_id).localCheckpoint(eager=True)
        silver_counts[name] = clean.count()
        if silver_counts[name]:
            merge_insert(spark, clean, silver_path(lake, name), table.key, partition_by=["date"],
                         evolve_schema=True)  # a lake of an earlier contract gains new fields
    quarantine = quarantine_rows(bronze, failures).localCheckpoint(eager=True)
    quarantined = quarantine.count()
    if quarantined:
        merge_insert(spark, quarantine, quarantine_path(lake), ["row_id"])
    rules = {r["rule"]: r["n"] for r in quarantine.groupBy("rule").agg(F.count("*").alias("n"))
             .collect()}
    return PromoteReport(
        rows_in=bronze.count(), silver=silver_counts, quarantined=quarantined, rules=rules
    )
