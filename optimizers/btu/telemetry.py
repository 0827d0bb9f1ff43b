"""A replay's monitoring windows as telemetry-contract records (design.md, "Telemetry
contract"), so a simulated run can be landed and ingested like any other telemetry.

Per window: one ``deployment`` record (placement and, per VM, its type, ``leased_at`` and
billing unit: the BTU clock the ``btu`` method needs), one ``node`` record per VM (CPU
utilisation = busy time of its instances / window, in cores) and one ``operator`` record
per instance. The simulator keeps one shared queue per operator type, so an operator's
window figures are split evenly over its instances (remainders to the first ones).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from .replay import ReplayResult

__all__ = ["telemetry_records"]


def _iso(t: datetime) -> str:
    spec = "seconds" if t.microsecond == 0 else "milliseconds"
    return t.astimezone(UTC).isoformat(timespec=spec).replace("+00:00", "Z")


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(int(total), parts)
    return [base + (1 if k < extra else 0) for k in range(parts)]


def telemetry_records(
    run: ReplayResult,
    *,
    app: str,
    start: datetime,
    node_type: str,
    cores: int = 4,
) -> list[dict[str, Any]]:
    """Contract records of every recorded window (``replay(..., record_telemetry=True)``)."""
    if not run.windows:
        raise ValueError("run has no recorded windows: replay with record_telemetry=True")
    if start.tzinfo is None:
        raise ValueError(f"start must be timezone-aware, got {start!r}")
    records: list[dict[str, Any]] = []
    for w in run.windows:
        window_s = float(w["window_s"])
        ts = _iso(start + timedelta(seconds=w["t_s"]))
        head = {"ts": ts, "window_s": window_s, "app": app}
        placement = w["placement"]
        records.append({
            "kind": "deployment", **head,
            "placement": {op: [[n, int(k)] for n, k in entries] for op, entries in
                          placement.items()},
            "nodes": {h: {"type": node_type,
                          "leased_at": _iso(start + timedelta(seconds=at)),
                          "billing_unit_s": int(run.btu_s)}
                      for h, at in w["leased_at"].items()},
        })
        busy_by_node: dict[str, float] = dict.fromkeys(w["leased_at"], 0.0)
        for op, (arrivals, emitted, service_ms, queue) in w["operators"].items():
            hosts = [h for h, k in placement.get(op, []) for _ in range(int(k))]
            n = max(len(hosts), 1)
            ins, outs, queues = _split(arrivals, n), _split(emitted, n), _split(queue, n)
            for i, host in enumerate(hosts):
                busy = min(service_ms / n, window_s * 1000.0)
                busy_by_node[host] = busy_by_node.get(host, 0.0) + busy
                records.append({
                    "kind": "operator", **head, "operator": op, "instance": i, "node": host,
                    "records_in": ins[i], "records_out": outs[i], "busy_ms": busy,
                    "service_ms_sum": service_ms / n, "queue_len": queues[i],
                })
        for host, busy in busy_by_node.items():
            records.append({"kind": "node", **head, "node": host,
                            "cpu_util": min(busy / (window_s * 1000.0), float(cores))})
    return records
