"""Measured response time of a plan: silver query metrics of the interval after it went live."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pandas as pd
import pyspark.sql.functions as F
from pyspark.sql import SparkSession

from pipelines.delta_io import merge_insert
from pipelines.fit import read_window
from pipelines.tables import gold_path


def measured_response_times(
    spark: SparkSession, lake: Path, app: str, start: datetime, end: datetime
) -> dict[str, float]:
    """Mean response time (ms) per query over (start, end]: Σ rt_ms_sum / Σ events."""
    rows = read_window(spark, lake, "query_metrics", app, start, end)
    if rows is None:
        return {}
    agg = rows.groupBy("query").agg(
        F.sum("events").alias("events"), F.sum("rt_ms_sum").alias("rt")
    )
    return {r["query"]: r["rt"] / r["events"] for r in agg.collect() if r["events"]}


def record_measurement(
    spark: SparkSession,
    lake: Path,
    plan_id: str,
    app: str,
    measured: dict[str, float],
    predicted: dict[str, float],
    interval_end: datetime,
) -> None:
    """gold/plans_measured: one row per (plan, query), MERGEd so re-measuring overwrites."""
    rows = [
        {
            "plan_id": plan_id,
            "app": app,
            "query": q,
            "measured_until": interval_end.isoformat(),
            "predicted_rt_ms": float(predicted.get(q, float("nan"))),
            "measured_rt_ms": float(m),
        }
        for q, m in sorted(measured.items())
    ]
    if rows:
        df = spark.createDataFrame(pd.DataFrame(rows))
        merge_insert(spark, df, gold_path(lake, "plans_measured"), ["plan_id", "query"], update=True)
