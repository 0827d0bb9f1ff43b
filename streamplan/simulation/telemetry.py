"""Telemetry of a simulated interval: per-window records of the telemetry contract."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from streamplan.config import SimNodeTypeSpec
from streamplan.simulation.edgecloud import battery_wh, interfered_util, node_load, power_w
from streamplan.simulation.flow import Trace
from streamplan.simulation.topology import Topology

# Linear power model P = P_idle + (P_busy - P_idle) * util (Fan, Weber & Barroso, "Power
# provisioning for a warehouse-sized computer", ISCA 2007); illustrative 10 W idle, 30 W busy.
_IDLE_W, _DYNAMIC_W = 10.0, 20.0
# Illustrative memory use: a fixed footprint plus buffers growing with the load.
_MEM_BASE, _MEM_PER_UTIL = 0.2, 0.5
_COUNTERS = frozenset({"records_in", "records_out", "queue_len"})


@dataclass(frozen=True)
class Windows:
    """Report windows of ``width`` seconds covering [0, duration]; the last may be shorter."""

    width: float
    duration: float

    @property
    def n(self) -> int:
        return math.ceil(self.duration / self.width - 1e-9)

    @property
    def ends(self) -> np.ndarray:
        return np.minimum((np.arange(self.n) + 1) * self.width, self.duration)

    def index(self, t: np.ndarray) -> np.ndarray:
        """Window of each time; ``n`` for times at or after the end of the interval."""
        idx = np.minimum(np.floor(t / self.width), self.n - 1).astype(np.int64)
        return np.where(t < self.duration, idx, self.n)

    def binned(
        self,
        group: np.ndarray,
        n_groups: int,
        window: np.ndarray,
        weights: np.ndarray | None = None,
    ) -> np.ndarray:
        """[group, window] sums of ``weights`` (counts if None) of items in ``window``."""
        key = group * (self.n + 1) + window
        sums = np.bincount(key, weights, minlength=n_groups * (self.n + 1))
        return sums.reshape(n_groups, self.n + 1)[:, : self.n]


def operator_stats(topo: Topology, trace: Trace, win: Windows) -> dict[str, np.ndarray]:
    """[instance, window] operator counters. Counters and service sums are attributed to the
    window in which each record completes; queue_len counts the records that are available
    at the node (arrived, or produced by an earlier record of the same job) but not yet
    started at the window end."""
    rec, n = trace.records, topo.n_instances
    ms = rec.service * 1000.0
    created = np.cumsum(win.binned(rec.inst, n, win.index(trace.rec_created)), axis=1)
    started = np.cumsum(win.binned(rec.inst, n, win.index(trace.rec_start)), axis=1)
    done = win.index(trace.rec_done)
    service_sum = win.binned(rec.inst, n, done, ms)
    return {
        "records_in": win.binned(rec.inst, n, done),
        "records_out": win.binned(rec.inst, n, done, rec.n_out.astype(float)),
        "busy_ms": service_sum,
        "service_ms_sum": service_sum,
        "service_ms_sqsum": win.binned(rec.inst, n, done, ms * ms),
        "queue_len": created - started,
    }


def typed_counts(
    topo: Topology, trace: Trace, win: Windows
) -> tuple[np.ndarray, np.ndarray]:
    """[instance, window, event type] records in and out per type (``simulation.output_types``),
    attributed like the untyped counters to the window in which each record completes."""
    rec, n, k = trace.records, topo.n_instances, len(topo.event_types)
    done = win.index(trace.rec_done)
    typed = rec.etype >= 0
    key = rec.inst[typed] * k + rec.etype[typed]
    rin = win.binned(key, n * k, done[typed]).reshape(n, k, win.n)
    rout = np.stack(
        [win.binned(rec.inst, n, done, rec.out_counts[:, t].astype(float)) for t in range(k)],
        axis=1,
    ) if k else np.zeros((n, 0, win.n))
    return rin.transpose(0, 2, 1), rout.transpose(0, 2, 1)


def node_utilisation(topo: Topology, trace: Trace, win: Windows) -> np.ndarray:
    """[node, window] exact fraction of core time busy (jobs' service intervals integrated)."""
    util = np.zeros((len(topo.nodes), win.n))
    lengths = np.diff(np.r_[0.0, win.ends])
    for n, ntype in enumerate(topo.types):
        mine = trace.job_node == n
        busy = _busy_until(trace.job_start[mine], trace.job_done[mine], win.ends)
        util[n] = np.diff(np.r_[0.0, busy]) / (lengths * ntype.cores)
    return np.clip(util, 0.0, 1.0)  # exact values lie in [0, 1]; clip float rounding only


def _busy_until(starts: np.ndarray, dones: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Total busy time in [0, T] for each T: sum_i min(T - s_i, S_i)^+ written as
    sum_{s_i<T} (T - s_i) - sum_{d_i<T} (T - d_i)."""
    return _excess(starts, t) - _excess(dones, t)


def _excess(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """sum over x_i < T of (T - x_i), for each T."""
    xs = np.sort(x)
    csum = np.r_[0.0, np.cumsum(xs)]
    k = np.searchsorted(xs, t)
    return k * t - csum[k]


def query_stats(topo: Topology, trace: Trace, event_time: np.ndarray, win: Windows) -> list[list]:
    """[query][window] -> (events, rt sum, rt sqsum, p50, p95, p99) of events completed in it."""
    w = win.index(trace.event_done)
    rt_ms = (trace.event_done - event_time) * 1000.0
    out = []
    for q in range(len(topo.queries)):
        mine = (trace.event_query == q) & (w < win.n)
        order = np.argsort(w[mine], kind="stable")
        rts, ws = rt_ms[mine][order], w[mine][order]
        cuts = np.searchsorted(ws, np.arange(1, win.n))
        out.append([_rt_summary(chunk) for chunk in np.split(rts, cuts)])
    return out


def _rt_summary(rts: np.ndarray) -> tuple:
    if rts.size == 0:
        return 0, 0.0, 0.0, None, None, None
    p50, p95, p99 = np.percentile(rts, [50, 95, 99]).tolist()
    return rts.size, float(rts.sum()), float(np.dot(rts, rts)), p50, p95, p99


def build_records(
    app: str,
    topo: Topology,
    trace: Trace,
    event_time: np.ndarray,
    placement: dict[str, list[tuple[str, int]]],
    start: datetime,
    win: Windows,
    *,
    node_specs: Mapping[str, SimNodeTypeSpec] | None = None,
    links: list[list[dict[str, Any]]] | None = None,
    event_bytes: Mapping[str, float] | None = None,
) -> list[dict[str, Any]]:
    """All telemetry records of the interval, sorted by (ts, kind, ids).

    node_specs: node type -> edge + cloud behaviour (``simulation.node_types``); links: per
    window, the ``link`` records' fields (``edgecloud.link_records``); event_bytes: operator
    -> output event size, reported as ``bytes_out`` = records_out x size."""
    event_bytes = event_bytes or {}
    ops = operator_stats(topo, trace, win)
    typed_in, typed_out = typed_counts(topo, trace, win)
    in_types, out_types = _reported_types(topo)
    node_rows = node_fields(topo, node_utilisation(topo, trace, win), ops["records_in"], win,
                            node_specs or {})
    queries = query_stats(topo, trace, event_time, win)
    deployment = _deployment(topo, placement)
    instances = sorted(enumerate(topo.instances()), key=lambda i: (topo.ops[i[1][0]], i[1][1]))
    nodes = sorted(range(len(topo.nodes)), key=lambda n: topo.nodes[n])
    query_ids = sorted(range(len(topo.queries)), key=lambda q: topo.queries[q])
    lengths = np.diff(np.r_[0.0, win.ends]).tolist()
    records: list[dict[str, Any]] = []
    for k, end in enumerate(win.ends.tolist()):
        ts = _iso(start + timedelta(seconds=end))
        head = {"ts": ts, "window_s": lengths[k], "app": app}
        records.append({"kind": "deployment", **head, **deployment})
        records += [{"kind": "link", **head, **fields} for fields in (links[k] if links else [])]
        records += [{"kind": "node", **head, **node_rows[n][k]} for n in nodes]
        for g, (o, r, n) in instances:
            ids = {"operator": topo.ops[o], "instance": r, "node": topo.nodes[n]}
            fields = {name: _cast(name, v[g, k]) for name, v in ops.items()}
            if in_types[o]:
                fields["records_in_by_type"] = _by_type(topo, typed_in[g, k], in_types[o])
            if out_types[o]:
                fields["records_out_by_type"] = _by_type(topo, typed_out[g, k], out_types[o])
            if topo.ops[o] in event_bytes:
                fields["bytes_out"] = round(fields["records_out"] * event_bytes[topo.ops[o]])
            records.append({"kind": "operator", **head, **ids, **fields})
        records += [
            {"kind": "query", **head, **_query_fields(topo.queries[q], queries[q][k])}
            for q in query_ids
        ]
    return records


def node_fields(
    topo: Topology,
    util: np.ndarray,
    records_in: np.ndarray,
    win: Windows,
    specs: Mapping[str, SimNodeTypeSpec],
) -> list[list[dict[str, Any]]]:
    """[node][window] fields of the ``node`` records. A node whose type is in ``specs``
    reports the interfered utilisation, κ + ε·ω power (when κ is given) and the battery
    drained by that power (when a charge is given); see ``simulation.edgecloud``."""
    busy_ops, records = node_load(topo, records_in) if specs else (None, None)
    lengths = np.diff(np.r_[0.0, win.ends])
    rows = []
    for n, ntype in enumerate(topo.types):
        spec = specs.get(ntype.name)
        u = util[n] if spec is None else interfered_util(util[n], busy_ops[n],
                                                          spec.interference_slope)
        fields = [_node_fields(topo.nodes[n], x) for x in u.tolist()]
        if spec is not None:
            _add_power(fields, spec, records[n], lengths)
        rows.append(fields)
    return rows


def _add_power(
    fields: list[dict[str, Any]], spec: SimNodeTypeSpec, records: np.ndarray, lengths: np.ndarray
) -> None:
    if spec.idle_power_w is not None:
        power = power_w(spec.idle_power_w, spec.energy_j_per_event, records, lengths)
        for f, p in zip(fields, power.tolist()):
            f["power_w"] = p
    if spec.battery_wh is not None:
        power = np.array([f["power_w"] for f in fields])
        for f, b in zip(fields, battery_wh(spec.battery_wh, power, lengths).tolist()):
            f["battery_wh"] = b


def _reported_types(topo: Topology) -> tuple[list[list[int]], list[list[int]]]:
    """Per operator, the event types its records_in/out_by_type report: the types its
    typed predecessors emit, and the types of its own output mix."""
    def emitted(o: int) -> set[int]:
        mix = topo.output_mix[o]
        return set() if mix is None else set(np.flatnonzero(mix > 0).tolist())

    ins = [sorted(set().union(*(emitted(p) for p in preds))) for preds in topo.preds]
    return ins, [sorted(emitted(o)) for o in range(len(topo.ops))]


def _by_type(topo: Topology, counts: np.ndarray, types: list[int]) -> dict[str, int]:
    return {topo.event_types[t]: int(counts[t]) for t in types}


def _node_fields(node: str, util: float) -> dict[str, Any]:
    return {
        "node": node,
        "cpu_util": float(util),
        "mem_util": _MEM_BASE + _MEM_PER_UTIL * float(util),
        "power_w": _IDLE_W + _DYNAMIC_W * float(util),
    }


def _query_fields(query: str, stats: tuple) -> dict[str, Any]:
    events, total, sqsum, p50, p95, p99 = stats
    return {"query": query, "events": int(events), "rt_ms_sum": total, "rt_ms_sqsum": sqsum,
            "rt_p50_ms": p50, "rt_p95_ms": p95, "rt_p99_ms": p99}


def _deployment(topo: Topology, placement: dict[str, list[tuple[str, int]]]) -> dict[str, Any]:
    nodes = {
        name: {"type": t.name, "leased_at": None, "billing_unit_s": t.billing_unit_s}
        for name, t in zip(topo.nodes, topo.types)
    }
    return {
        "placement": {op: [[n, int(r)] for n, r in entries] for op, entries in placement.items()},
        "nodes": nodes,
    }


def _cast(field: str, value: np.floating) -> int | float:
    """Counters as int (they are exact integers), times as float."""
    return int(value) if field in _COUNTERS else float(value)


def _iso(t: datetime) -> str:
    """ISO-8601 UTC with a 'Z' suffix, e.g. 2026-01-01T00:00:10Z (milliseconds if fractional)."""
    spec = "seconds" if t.microsecond == 0 else "milliseconds"
    return t.isoformat(timespec=spec).replace("+00:00", "Z")


def write_ndjson(records: list[dict], path: Path) -> Path:
    """Write atomically (temp file in the same dir + fsync + os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for record in records:
                fh.write(json.dumps(record, separators=(",", ":")) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
