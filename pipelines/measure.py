"""Measured response time of a plan: silver query metrics of the interval after it went live."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

import pandas as pd
import pyspark.sql.functions as F
from pyspark.sql import SparkSession

from pipelines.delta_io import merge_insert, table_exists
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
    uncorrected: dict[str, float] | None = None,
    rho: dict[str, float] | None = None,
) -> None:
    """gold/plans_measured: one row per (plan, query), MERGEd so re-measuring overwrites.
    ``predicted`` is what the plan published, ``uncorrected`` the method's own prediction
    before any correction (the pairs the nightly correction is fitted on) and ``rho`` the
    plan's bottleneck utilisation per query."""
    nan = float("nan")
    rows = [
        {
            "plan_id": plan_id,
            "app": app,
            "query": q,
            "measured_until": interval_end.isoformat(),
            "predicted_rt_ms": float(predicted.get(q, nan)),
            "measured_rt_ms": float(m),
            "uncorrected_rt_ms": float((uncorrected or predicted).get(q, nan)),
            "rho": float((rho or {}).get(q, nan)),
        }
        for q, m in sorted(measured.items())
    ]
    if rows:
        df = spark.createDataFrame(pd.DataFrame(rows))
        merge_insert(spark, df, gold_path(lake, "plans_measured"), ["plan_id", "query"],
                     update=True, evolve_schema=True)


def measured_pairs(
    spark: SparkSession, lake: Path, app: str, until: datetime
) -> list[tuple[float, float, float]]:
    """``(uncorrected predicted ms, measured ms, ρ)`` of the app's plans measured up to
    ``until``, oldest first; rows without a finite prediction or ρ in [0, 1) are left out
    (rows recorded before ρ was kept have none)."""
    path = gold_path(lake, "plans_measured")
    if not table_exists(spark, path):
        return []
    df = spark.read.format("delta").load(path)
    if "rho" not in df.columns:
        return []
    rows = (
        df.where((F.col("app") == app) & (F.col("measured_until") <= until.isoformat()))
        .where(~F.isnan("uncorrected_rt_ms") & ~F.isnan("rho") & ~F.isnan("measured_rt_ms"))
        .where((F.col("rho") >= 0) & (F.col("rho") < 1) & (F.col("measured_rt_ms") > 0))
        .where(F.col("uncorrected_rt_ms") > 0)
        .orderBy("measured_until", "plan_id", "query")
        .select("uncorrected_rt_ms", "measured_rt_ms", "rho")
        .collect()
    )
    return [(r[0], r[1], r[2]) for r in rows if math.isfinite(r[0])]


def measurements_until(
    spark: SparkSession, lake: Path, app: str, until: datetime
) -> tuple[dict[str, float], dict[str, float]]:
    """Published prediction and measurement per query of the app's plan(s) measured up to
    exactly ``until`` (the hour that ends there)."""
    path = gold_path(lake, "plans_measured")
    if not table_exists(spark, path):
        return {}, {}
    rows = (
        spark.read.format("delta").load(path)
        .where((F.col("app") == app) & (F.col("measured_until") == until.isoformat()))
        .select("query", "predicted_rt_ms", "measured_rt_ms").collect()
    )
    return ({r["query"]: r["predicted_rt_ms"] for r in rows},
            {r["query"]: r["measured_rt_ms"] for r in rows})
