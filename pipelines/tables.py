"""Table layout and typed schemas of the telemetry contract (design.md, Delta layout).

One definition per table: the raw JSON schema each ``kind`` is parsed with, its natural key
(for the idempotent MERGE) and its place in the lake.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql.types import (
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

COMMON = [
    StructField("kind", StringType()),
    StructField("ts", StringType()),
    StructField("window_s", DoubleType()),
    StructField("app", StringType()),
]


@dataclass(frozen=True)
class SilverTable:
    """A silver table: the telemetry ``kind`` it holds, its typed fields and natural key."""

    name: str
    kind: str
    fields: tuple[StructField, ...]
    key: tuple[str, ...]
    required: tuple[str, ...]

    @property
    def json_schema(self) -> StructType:
        """Schema used to parse the raw line (``ts`` stays a string until validated)."""
        return StructType(COMMON + list(self.fields))


def _f(name: str, kind) -> StructField:
    return StructField(name, kind)


SILVER_TABLES: dict[str, SilverTable] = {
    t.name: t
    for t in [
        SilverTable(
            "operator_metrics",
            "operator",
            (
                _f("operator", StringType()),
                _f("instance", LongType()),
                _f("node", StringType()),
                _f("records_in", LongType()),
                _f("records_out", LongType()),
                _f("busy_ms", DoubleType()),
                _f("service_ms_sum", DoubleType()),
                _f("service_ms_sqsum", DoubleType()),
                _f("queue_len", LongType()),
                _f("records_in_by_type", MapType(StringType(), LongType())),
                _f("records_out_by_type", MapType(StringType(), LongType())),
                _f("bytes_out", LongType()),  # optional: bytes of the output events
                _f("busy_ms_by_type", MapType(StringType(), DoubleType())),
            ),
            key=("app", "ts", "operator", "instance"),
            required=("operator", "instance", "node", "records_in", "records_out", "busy_ms"),
        ),
        SilverTable(
            "query_metrics",
            "query",
            (
                _f("query", StringType()),
                _f("events", LongType()),
                _f("rt_ms_sum", DoubleType()),
                _f("rt_ms_sqsum", DoubleType()),
                _f("rt_p50_ms", DoubleType()),
                _f("rt_p95_ms", DoubleType()),
                _f("rt_p99_ms", DoubleType()),
            ),
            key=("app", "ts", "query"),
            required=("query", "events", "rt_ms_sum"),
        ),
        SilverTable(
            "node_metrics",
            "node",
            (
                _f("node", StringType()),
                _f("cpu_util", DoubleType()),
                _f("mem_util", DoubleType()),
                _f("power_w", DoubleType()),
                _f("battery_wh", DoubleType()),
            ),
            key=("app", "ts", "node"),
            required=("node", "cpu_util"),
        ),
        SilverTable(
            "link_metrics",
            "link",
            (
                _f("src", StringType()),
                _f("dst", StringType()),
                _f("latency_ms", DoubleType()),
                _f("bandwidth_mbps", DoubleType()),
            ),
            key=("app", "ts", "src", "dst"),
            required=("src", "dst", "latency_ms"),
        ),
        SilverTable(
            "deployments",
            "deployment",
            (
                # operator -> [[node, replicas]] and node -> {type, leased_at, billing_unit_s},
                # kept as JSON text: their shape varies by method and is parsed by the fit stage.
                _f("placement", StringType()),
                _f("nodes", StringType()),
            ),
            key=("app", "ts"),
            required=("placement", "nodes"),
        ),
    ]
}
KIND_TO_TABLE = {t.kind: t for t in SILVER_TABLES.values()}
GOLD_TABLES = ("operator_models", "query_models", "plans_measured")


def bronze_path(lake: Path) -> str:
    """Append-only raw lines."""
    return str(lake / "bronze" / "telemetry")


def silver_path(lake: Path, table: str) -> str:
    """Typed, validated, partitioned by date."""
    return str(lake / "silver" / table)


def quarantine_path(lake: Path) -> str:
    """Rejected lines with the rule that failed."""
    return str(lake / "silver" / "quarantine")


def gold_path(lake: Path, table: str) -> str:
    """Fitted models and measured plans."""
    return str(lake / "gold" / table)
