"""``flink-rest`` source adapter: Flink's REST API → telemetry-contract records.

Two scrapes of a running job a window apart become one window of ``operator`` records
(operator = job vertex name, instance = subtask index, node = the task manager's node name;
``records_in``/``records_out`` from the ``numRecordsIn``/``numRecordsOut`` counter deltas,
``busy_ms`` = ``busyTimeMsPerSecond`` × window, design.md "Telemetry contract") and the
``deployment`` in force (parallelism per vertex). A metric that is missing or NaN (Flink
reports NaN early in a job's life) is written as null, so validation quarantines the row
with its reason, and is reported as a :class:`Problem` naming job, vertex and metric.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streamplan.simulation.telemetry import write_ndjson

COUNTERS = ("numRecordsIn", "numRecordsOut")
GAUGES = ("busyTimeMsPerSecond", "backPressuredTimeMsPerSecond")


class FlinkRestError(ValueError):
    """The REST API could not be reached or answered something unusable."""


class JobNotRunningError(FlinkRestError):
    """No running job of that id or name."""


class FlinkRest:
    """A tiny JSON client of Flink's REST API at ``url`` (e.g. ``http://127.0.0.1:8081``)."""

    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        self.url, self.timeout_s = url.rstrip("/"), timeout_s

    def get(self, path: str) -> Any:
        """GET ``path`` and decode its JSON; any failure is a :class:`FlinkRestError`."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=self.timeout_s) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise FlinkRestError(f"Flink REST {self.url}{path}: HTTP {exc.code}") from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise FlinkRestError(f"Flink REST {self.url}{path} unreachable: {exc}") from exc


@dataclass(frozen=True)
class Problem:
    """A value the scrape could not use: which job, vertex, subtask and metric, and why."""

    job: str
    vertex: str
    subtask: int | None
    metric: str
    reason: str

    def __str__(self) -> str:
        where = self.vertex if self.subtask is None else f"{self.vertex}[{self.subtask}]"
        return f"job {self.job}, vertex {where}, metric {self.metric}: {self.reason}"


@dataclass(frozen=True)
class Subtask:
    """One subtask's metrics at scrape time (NaN where missing or unparsable)."""

    vertex: str
    index: int
    taskmanager: str
    metrics: dict[str, float]


@dataclass(frozen=True)
class Scrape:
    """A running job's vertices (name -> (id, parallelism)) and subtasks at time ``at``."""

    job_id: str
    job_name: str
    at: datetime
    vertices: dict[str, tuple[str, int]]
    subtasks: dict[tuple[str, int], Subtask]
    taskmanagers: tuple[str, ...]


def running_job(rest: FlinkRest, name: str | None = None) -> str:
    """Id of the running job (named ``name`` if given); :class:`JobNotRunningError` if none."""
    jobs = rest.get("/jobs/overview")["jobs"]
    running = [j for j in jobs if j["state"] == "RUNNING" and name in (None, j["name"])]
    if len(running) != 1:
        states = ", ".join(f"{j['name']} ({j['jid']}): {j['state']}" for j in jobs) or "no jobs"
        raise JobNotRunningError(
            f"Flink REST {rest.url}: expected one running job{f' named {name!r}' if name else ''}, "
            f"found {len(running)} ({states})"
        )
    return running[0]["jid"]


