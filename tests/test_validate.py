"""The validate stage on real Spark and real Great Expectations: each rule catches its row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    DoubleType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from expectations import ExpectationError, ValidationContext, build_suite
from pipelines.tables import SILVER_TABLES
from pipelines.validate import ValidationOutcome, validate_candidates

END = datetime(2026, 1, 7, 12, 10, tzinfo=UTC)
CTX = ValidationContext(
    known_operators=frozenset({"source", "filter", "sink"}),
    known_queries=frozenset({"q1"}),
    known_nodes=frozenset({"n1", "n2"}),
    node_cores={"n1": 2, "n2": 4},
    interval_start=END - timedelta(minutes=10),
    interval_end=END,
)
CANDIDATE_COMMON = [
    StructField("row_id", StringType()),
    StructField("kind", StringType()),
    StructField("ts", TimestampType()),
    StructField("ts_raw", StringType()),
    StructField("window_s", DoubleType()),
    StructField("app", StringType()),
]
GOOD: dict[str, dict[str, Any]] = {
    "operator_metrics": {
        "operator": "filter", "instance": 0, "node": "n1", "records_in": 1000,
        "records_out": 400, "busy_ms": 5000.0, "service_ms_sum": 5000.0,
        "service_ms_sqsum": 30000.0, "queue_len": 3,
    },
    "query_metrics": {
        "query": "q1", "events": 400, "rt_ms_sum": 8000.0, "rt_ms_sqsum": 200000.0,
        "rt_p50_ms": 15.0, "rt_p95_ms": 40.0, "rt_p99_ms": 60.0,
    },
    "node_metrics": {"node": "n2", "cpu_util": 0.7, "mem_util": 0.4, "power_w": 90.0},
    "link_metrics": {"src": "n1", "dst": "n2", "latency_ms": 2.5, "bandwidth_mbps": 1000.0},
    "deployments": {
        "placement": '{"filter": [["n1", 2]]}',
        "nodes": '{"n1": {"type": "m5.large", "leased_at": "2026-01-07T11:00:00Z"}}',
    },
}  # fmt: skip


def candidate(spark: SparkSession, table: str, rows: list[dict[str, Any]]) -> DataFrame:
    """A candidate frame of ``table``: each row is a good row updated with its overrides."""
    spec = SILVER_TABLES[table]
    schema = StructType(CANDIDATE_COMMON + list(spec.fields))
    common = {
        "kind": spec.kind,
        "ts": END,
        "ts_raw": END.isoformat(),
        "window_s": 10.0,
        "app": "demo",
    }
    data = [{**common, **GOOD[table], **row} for row in rows]
    return spark.createDataFrame([tuple(d.get(f.name) for f in schema) for d in data], schema)


BAD_ROWS: dict[str, list[dict[str, Any]]] = {
    "operator_metrics": [
        {"row_id": "op_ok"},
        {"row_id": "op_ok_optional_null", "service_ms_sum": None, "queue_len": None},
        {"row_id": "op_ok_late", "ts": END - timedelta(days=2)},
        {"row_id": "op_ok_busy_4_cores", "node": "n2", "busy_ms": 25000.0},
        {"row_id": "op_neg_records_in", "records_in": -1, "records_out": 0},
        {"row_id": "op_busy_over_capacity", "busy_ms": 25000.0},
        {"row_id": "op_unknown_operator", "operator": "mystery"},
        {"row_id": "op_unknown_node", "node": "n9"},
        {"row_id": "op_ok_just_in_time", "ts": END + timedelta(seconds=299)},
        {"row_id": "op_future_ts", "ts": END + timedelta(seconds=301)},
        {"row_id": "op_too_late_ts", "ts": END - timedelta(days=8)},
        {"row_id": "op_unparsed_ts", "ts": None, "ts_raw": "yesterday"},
        {"row_id": "op_null_busy", "busy_ms": None},
        {"row_id": "op_zero_window", "window_s": 0.0, "busy_ms": 0.0},
        {"row_id": "op_implausible_out", "records_in": 1, "records_out": 5000},
        {"row_id": "op_many", "records_in": -5, "records_out": 0, "operator": "mystery",
         "node": "n9"},
    ],
    "query_metrics": [
        {"row_id": "q_ok"},
        {"row_id": "q_unknown", "query": "q9"},
    ],
    "node_metrics": [
        {"row_id": "n_ok"},
        {"row_id": "n_cpu_over_cores", "cpu_util": 5.0},
        {"row_id": "n_mem", "mem_util": 1.5},
    ],
    "link_metrics": [
        {"row_id": "l_ok"},
        {"row_id": "l_unknown_dst", "dst": "n9"},
    ],
    "deployments": [
        {"row_id": "d_ok"},
        {"row_id": "d_invalid_json", "placement": "{not json"},
        {"row_id": "d_array", "nodes": '[["n1", 2]]'},
        {"row_id": "d_null", "nodes": None},
    ],
}


@pytest.fixture(scope="module")
def bad_batch(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> tuple[ValidationOutcome, set[tuple[str, str, str]]]:
    """One validation of all tables with bad rows; the (row_id, rule, field) failures."""
    frames = {t: candidate(spark, t, rows) for t, rows in BAD_ROWS.items()}
    outcome = validate_candidates(spark, frames, CTX, tmp_path_factory.mktemp("rep"), "bad")
    found = {(r.row_id, r.rule, r.field) for r in outcome.failures.collect()}
    return outcome, found


def failed_fields(found: set[tuple[str, str, str]], row_id: str) -> set[str]:
    return {field for rid, _, field in found if rid == row_id}


@pytest.mark.parametrize(
    ("row_id", "field"),
    [
        ("op_neg_records_in", "records_in"),
        ("op_busy_over_capacity", "busy_ms"),
        ("op_unknown_operator", "operator"),
        ("op_unknown_node", "node"),
        ("op_future_ts", "ts"),
        ("op_too_late_ts", "ts"),
        ("op_unparsed_ts", "ts"),
        ("op_null_busy", "busy_ms"),
        ("op_zero_window", "window_s"),
        ("op_implausible_out", "records_out"),
        ("q_unknown", "query"),
        ("n_cpu_over_cores", "cpu_util"),
        ("n_mem", "mem_util"),
        ("l_unknown_dst", "dst"),
        ("d_invalid_json", "placement"),
        ("d_array", "nodes"),
        ("d_null", "nodes"),
    ],
)
def test_each_rule_catches_its_row(bad_batch, row_id: str, field: str) -> None:
    _, found = bad_batch
    assert failed_fields(found, row_id) == {field}


def test_rule_names_and_details(bad_batch) -> None:
    outcome, found = bad_batch
    between = "expect_column_values_to_be_between(records_in)"
    assert ("op_neg_records_in", between, "records_in") in found
    assert ("op_null_busy", "expect_column_values_to_not_be_null(busy_ms)", "busy_ms") in found
    details = {r.row_id: r.detail for r in outcome.failures.collect()}
    assert details["op_neg_records_in"] == "records_in must be >= 0"
    assert details["op_busy_over_capacity"] == "busy_ms must be <= window_s * 1000 * node cores"


def test_good_rows_and_nulls_in_optional_fields_pass(bad_batch) -> None:
    _, found = bad_batch
    ok_rows = {rid for rows in BAD_ROWS.values() for r in rows if "_ok" in (rid := r["row_id"])}
    assert len(ok_rows) == 9
    assert not {rid for rid, _, _ in found} & ok_rows


def test_all_failures_of_one_row_are_reported(bad_batch) -> None:
    outcome, found = bad_batch
    assert failed_fields(found, "op_many") == {"records_in", "operator", "node"}
    assert outcome.failures.filter("row_id = 'op_many'").count() == 3


def test_counts_and_results(bad_batch) -> None:
    outcome, _ = bad_batch
    assert outcome.counts["operator_metrics"] == {"rows": 16, "failed_rows": 11}
    assert outcome.counts["deployments"] == {"rows": 4, "failed_rows": 3}
    result = outcome.results["operator_metrics"]
    assert result["suite"] == "silver.operator_metrics" and result["success"] is False
    by_rule = {e["rule"]: e for e in result["expectations"]}
    records_in = by_rule["expect_column_values_to_be_between(records_in)"]
    assert records_in["unexpected_count"] == 2
    assert sorted(records_in["sample_row_ids"]) == ["op_many", "op_neg_records_in"]
    assert by_rule["expect_column_values_to_not_be_null(operator)"]["success"] is True
    assert len(by_rule) == len(build_suite("operator_metrics", CTX).expectations)


def test_report_names_failed_expectations(bad_batch) -> None:
    outcome, _ = bad_batch
    assert outcome.report_path.name == "validation-bad.html"
    html = outcome.report_path.read_text()
    assert "expect_column_values_to_be_between(records_in)" in html
    assert "records_in must be &gt;= 0" in html and "op_neg_records_in" in html


def test_clean_frame_has_no_failures(
    spark: SparkSession, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Good rows of every table pass in the bad batch too; here a clean frame alone,
    without GE progress bars (TQDM_DISABLE does not reach them: GE passes ``disable``)."""
    rows = [{"row_id": "a"}, {"row_id": "b", "instance": 1, "node": "n2"}]
    frames = {"operator_metrics": candidate(spark, "operator_metrics", rows)}
    outcome = validate_candidates(spark, frames, CTX, tmp_path, "clean")
    assert outcome.failures.count() == 0
    assert outcome.counts == {"operator_metrics": {"rows": 2, "failed_rows": 0}}
    result = outcome.results["operator_metrics"]
    assert result["success"] and result["statistics"]["unsuccessful_expectations"] == 0
    assert "Calculating Metrics" not in capfd.readouterr().err


def test_empty_frames_are_skipped(spark: SparkSession, tmp_path: Path) -> None:
    frames = {t: candidate(spark, t, []) for t in SILVER_TABLES}
    outcome = validate_candidates(spark, frames, CTX, tmp_path, "empty")
    assert outcome.failures.count() == 0
    assert outcome.counts == {t: {"rows": 0, "failed_rows": 0} for t in SILVER_TABLES}
    assert outcome.report_path.is_file()
    assert set(outcome.failures.columns) == {"row_id", "table", "rule", "field", "detail"}


def test_interval_must_be_timezone_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        ValidationContext(frozenset(), frozenset(), frozenset(), {}, datetime(2026, 1, 7), END)


def test_a_broken_expectation_fails_the_batch(spark: SparkSession, tmp_path: Path) -> None:
    frame = candidate(spark, "link_metrics", [{"row_id": "l1"}]).drop("bandwidth_mbps")
    with pytest.raises(ExpectationError, match="bandwidth_mbps"):
        validate_candidates(spark, {"link_metrics": frame}, CTX, tmp_path, "broken")
