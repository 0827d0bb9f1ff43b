"""Great Expectations suites as code: one suite per silver table (design.md, Validation).

Every rule is defined once, here, as a GE expectation whose ``meta`` names the ``field`` it
guards and a human readable ``detail``; the validate stage derives quarantine from GE's own
results. Rules that need a per-row bound use a column added by :mod:`expectations.derived`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

import great_expectations as gx
import great_expectations.expectations as gxe
from great_expectations.expectations.expectation import Expectation

from expectations import derived
from pipelines.tables import SILVER_TABLES

COMMON_REQUIRED = ("ts", "window_s", "app")


@dataclass(frozen=True)
class ValidationContext:
    """What a batch is checked against: the deployment's known entities and the interval."""

    known_operators: frozenset[str]
    known_queries: frozenset[str]
    known_nodes: frozenset[str]
    node_cores: Mapping[str, int]
    interval_start: datetime
    interval_end: datetime
    late_tolerance_s: float = 7 * 86400
    future_tolerance_s: float = 300.0
    max_selectivity: float = 1000.0

    def __post_init__(self) -> None:
        if self.interval_start.tzinfo is None or self.interval_end.tzinfo is None:
            raise ValueError("interval_start and interval_end must be timezone-aware (UTC)")

    @property
    def max_cores(self) -> int:
        """Cores assumed for a node missing from ``node_cores`` (1 if none is known)."""
        return max(self.node_cores.values(), default=1)

    @property
    def ts_min(self) -> datetime:
        return self.interval_start - timedelta(seconds=self.late_tolerance_s)

    @property
    def ts_max(self) -> datetime:
        return self.interval_end + timedelta(seconds=self.future_tolerance_s)


def _meta(field: str, detail: str) -> dict[str, str]:
    return {"field": field, "detail": detail}


def _not_null(column: str) -> Expectation:
    return gxe.ExpectColumnValuesToNotBeNull(
        column=column, meta=_meta(column, f"{column} is required (missing or mistyped)")
    )


def _at_least(column: str, low: float = 0, strict: bool = False) -> Expectation:
    op = ">" if strict else ">="
    return gxe.ExpectColumnValuesToBeBetween(
        column=column,
        min_value=low,
        strict_min=strict,
        meta=_meta(column, f"{column} must be {op} {low:g}"),
    )


def _between(column: str, low: float, high: float) -> Expectation:
    return gxe.ExpectColumnValuesToBeBetween(
        column=column,
        min_value=low,
        max_value=high,
        meta=_meta(column, f"{column} must be in [{low:g}, {high:g}]"),
    )


def _known(column: str, values: Iterable[str], what: str) -> Expectation:
    return gxe.ExpectColumnValuesToBeInSet(
        column=column,
        value_set=sorted(values),
        meta=_meta(column, f"{column} must be a known {what}"),
    )


def _at_most_bound(column: str, bound: str, detail: str) -> Expectation:
    """``column <= bound`` row by row; rows where either side is null are not judged."""
    return gxe.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A=bound,
        column_B=column,
        or_equal=True,
        ignore_row_if="either_value_is_missing",
        meta=_meta(column, detail),
    )


def _json_object(column: str) -> Expectation:
    return gxe.ExpectColumnValuesToBeInSet(
        column=derived.json_object_flag(column),
        value_set=[True],
        meta=_meta(column, f"{column} must be a JSON object"),
    )


def _common(table: str, ctx: ValidationContext) -> list[Expectation]:
    required = SILVER_TABLES[table].required + COMMON_REQUIRED
    ts_range = gxe.ExpectColumnValuesToBeBetween(
        column="ts",
        min_value=ctx.ts_min,
        max_value=ctx.ts_max,
        meta=_meta("ts", f"ts must be in [{ctx.ts_min.isoformat()}, {ctx.ts_max.isoformat()}]"),
    )
    return [*(_not_null(c) for c in required), _at_least("window_s", strict=True), ts_range]


def _operator(ctx: ValidationContext) -> list[Expectation]:
    non_negative = (
        "instance", "records_in", "records_out", "queue_len", "busy_ms", "service_ms_sum",
        "service_ms_sqsum", "bytes_out",
    )  # fmt: skip
    return [
        *(_at_least(c) for c in non_negative),
        _at_most_bound(
            "busy_ms", derived.BUSY_CAPACITY_MS, "busy_ms must be <= window_s * 1000 * node cores"
        ),
        _at_most_bound(
            "records_out",
            derived.RECORDS_OUT_BOUND,
            f"records_out must be <= {ctx.max_selectivity:g} * records_in + 1",
        ),
        _known("operator", ctx.known_operators, "operator"),
        _known("node", ctx.known_nodes, "node"),
    ]


def _query(ctx: ValidationContext) -> list[Expectation]:
    stats = ("events", "rt_ms_sum", "rt_ms_sqsum", "rt_p50_ms", "rt_p95_ms", "rt_p99_ms")
    return [*(_at_least(c) for c in stats), _known("query", ctx.known_queries, "query")]


def _node(ctx: ValidationContext) -> list[Expectation]:
    return [
        _at_least("cpu_util"),
        _at_most_bound("cpu_util", derived.CPU_CAPACITY, "cpu_util must be <= node cores"),
        _between("mem_util", 0, 1),
        _at_least("power_w"),
        _at_least("battery_wh"),
        _known("node", ctx.known_nodes, "node"),
    ]


def _link(ctx: ValidationContext) -> list[Expectation]:
    return [
        _at_least("latency_ms"),
        _at_least("bandwidth_mbps", strict=True),  # seed 004 E2 divides by it (δ/β)
        _known("src", ctx.known_nodes, "node"),
        _known("dst", ctx.known_nodes, "node"),
    ]


def _deployment(ctx: ValidationContext) -> list[Expectation]:
    return [_json_object(c) for c in derived.JSON_OBJECT_COLUMNS]


_TABLE_RULES = {
    "operator_metrics": _operator,
    "query_metrics": _query,
    "node_metrics": _node,
    "link_metrics": _link,
    "deployments": _deployment,
}


def build_suite(table: str, ctx: ValidationContext) -> gx.ExpectationSuite:
    """One suite per silver table (names: ``silver.<table>``)."""
    expectations = _common(table, ctx) + _TABLE_RULES[table](ctx)
    return gx.ExpectationSuite(name=f"silver.{table}", expectations=expectations)
