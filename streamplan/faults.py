"""Bad telemetry on purpose: one line per kind of fault the validate stage must quarantine.

Used by the demo (so quarantine is visible) and by the bad-input tests.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from streamplan.config import AppConfig


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def fault_lines(config: AppConfig, at: datetime) -> dict[str, str]:
    """Fault name → one raw NDJSON line exhibiting it, stamped at ``at``."""
    op = config.operators[0].name
    node = config.nodes[0].name
    base = {
        "kind": "operator", "ts": _ts(at), "window_s": config.window_s, "app": config.app,
        "operator": op, "instance": 99, "node": node, "records_in": 10, "records_out": 10,
        "busy_ms": 5.0,
    }

    def line(**changes: object) -> str:
        return json.dumps({**base, **changes})

    return {
        "malformed_json": '{"kind": "operator", "ts": ',
        "not_an_object": "[1, 2, 3]",
        "missing_field": json.dumps({k: v for k, v in base.items() if k != "records_in"}),
        "mistyped_field": line(records_in="ten"),
        "negative_count": line(records_in=-5, instance=98),
        "unknown_operator": line(operator="no_such_operator"),
        "unknown_node": line(node="no-such-node", instance=97),
        "future_timestamp": line(ts=_ts(at + timedelta(days=365)), instance=96),
        "busy_over_capacity": line(busy_ms=config.window_s * 1000 * 50, instance=95),
        "unknown_kind": json.dumps({**base, "kind": "gossip"}),
        "wrong_app": line(app="someone-else", instance=94),
    }


def duplicated(line: str) -> list[str]:
    """The same line twice: the second copy must be quarantined as a duplicate key."""
    return [line, line]
