"""Nightly lake housekeeping: Delta OPTIMIZE + VACUUM of every table, and the day's data docs
(the silver suites re-run over the day's silver rows, plus the day's quarantine by rule).

VACUUM deletes data files no longer referenced by versions younger than the retention, so
time travel (re-deriving a plan from ``inputs.delta_versions``) only reaches back that far.
Delta refuses a retention under 168 h unless ``retentionDurationCheck`` is off; a shorter
retention asked for explicitly turns the check off for that call only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from html import escape
from pathlib import Path

import pyspark.sql.functions as F
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from pipelines.delta_io import table_exists, table_version
from pipelines.tables import SILVER_TABLES, quarantine_path
from streamplan.config import AppConfig
from streamplan.settings import Settings

RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
DELTA_DEFAULT_RETENTION_HOURS = 168.0


@dataclass(frozen=True)
class TableMaintenance:
    """What OPTIMIZE and VACUUM did to one table."""

    name: str
    path: str
    version_before: int
    version_after: int
    files_compacted: int
    files_added: int
    files_removed: int
    files_left: int

    def as_dict(self) -> dict[str, int | str]:
        return asdict(self)


def delta_tables(lake: Path) -> list[Path]:
    """Every Delta table under the lake (bronze, silver, quarantine, gold), sorted."""
    return sorted(p.parent for p in Path(lake).glob("*/*/_delta_log") if p.is_dir())


def data_files(path: Path) -> int:
    """Parquet data files on disk (referenced or not) of the table at ``path``."""
    return sum(1 for p in Path(path).rglob("*.parquet") if "_delta_log" not in p.parts)


def optimize_and_vacuum(
    spark: SparkSession, lake: Path, retention_hours: float = DELTA_DEFAULT_RETENTION_HOURS
) -> list[TableMaintenance]:
    """Compact the small files of every table, then delete files unreferenced for longer
    than ``retention_hours``. Idempotent: a second run compacts and deletes nothing."""
    if retention_hours < 0:
        raise ValueError(f"retention_hours must be >= 0, got {retention_hours}")
    done = []
    for path in delta_tables(lake):
        table = DeltaTable.forPath(spark, str(path))
        before = table_version(spark, str(path))
        metrics = table.optimize().executeCompaction().first()["metrics"]
        on_disk = data_files(path)
        _vacuum(spark, table, retention_hours)
        left = data_files(path)
        done.append(
            TableMaintenance(
                name=str(path.relative_to(lake)),
                path=str(path),
                version_before=before,
                version_after=table_version(spark, str(path)),
                files_compacted=int(metrics["numFilesRemoved"]),
                files_added=int(metrics["numFilesAdded"]),
                files_removed=on_disk - left,
                files_left=left,
            )
        )
    return done


def _vacuum(spark: SparkSession, table: DeltaTable, retention_hours: float) -> None:
    # VACUUM lists the table with `parallelPartitionDiscovery.parallelism` tasks (10000 by
    # default: minutes of scheduling overhead on a laptop-sized local[2] session)
    confs = {LISTING_PARALLELISM: str(max(2, spark.sparkContext.defaultParallelism))}
    if retention_hours < DELTA_DEFAULT_RETENTION_HOURS:
        confs[RETENTION_CHECK] = "false"
    previous = {k: spark.conf.get(k, None) for k in confs}
    for k, v in confs.items():
        spark.conf.set(k, v)
    try:
        table.vacuum(retention_hours)
    finally:
        for k, v in previous.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


@dataclass(frozen=True)
class DailyValidation:
    """The day's data docs: where the report is and what it counted."""

    path: Path
    rows: int
    failed_rows: int
    quarantined: int
    rules: dict[str, int]


def quarantine_by_rule(
    spark: SparkSession, lake: Path, app: str, start: datetime, end: datetime
) -> dict[str, int]:
    """Quarantined rows of the ingest batches of (start, end], by first failed rule (batch
    ids are ``<app>-<interval end tag>``, so the range is a string range)."""
    path = quarantine_path(lake)
    if not table_exists(spark, path):
        return {}
    lo, hi = (f"{app}-{t.strftime('%Y%m%dT%H%M%SZ')}" for t in (start, end))
    rows = (
        spark.read.format("delta").load(path)
        .where((F.col("app") == app) & (F.col("batch_id") > lo) & (F.col("batch_id") <= hi))
        .groupBy("rule").count().collect()
    )
    return {r["rule"]: int(r["count"]) for r in rows}


def rebuild_validation_report(
    spark: SparkSession, settings: Settings, config: AppConfig, start: datetime, end: datetime
) -> DailyValidation:
    """Run every silver suite over the app's silver rows of (start, end] and write one HTML
    report for the day, with the day's quarantine counts by rule appended."""
    from pipelines.fit import read_window
    from pipelines.validate import validate_candidates
    from streamplan.stages import validation_context

    candidates = {}
    for table in SILVER_TABLES:
        rows = read_window(spark, settings.lake, table, config.app, start, end)
        if rows is not None:
            candidates[table] = rows.drop("date", "batch_id")
    ctx = validation_context(settings, config, start, end, candidates)
    batch_id = f"{config.app}-day-{end.strftime('%Y%m%dT%H%M%SZ')}"
    outcome = validate_candidates(spark, candidates, ctx, settings.reports, batch_id)
    rules = quarantine_by_rule(spark, settings.lake, config.app, start, end)
    section = _quarantine_html(start, end, rules)
    html = outcome.report_path.read_text(encoding="utf-8").replace("</body>", section + "</body>")
    outcome.report_path.write_text(html, encoding="utf-8")
    return DailyValidation(
        path=outcome.report_path,
        rows=sum(c["rows"] for c in outcome.counts.values()),
        failed_rows=sum(c["failed_rows"] for c in outcome.counts.values()),
        quarantined=sum(rules.values()),
        rules=rules,
    )


def _quarantine_html(start: datetime, end: datetime, rules: dict[str, int]) -> str:
    head = (f"<h2>quarantine, ingest batches of ({escape(start.isoformat())}, "
            f"{escape(end.isoformat())}]</h2>")
    if not rules:
        return head + "<p>No row was quarantined.</p>"
    body = "".join(f"<tr><td><code>{escape(rule)}</code></td><td>{n}</td></tr>"
                   for rule, n in sorted(rules.items()))
    return head + f"<table><tr><th>rule</th><th>rows</th></tr>{body}</table>"
