"""Landing → bronze → validate → silver/quarantine on real Spark, Delta and Great Expectations.

Every bad input ends in quarantine with a reason naming the field and value, nothing is lost
(rows landed = silver + quarantine), and re-ingesting changes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyspark.sql.functions as F
import pytest

from pipelines.delta_io import table_version
from pipelines.tables import SILVER_TABLES, bronze_path, quarantine_path, silver_path
from streamplan import stages
from streamplan.faults import duplicated, fault_lines
from streamplan.config import load_config
from streamplan.publish import atomic_write
from streamplan.settings import load_settings
from tests.conftest import DEMO_CONFIG

START = datetime(2026, 1, 1, tzinfo=UTC)
INTERVAL = stages.Interval(START, START + timedelta(seconds=60))


def _land(settings, name: str, text: str | bytes) -> Path:
    path = stages.landing_dir(settings, "kitchen") / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def _silver_total(spark, settings) -> int:
    total = 0
    for t in SILVER_TABLES:
        p = silver_path(settings.lake, t)
        if table_version(spark, p) >= 0:
            total += spark.read.format("delta").load(p).count()
    return total


def _quarantine(spark, settings):
    return spark.read.format("delta").load(quarantine_path(settings.lake))


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    """One home for the module: the tests below read one ingest, then re-ingest in order."""
    return load_settings(tmp_path_factory.mktemp("ingest") / "home")


@pytest.fixture(scope="module")
def landed(spark, settings):
    """Simulated telemetry for one minute plus a file of every fault, ingested and validated."""
    demo_config = load_config(DEMO_CONFIG)
    placement = dict(demo_config.deployment)
    types = {n.name: n.type for n in demo_config.nodes}
    stages.simulate_telemetry(settings, demo_config, placement, types, INTERVAL, 0.0)
    faults = fault_lines(demo_config, INTERVAL.end)
    _land(settings, "faults.ndjson", "\n".join([*faults.values(), *duplicated(faults["wrong_app"])[1:]]) + "\n")
    _land(settings, "empty.ndjson", "")
    _land(settings, "binary.bin", b"\x00\x01\x02garbage\xff")
    ingest = stages.run_ingest(spark, settings, demo_config, INTERVAL)
    report = stages.run_validate(spark, settings, demo_config, INTERVAL)
    return faults, ingest, report


def test_nothing_is_lost(spark, settings, landed) -> None:
    _, ingest, report = landed
    bronze = spark.read.format("delta").load(bronze_path(settings.lake)).count()
    assert ingest.rows_landed == bronze == report.rows_in
    assert _silver_total(spark, settings) + _quarantine(spark, settings).count() == bronze
    assert report.quarantined == _quarantine(spark, settings).count()


@pytest.mark.parametrize(
    ("fault", "rule", "field", "value", "reason"),
    [
        ("malformed_json", "json", "<line>", None, "not a JSON object"),
        ("not_an_object", "json", "<line>", None, "not a JSON object: [1, 2, 3]"),
        ("missing_field", None, "records_in", None, "records_in"),
        ("mistyped_field", "type(records_in)", "records_in", "ten",
         "records_in must be bigint, got ten"),
        ("negative_count", None, "records_in", "-5", "records_in"),
        ("unknown_operator", None, "operator", "no_such_operator", "operator"),
        ("unknown_node", None, "node", "no-such-node", "node"),
        ("future_timestamp", None, "ts", "2027-01-01T00:01:00Z", "ts"),
        ("busy_over_capacity", None, "busy_ms", "500000.0", "busy_ms"),
        ("unknown_kind", "known(kind)", "kind", "gossip", "unknown kind 'gossip'"),
        ("wrong_app", "known(app)", "app", "someone-else", "does not match landing app"),
    ],
)
def test_each_fault_is_quarantined_with_its_reason(
    spark, settings, landed, fault, rule, field, value, reason
) -> None:
    faults, _, _ = landed
    q = _quarantine(spark, settings).where(F.col("raw") == faults[fault]).collect()
    assert len(q) >= 1, f"{fault} not quarantined"
    row = q[0]
    assert row.field == field
    assert rule is None or row.rule == rule
    assert value is None or row.value == value
    assert reason in row.reason
    assert row.batch_id and row.source_file.endswith("faults.ndjson")


def test_duplicate_line_is_quarantined_once(spark, settings, landed) -> None:
    faults, _, _ = landed
    q = _quarantine(spark, settings).where(F.col("raw") == faults["wrong_app"]).count()
    assert q == 2, "both copies are bad (wrong app); each is kept in quarantine"


def test_whole_files_are_single_entries(spark, settings, landed) -> None:
    q = _quarantine(spark, settings).where(F.col("rule") == "file").collect()
    reasons = sorted(r.reason for r in q)
    assert len(reasons) == 2
    assert "binary file" in reasons[0] and "empty file" in reasons[1]


def test_reingest_changes_nothing(spark, settings, demo_config, landed) -> None:
    paths = [bronze_path(settings.lake), quarantine_path(settings.lake)] + [
        silver_path(settings.lake, t) for t in ("operator_metrics", "query_metrics")
    ]
    before = {p: table_version(spark, p) for p in paths}
    silver_before = _silver_total(spark, settings)
    again = stages.run_ingest(spark, settings, demo_config, INTERVAL)
    report = stages.run_validate(spark, settings, demo_config, INTERVAL)
    assert again.rows_landed == 0 and len(again.files_skipped) == 4
    assert report.rows_in == 0
    assert {p: table_version(spark, p) for p in paths} == before
    assert _silver_total(spark, settings) == silver_before


def test_duplicate_and_late_records_across_files(spark, settings, demo_config, landed) -> None:
    ops = spark.read.format("delta").load(silver_path(settings.lake, "operator_metrics"))
    existing = ops.where(F.col("operator") == "spoon_window").orderBy("ts").first()
    late_ts = (START - timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    dup = existing.asDict()
    line_dup = (
        '{"kind":"operator","ts":"%s","window_s":10,"app":"kitchen","operator":"spoon_window",'
        '"instance":%d,"node":"%s","records_in":1,"records_out":1,"busy_ms":1.0}'
        % (dup["ts"].strftime("%Y-%m-%dT%H:%M:%SZ"), dup["instance"], dup["node"])
    )
    line_late = line_dup.replace(dup["ts"].strftime("%Y-%m-%dT%H:%M:%SZ"), late_ts)
    atomic_write(stages.landing_dir(settings, "kitchen") / "late.ndjson", f"{line_dup}\n{line_late}\n")
    stages.run_ingest(spark, settings, demo_config, INTERVAL)
    report = stages.run_validate(spark, settings, demo_config, INTERVAL)
    assert report.rows_in == 2
    assert report.silver["operator_metrics"] == 1, "the late record is merged in"
    assert report.rules == {"unique(key)": 1}, "the re-sent key is quarantined, not double-counted"
    q = _quarantine(spark, settings).where(F.col("raw") == line_dup).first()
    assert "key already in silver" in q.reason
