"""Validate stage: run each silver table's GE suite on its candidate frame (design.md).

Per non-empty table, the table's suite runs through an ephemeral GE context with a Spark
data source: a screening pass over all expectations, then a detail pass over the failed ones
only (see :mod:`expectations.results`). Failing rows come from GE's own
``unexpected_index_list`` (keyed by ``row_id``), so quarantine and the report share one
definition of every rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import great_expectations as gx
from great_expectations.data_context import AbstractDataContext
from great_expectations.data_context.types.base import (
    DataContextConfig,
    InMemoryStoreBackendDefaults,
    ProgressBarsConfig,
)
from great_expectations.datasource.fluent import SparkDatasource
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from expectations.derived import with_derived_columns
from expectations.report import render_html
from expectations.results import (
    DETAIL_FORMAT,
    SCREEN_FORMAT,
    Failure,
    failed_expectations,
    failures,
    skipped_summary,
    summary,
)
from expectations.suites import ValidationContext, build_suite

FAILURE_SCHEMA = StructType(
    [StructField(name, StringType()) for name in ("row_id", "table", "rule", "field", "detail")]
)


@dataclass
class ValidationOutcome:
    """Failing (row, rule) pairs, row counts, the HTML report and per-table GE summaries."""

    failures: DataFrame
    counts: dict[str, dict[str, int]]
    report_path: Path
    results: dict[str, dict[str, Any]]


def _gx_context() -> AbstractDataContext:
    """An in-memory GE context: no progress bars, no analytics, no temporary docs site."""
    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
    )
    return gx.get_context(mode="ephemeral", project_config=config)


def _validate_table(
    source: SparkDatasource,
    table: str,
    frame: DataFrame,
    rows: int,
    ctx: ValidationContext,
    batch_id: str,
) -> tuple[list[Failure], dict[str, Any]]:
    """Screen ``frame`` with the table's suite, detail the failed expectations."""
    batch = (
        source.add_dataframe_asset(name=table)
        .add_batch_definition_whole_dataframe(batch_id)
        .get_batch(batch_parameters={"dataframe": frame})
    )
    suite = build_suite(table, ctx)
    screen = batch.validate(suite, result_format=SCREEN_FORMAT)
    failed = failed_expectations(screen)
    if not failed:
        return [], summary(screen, None, rows)
    detail_suite = gx.ExpectationSuite(name=suite.name, expectations=failed)
    detail = batch.validate(detail_suite, result_format=DETAIL_FORMAT)
    return failures(detail), summary(screen, detail, rows)


def validate_candidates(
    spark: SparkSession,
    candidates: Mapping[str, DataFrame],
    ctx: ValidationContext,
    report_dir: Path,
    batch_id: str,
) -> ValidationOutcome:
    """Validate every candidate frame (one per silver table) and write the batch report."""
    source = _gx_context().data_sources.add_spark(name="silver_candidates", persist=False)
    rows: list[tuple[str, str, str, str, str]] = []
    counts: dict[str, dict[str, int]] = {}
    results: dict[str, dict[str, Any]] = {}
    for table, candidate in candidates.items():
        frame = with_derived_columns(table, candidate, ctx)
        owned_cache = not frame.is_cached  # a frame the caller cached stays cached
        frame.cache()
        try:
            n = frame.count()
            if n == 0:
                found, results[table] = [], skipped_summary(f"silver.{table}", "empty frame")
            else:
                found, results[table] = _validate_table(source, table, frame, n, ctx, batch_id)
        finally:
            if owned_cache:
                frame.unpersist()
        counts[table] = {"rows": n, "failed_rows": len({f.row_id for f in found})}
        rows.extend((f.row_id, table, f.rule, f.field, f.detail) for f in found)
    report_dir.mkdir(parents=True, exist_ok=True)
    report_path = report_dir / f"validation-{batch_id}.html"
    report_path.write_text(render_html(batch_id, results, counts), encoding="utf-8")
    return ValidationOutcome(
        failures=spark.createDataFrame(rows, FAILURE_SCHEMA),
        counts=counts,
        report_path=report_path,
        results=results,
    )
