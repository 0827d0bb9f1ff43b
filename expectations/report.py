"""A self-contained HTML report of one batch's suite results (per table, per expectation)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from html import escape
from typing import Any

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin-bottom: 2em; width: 100%; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.pass { color: #1a7f37; font-weight: bold; }
.fail { color: #cf222e; font-weight: bold; }
code { font-size: 0.9em; }
"""
_COLUMNS = (
    "status", "expectation", "meaning", "unexpected / rows", "sample values", "sample row ids"
)


def _status(success: bool) -> str:
    return '<span class="pass">PASS</span>' if success else '<span class="fail">FAIL</span>'


def _sample(values: list[Any]) -> str:
    return escape(json.dumps(values, default=str)) if values else ""


def _expectation_row(e: Mapping[str, Any]) -> str:
    cells = [
        _status(e["success"]),
        f"<code>{escape(e['rule'])}</code>",
        escape(e["detail"] or ""),
        f"{e['unexpected_count']} / {e['element_count']}",
        _sample(e["sample_values"]),
        _sample(e["sample_row_ids"]),
    ]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _table_section(table: str, result: Mapping[str, Any], counts: Mapping[str, int]) -> str:
    head = (
        f"<h2>{escape(table)} {_status(result['success'])}</h2>"
        f"<p>suite <code>{escape(result['suite'])}</code>: {counts['rows']} rows, "
        f"{counts['failed_rows']} failed; "
        f"{escape(json.dumps(result['statistics']))}</p>"
    )
    if result.get("skipped"):
        return head + f"<p>Not validated: {escape(result['skipped'])}.</p>"
    header = "".join(f"<th>{h}</th>" for h in _COLUMNS)
    rows = "".join(_expectation_row(e) for e in result["expectations"])
    return head + f"<table><tr>{header}</tr>{rows}</table>"


def render_html(
    batch_id: str,
    results: Mapping[str, Mapping[str, Any]],
    counts: Mapping[str, Mapping[str, int]],
) -> str:
    """The report page for one ingest batch: ``results`` are :func:`results.summary` dicts."""
    sections = "".join(_table_section(t, results[t], counts[t]) for t in results)
    title = f"Validation report, batch {escape(batch_id)}"
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{title}</h1>{sections}</body></html>\n"
    )
