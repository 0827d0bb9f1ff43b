"""``prometheus`` source adapter: Flink's Prometheus reporter exposition → the same
:class:`~streamplan.flink.rest.Scrape` the ``flink-rest`` adapter builds, so one window
of telemetry-contract records comes out of either source (:func:`collect_prometheus`).

Flink's reporter names task metrics ``flink_taskmanager_job_task_<metric>`` with the labels
``job_id``, ``job_name``, ``task_id`` (the job vertex id), ``task_name`` (the vertex name,
characters outside ``[A-Za-z0-9_:]`` replaced by ``_``), ``subtask_index`` and ``tm_id``;
counters are exported as gauges. The text is parsed with ``prometheus_client``'s parser.
"""

from __future__ import annotations

import math
import re
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from streamplan.flink.rest import (
    COUNTERS,
    GAUGES,
    FlinkRestError,
    JobNotRunningError,
    Problem,
    Scrape,
    Subtask,
    collect_window,
)

PREFIX = "flink_taskmanager_job_task_"
UNALLOWED = re.compile(r"[^a-zA-Z0-9:_]")  # Flink's AbstractPrometheusReporter label filter


class PrometheusError(FlinkRestError):
    """The exposition could not be fetched or holds no usable Flink task metrics."""


def fetch_exposition(url: str, timeout_s: float = 5.0) -> str:
    """GET the text exposition at ``url`` (e.g. ``http://127.0.0.1:9249/metrics``)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.read().decode()
    except (urllib.error.URLError, OSError) as exc:
        raise PrometheusError(f"Prometheus exposition {url} unreachable: {exc}") from exc


def flink_label(value: str) -> str:
    """A name as Flink's reporter writes it in a label value (``Source: src`` →
    ``Source:_src``)."""
    return UNALLOWED.sub("_", value)


def parse_exposition(text: str, job: str | None = None,
                     vertex_names: Iterable[str] = ()) -> Scrape:
    """The task metrics of one job (id or name ``job``; the only one when ``None``) in a
    Flink reporter's exposition; vertices whose label is that of one of ``vertex_names``
    get that name back. A metric a subtask lacks is NaN, as in the REST scrape."""
    renamed = {flink_label(v): v for v in vertex_names}
    wanted = {PREFIX + m: m for m in COUNTERS + GAUGES}
    values: dict[tuple[str, str, str, int, str], dict[str, float]] = defaultdict(dict)
    jobs: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            metric = wanted.get(sample.name)
            if metric is None:
                continue
            lab = sample.labels
            jobs[lab["job_id"]] = lab["job_name"]
            vertex = renamed.get(lab["task_name"], lab["task_name"])
            key = (lab["job_id"], lab["task_id"], vertex, int(lab["subtask_index"]), lab["tm_id"])
            values[key][metric] = float(sample.value)
    chosen = [j for j, name in jobs.items() if job is None or job == j
              or flink_label(job) == name]
    if len(chosen) != 1:
        listed = ", ".join(f"{n} ({j})" for j, n in sorted(jobs.items())) or "no Flink task metrics"
        raise JobNotRunningError(
            f"Prometheus exposition: expected one job{f' {job!r}' if job else ''}, "
            f"found {len(chosen)} ({listed})"
        )
    job_id = chosen[0]
    subtasks, counts, ids = {}, defaultdict(int), {}
    for (jid, vid, vertex, index, tm), metrics in sorted(values.items()):
        if jid != job_id:
            continue
        full = {m: metrics.get(m, math.nan) for m in COUNTERS + GAUGES}
        subtasks[vertex, index] = Subtask(vertex, index, tm, full)
        counts[vertex] += 1
        ids[vertex] = vid
    vertices = {v: (ids[v], counts[v]) for v in sorted(counts)}
    tms = tuple(sorted({s.taskmanager for s in subtasks.values()}))
    return Scrape(job_id, jobs[job_id], datetime.now(UTC), vertices, subtasks, tms)


def scrape_prometheus(url: str | Sequence[str], job: str | None = None,
                      vertex_names: Iterable[str] = ()) -> Scrape:
    """Fetch and parse the exposition at ``url``, or of every task manager's URL of a list
    (:func:`parse_exposition`)."""
    urls = [url] if isinstance(url, str) else list(url)
    return parse_exposition("\n".join(fetch_exposition(u) for u in urls), job, vertex_names)


def collect_prometheus(
    url: str | Sequence[str],
    app: str,
    operators: list[str],
    node_info: dict[str, dict[str, Any]],
    window_s: float,
    landing: Path,
    job: str | None = None,
) -> tuple[Path, list[Problem]]:
    """One window of telemetry from the exposition(s) at ``url`` into ``landing``, like
    :func:`streamplan.flink.rest.collect` (task managers map to the config's nodes in the
    order of their ids)."""
    first = scrape_prometheus(url, job, operators)
    return collect_window(lambda: scrape_prometheus(url, first.job_id, operators), first, app,
                          operators, node_info, window_s, landing,
                          f"prometheus-{first.job_id[:8]}")