def scrape(rest: FlinkRest, job_id: str) -> Scrape:
    """Vertices, subtasks (task manager, counters, gauges) and task managers of a job."""
    job = rest.get(f"/jobs/{job_id}")
    if job.get("state") != "RUNNING":
        raise JobNotRunningError(
            f"Flink job {job.get('name', '?')} ({job_id}) is {job.get('state')}"
        )
    at = datetime.now(UTC)
    wanted = COUNTERS + GAUGES
    vertices, subtasks = {}, {}
    for vertex in job["vertices"]:
        vid, name, p = vertex["id"], vertex["name"], int(vertex["parallelism"])
        vertices[name] = (vid, p)
        detail = rest.get(f"/jobs/{job_id}/vertices/{vid}")
        ids = ",".join(f"{s['subtask']}.{m}" for s in detail["subtasks"] for m in wanted)
        answer = rest.get(f"/jobs/{job_id}/vertices/{vid}/metrics?get={ids}")
        values = {m["id"]: m.get("value") for m in answer}
        for s in detail["subtasks"]:
            i = int(s["subtask"])
            metrics = {m: _number(values.get(f"{i}.{m}")) for m in wanted}
            subtasks[name, i] = Subtask(name, i, s.get("taskmanager-id", ""), metrics)
    listed = sorted(rest.get("/taskmanagers")["taskmanagers"], key=lambda t: t["path"])
    tms = tuple(tm["id"] for tm in listed)
    return Scrape(job_id, job["name"], at, vertices, subtasks, tms)


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def window_records(
    app: str,
    before: Scrape,
    after: Scrape,
    operators: list[str],
    nodes: dict[str, str],
    node_info: dict[str, dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[Problem]]:
    """``operator`` records for ``operators`` (job vertex names) over the window between two
    scrapes, and the ``deployment`` record of ``after``. ``nodes`` maps task manager id ->
    node name, ``node_info`` node name -> its deployment entry (type, leased_at,
    billing_unit_s). Returns the records and the problems."""
    if before.job_id != after.job_id:
        raise FlinkRestError(f"scrapes of different jobs: {before.job_id} then {after.job_id}")
    window_s = (after.at - before.at).total_seconds()
    if window_s <= 0:
        raise FlinkRestError(f"window must be > 0 s, got {window_s} (scrapes out of order)")
    head = {"ts": after.at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "window_s": window_s, "app": app}
    job = f"{after.job_name} ({after.job_id})"
    problems = [Problem(job, op, None, "parallelism", "vertex missing from the running job")
                for op in operators if op not in after.vertices]
    stale = not counters_moved(before, after)
    if stale:
        problems.append(Problem(job, "*", None, "numRecordsIn/numRecordsOut",
                                "no counter moved between the scrapes: metrics not refreshed"))
    records = []
    for (vertex, index), sub in sorted(after.subtasks.items()):
        if vertex not in operators:
            continue
        prev = before.subtasks.get((vertex, index))
        values: dict[str, float] = {}
        for counter, field in zip(COUNTERS, ("records_in", "records_out")):
            earlier = prev.metrics[counter] if prev and not stale else math.nan
            values[field] = sub.metrics[counter] - earlier
        values["busy_ms"] = sub.metrics["busyTimeMsPerSecond"] * window_s
        if values["records_in"] == 0 and values["busy_ms"] > 0.5 * window_s * 1000:
            # seen in the first seconds of a job: busy gauge up, counters not yet reported
            problems.append(Problem(job, vertex, index, "numRecordsIn",
                                    f"busy {values['busy_ms']:.0f} ms with no records in"))
            values["records_in"] = values["records_out"] = math.nan
        fields = {}
        for field, value in values.items():
            ok = math.isfinite(value) and value >= 0
            if not ok:
                reason = f"value {value}"
                if prev is None:
                    reason = "no earlier scrape of this subtask"
                elif stale and field != "busy_ms":
                    reason = "stale counters"
                problems.append(Problem(job, vertex, index, field, reason))
            fields[field] = (round(value) if field != "busy_ms" else value) if ok else None
        node = nodes.get(sub.taskmanager)
        if node is None:
            problems.append(Problem(job, vertex, index, "taskmanager-id",
                                    f"unknown task manager {sub.taskmanager!r}"))
        records.append({"kind": "operator", **head, "operator": vertex, "instance": index,
                        "node": node or sub.taskmanager, **fields})
    placement: dict[str, dict[str, int]] = {op: {} for op in operators if op in after.vertices}
    for (vertex, _), sub in after.subtasks.items():
        if vertex in placement:
            node = nodes.get(sub.taskmanager, sub.taskmanager)
            placement[vertex][node] = placement[vertex].get(node, 0) + 1
    records.append({
        "kind": "deployment", **head,
        "placement": {
            op: [[n, c] for n, c in sorted(by_node.items())] for op, by_node in placement.items()
        },
        "nodes": {n: node_info[n] for n in sorted(set(nodes.values())) if n in node_info},
    })
    return records, problems


def counters_moved(before: Scrape, after: Scrape) -> bool:
    """Whether any record counter of the job changed between two scrapes (Flink's REST API
    serves metrics fetched every ``metrics.fetcher.update-interval``; on a loaded machine a
    fetch can be late)."""
    return any(
        sub.metrics[c] != before.subtasks[key].metrics[c]
        for key, sub in after.subtasks.items() if key in before.subtasks
        for c in COUNTERS
    )


def node_map(scrape_: Scrape, node_names: list[str]) -> dict[str, str]:
    """Task manager id -> node name: the i-th task manager (by its RPC path) is the i-th
    node of the config. A MiniCluster names its task managers with random ids."""
    if len(scrape_.taskmanagers) > len(node_names):
        raise FlinkRestError(
            f"job {scrape_.job_id} runs on {len(scrape_.taskmanagers)} task managers but the "
            f"config names {len(node_names)} nodes: {node_names}"
        )
    return dict(zip(scrape_.taskmanagers, node_names))


def collect(
    rest: FlinkRest,
    app: str,
    operators: list[str],
    node_info: dict[str, dict[str, Any]],
    window_s: float,
    landing: Path,
    job_id: str | None = None,
    stale_retries: int = 5,
    attempts: int = 1,
) -> tuple[Path, list[Problem]]:
    """Scrape a running job twice ``window_s`` apart and write the window's records as NDJSON
    into ``landing`` (the app's landing directory); ``node_info`` lists the config's nodes in
    order (see :func:`node_map`). When no counter moved (a late metric fetch) it scrapes
    again up to ``stale_retries`` times a second apart. Returns the file and the problems:
    records with bad values are written too (with nulls), for validation to quarantine.
    With ``attempts`` > 1 a window with problems is followed by another, up to that many."""
    job_id = job_id or running_job(rest)
    for _ in range(attempts - 1):
        path, problems = collect(rest, app, operators, node_info, window_s, landing, job_id,
                                 stale_retries)
        if not problems:
            return path, problems
    return collect_window(lambda: scrape(rest, job_id), scrape(rest, job_id), app, operators,
                          node_info, window_s, landing, f"flink-{job_id[:8]}", stale_retries)


def collect_window(
    scrape_now: Callable[[], Scrape],
    before: Scrape,
    app: str,
    operators: list[str],
    node_info: dict[str, dict[str, Any]],
    window_s: float,
    landing: Path,
    prefix: str,
    stale_retries: int = 5,
) -> tuple[Path, list[Problem]]:
    """The window from ``before`` to a scrape ``window_s`` later (``scrape_now``, retried a
    second apart while no counter moved) as NDJSON ``<prefix>-<time>.ndjson`` in ``landing``;
    returns the file and the problems."""
    time.sleep(window_s)
    after = scrape_now()
    for _ in range(stale_retries):  # a late metric fetch: wait for it, the window grows
        if counters_moved(before, after):
            break
        time.sleep(1.0)
        after = scrape_now()
    nodes = node_map(after, list(node_info))
    records, problems = window_records(app, before, after, operators, nodes, node_info)
    stamp = after.at.strftime("%Y%m%dT%H%M%S%f")
    return write_ndjson(records, landing / f"{prefix}-{stamp}.ndjson"), problems
