"""Reading GE suite results: which expectations failed, the failing rows, a JSON-able summary.

A suite runs in two passes on the same batch: a cheap screening pass (``BOOLEAN_ONLY``: the
row counts of all expectations bundled into a few Spark jobs) and, only for the expectations
that failed, a detail pass (``COMPLETE`` with ``row_id`` as the unexpected index column).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from great_expectations.core import (
    ExpectationSuiteValidationResult,
    ExpectationValidationResult,
)
from great_expectations.expectations.expectation import Expectation

ROW_ID = "row_id"
SAMPLE_SIZE = 20
SCREEN_FORMAT = "BOOLEAN_ONLY"
DETAIL_FORMAT: dict[str, Any] = {
    "result_format": "COMPLETE",
    "unexpected_index_column_names": [ROW_ID],
    "partial_unexpected_count": SAMPLE_SIZE,
}


class ExpectationError(RuntimeError):
    """An expectation raised instead of judging the rows: the batch cannot be split safely."""


@dataclass(frozen=True)
class Failure:
    """One (row, failed expectation)."""

    row_id: str
    rule: str
    field: str
    detail: str


def rule_name(kind: str, kwargs: Mapping[str, Any]) -> str:
    """Expectation type and its column(s), e.g. ``expect_column_values_to_be_between(ts)``."""
    columns = [kwargs["column"]] if "column" in kwargs else [kwargs["column_A"], kwargs["column_B"]]
    return f"{kind}({', '.join(columns)})"


def _rule(result: ExpectationValidationResult) -> str:
    return rule_name(result.expectation_config.type, result.expectation_config.kwargs)


def _exception_messages(result: ExpectationValidationResult) -> list[str]:
    """Errors of an expectation: GE keeps one entry, or one per failed metric."""
    info = result.exception_info or {}
    entries = [info] if "raised_exception" in info else list(info.values())
    return [str(e.get("exception_message")) for e in entries if e.get("raised_exception")]


def _checked(suite_result: ExpectationSuiteValidationResult) -> list[ExpectationValidationResult]:
    for result in suite_result.results:
        if messages := _exception_messages(result):
            raise ExpectationError(f"{_rule(result)} raised: {'; '.join(messages)}")
    return suite_result.results


def failed_expectations(screen: ExpectationSuiteValidationResult) -> list[Expectation]:
    """The expectations that failed in a screening pass (an expectation that raised: error)."""
    return [r.expectation_config.to_domain_obj() for r in _checked(screen) if not r.success]


def failures(detail: ExpectationSuiteValidationResult) -> list[Failure]:
    """Every (row id, failed expectation) of a detail pass."""
    found: list[Failure] = []
    for result in _checked(detail):
        if result.success:
            continue
        meta = result.expectation_config.meta
        rule = _rule(result)
        found.extend(
            Failure(str(index[ROW_ID]), rule, meta["field"], meta["detail"])
            for index in result.result["unexpected_index_list"]
        )
    return found


def _entry(config: Mapping[str, Any], success: bool, outcome: Mapping[str, Any]) -> dict[str, Any]:
    meta = config.get("meta") or {}
    sample_ids = [i[ROW_ID] for i in outcome.get("partial_unexpected_index_list") or []]
    return {
        "rule": rule_name(config["type"], config["kwargs"]),
        "field": meta.get("field"),
        "detail": meta.get("detail"),
        "success": success,
        "element_count": outcome["element_count"],
        "unexpected_count": outcome.get("unexpected_count", 0),
        "sample_values": (outcome.get("partial_unexpected_list") or [])[:SAMPLE_SIZE],
        "sample_row_ids": sample_ids[:SAMPLE_SIZE],
    }


def summary(
    screen: ExpectationSuiteValidationResult,
    detail: ExpectationSuiteValidationResult | None,
    rows: int,
) -> dict[str, Any]:
    """Suite success and statistics, and per expectation (failed first): rule, outcome,
    unexpected count, sample values and row ids."""
    data = screen.to_json_dict()
    failed = [
        _entry(r["expectation_config"], r["success"], r["result"])
        for r in (detail.to_json_dict()["results"] if detail else [])
    ]
    passed = [
        _entry(r["expectation_config"], True, {"element_count": rows})
        for r in data["results"]
        if r["success"]
    ]
    return {
        "suite": data["suite_name"],
        "success": data["success"],
        "statistics": data["statistics"],
        "expectations": failed + passed,
    }


def skipped_summary(suite_name: str, reason: str) -> dict[str, Any]:
    """The summary of a suite that was not run (e.g. on an empty frame)."""
    return {
        "suite": suite_name,
        "success": True,
        "skipped": reason,
        "statistics": {
            "evaluated_expectations": 0,
            "successful_expectations": 0,
            "unsuccessful_expectations": 0,
            "success_percent": None,
        },
        "expectations": [],
    }
