"""prometheus adapter faults: an unreachable exposition, no or several jobs, a NaN gauge and a
missing metric are reported by name and written as nulls (the real reporter's exposition is
exercised in test_flink_job.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from streamplan.flink.cluster import free_port
from streamplan.flink.prometheus import PrometheusError, parse_exposition, scrape_prometheus
from streamplan.flink.rest import JobNotRunningError, window_records

NODE = {"tm-1": {"type": "local", "leased_at": None, "billing_unit_s": 3600}}


def exposition(records_in: float, busy: str = "500.0", job: str = "j1", name: str = "load",
               without: str | None = None) -> str:
    """A Flink reporter exposition of one job with vertices parse (v1) and enrich (v2)."""
    lines = []
    for metric, kind in (("numRecordsIn", "gauge"), ("numRecordsOut", "gauge"),
                         ("busyTimeMsPerSecond", "gauge"),
                         ("backPressuredTimeMsPerSecond", "gauge")):
        full = f"flink_taskmanager_job_task_{metric}"
        lines += [f"# HELP {full} {metric} (scope: taskmanager_job_task)", f"# TYPE {full} {kind}"]
        for vid, vertex in (("v1", "parse"), ("v2", "enrich")):
            if (vertex, metric) == (without, "busyTimeMsPerSecond") or metric == without:
                continue
            value = {"numRecordsIn": records_in, "numRecordsOut": records_in,
                     "busyTimeMsPerSecond": busy if vertex == "enrich" else "500.0",
                     "backPressuredTimeMsPerSecond": 0.0}[metric]
            labels = (f'job_id="{job}",job_name="{name}",task_id="{vid}",task_name="{vertex}",'
                      f'subtask_index="0",tm_id="tm_uuid",host=""')
            lines.append(f"{full}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


def window(before_text: str, after_text: str):
    before = parse_exposition(before_text)
    after = parse_exposition(after_text)
    after = replace(after, at=before.at + timedelta(seconds=5))
    return window_records("app", before, after, ["parse", "enrich"], {"tm_uuid": "tm-1"}, NODE)


def test_a_clean_window_gives_contract_records() -> None:
    records, problems = window(exposition(100), exposition(600))
    assert problems == []
    ops = {r["operator"]: r for r in records if r["kind"] == "operator"}
    assert ops["parse"]["records_in"] == 500 and ops["parse"]["busy_ms"] == 2500
    assert ops["parse"]["node"] == "tm-1"


def test_nan_gauge_is_reported_by_job_vertex_and_metric_and_written_as_null() -> None:
    records, problems = window(exposition(100, busy="NaN"), exposition(600, busy="NaN"))
    assert [str(p) for p in problems] == ["job load (j1), vertex enrich[0], metric busy_ms: "
                                          "value nan"]
    enrich = next(r for r in records if r.get("operator") == "enrich")
    assert enrich["busy_ms"] is None and enrich["records_in"] == 500


def test_a_metric_missing_from_the_exposition_is_reported() -> None:
    records, problems = window(exposition(100), exposition(600, without="enrich"))
    assert [(p.vertex, p.metric) for p in problems] == [("enrich", "busy_ms")]


def test_no_or_several_jobs_name_what_was_found() -> None:
    with pytest.raises(JobNotRunningError, match="found 0 .no Flink task metrics"):
        parse_exposition("# nothing here\n")
    two = exposition(1) + exposition(1, job="j2", name="other").replace("# HELP", "# X")
    with pytest.raises(JobNotRunningError, match=r"found 2 \(load \(j1\), other \(j2\)\)"):
        parse_exposition(two)
    assert parse_exposition(two, "other").job_id == "j2"


def test_unreachable_exposition_names_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics"
    with pytest.raises(PrometheusError, match=f"{url} unreachable"):
        scrape_prometheus(url)
