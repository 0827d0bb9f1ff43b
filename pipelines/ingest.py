"""Landing directory → bronze Delta (append-only raw lines), idempotently.

A file is identified by its content hash: landing the same file again adds nothing. Every
non-blank line becomes one bronze row with a deterministic ``row_id`` (``<sha>:<line>``). A file
that is not text at all (binary, or not UTF-8) or is empty becomes one bronze row with
``file_error`` set, so the validate stage quarantines it as a single entry: nothing is lost.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyspark.sql.functions as F
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from pipelines.delta_io import table_exists
from pipelines.tables import bronze_path

BRONZE_SCHEMA = StructType(
    [
        StructField("row_id", StringType(), False),
        StructField("batch_id", StringType(), False),
        StructField("app", StringType(), False),
        StructField("source_file", StringType(), False),
        StructField("file_sha256", StringType(), False),
        StructField("line_no", LongType(), False),
        StructField("raw", StringType(), True),
        StructField("file_error", StringType(), True),
        StructField("ingested_at", TimestampType(), False),
    ]
)


@dataclass(frozen=True)
class LandedFile:
    """One landing file and what the pre-check found."""

    path: Path
    sha256: str
    error: str | None


@dataclass
class IngestReport:
    """What one ingest run did."""

    batch_id: str
    files_new: list[str]
    files_skipped: list[str]
    rows_landed: int


def inspect_file(path: Path) -> LandedFile:
    """Hash a landing file and decide whether it is NDJSON text at all."""
    data = path.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    error = None
    if not data.strip():
        error = f"empty file ({len(data)} bytes)"
    elif (nul := data.find(b"\x00", 0, 65536)) >= 0:
        error = f"binary file (NUL byte at offset {nul})"
    else:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            error = f"not UTF-8 text (invalid byte at offset {exc.start})"
    return LandedFile(path=path, sha256=sha, error=error)


def known_hashes(spark: SparkSession, lake: Path, app: str) -> set[str]:
    """Content hashes of files already in bronze for ``app``."""
    path = bronze_path(lake)
    if not table_exists(spark, path):
        return set()
    rows = spark.read.format("delta").load(path).where(F.col("app") == app)
    return {r.file_sha256 for r in rows.select("file_sha256").distinct().collect()}


def _file_lines(spark: SparkSession, f: LandedFile) -> DataFrame:
    """Non-blank lines of one text file with their 1-based line numbers (deterministic)."""
    rdd = spark.sparkContext.textFile(str(f.path), minPartitions=2).zipWithIndex()
    return spark.createDataFrame(rdd.map(lambda t: (t[0], t[1] + 1)), "raw STRING, line_no LONG")


def bronze_rows(spark: SparkSession, files: list[LandedFile], app: str, batch_id: str) -> DataFrame:
    """Bronze rows for new files: one per line, or one per unreadable file."""
    now = datetime.now(UTC).replace(tzinfo=None)
    frames: list[DataFrame] = []
    whole_file_errors = [
        (f"{f.sha256}:0", batch_id, app, str(f.path), f.sha256, 0, None, f.error, now)
        for f in files
        if f.error
    ]
    if whole_file_errors:
        frames.append(spark.createDataFrame(whole_file_errors, BRONZE_SCHEMA))
    for f in files:
        if f.error:
            continue
        lines = _file_lines(spark, f).select(
            F.concat_ws(":", F.lit(f.sha256), F.col("line_no").cast("string")).alias("row_id"),
            F.lit(batch_id).alias("batch_id"),
            F.lit(app).alias("app"),
            F.lit(str(f.path)).alias("source_file"),
            F.lit(f.sha256).alias("file_sha256"),
            "line_no",
            "raw",
            F.lit(None).cast("string").alias("file_error"),
            F.lit(now).cast("timestamp").alias("ingested_at"),
        )
        frames.append(lines)
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def ingest_landing(
    spark: SparkSession, landing_dir: Path, lake: Path, app: str, batch_id: str
) -> IngestReport:
    """Append every new landing file of ``app`` to bronze; files seen before are skipped."""
    candidates = sorted(p for p in landing_dir.glob("*") if p.is_file())
    seen = known_hashes(spark, lake, app)
    inspected = [inspect_file(p) for p in candidates]
    new, skipped, hashes = [], [], set()
    for f in inspected:
        if f.sha256 in seen or f.sha256 in hashes:
            skipped.append(str(f.path))
        else:
            hashes.add(f.sha256)
            new.append(f)
    if not new:
        return IngestReport(batch_id, [], skipped, 0)
    rows = bronze_rows(spark, new, app, batch_id).cache()
    landed = rows.count()
    rows.write.format("delta").mode("append").save(bronze_path(lake))
    rows.unpersist()
    return IngestReport(batch_id, [str(f.path) for f in new], skipped, landed)
