"""flink-rest adapter faults against a fake REST API on 127.0.0.1: unreachable, job not
running, NaN gauges and a missing vertex are reported by name and written as nulls."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from streamplan.flink.cluster import free_port
from streamplan.flink.rest import (
    FlinkRest,
    FlinkRestError,
    JobNotRunningError,
    collect,
    running_job,
)

NODE = {"tm-1": {"type": "local", "leased_at": None, "billing_unit_s": 3600}}


class FakeFlink:
    """A job with vertices ``parse`` and ``enrich`` (one subtask each) whose metric values
    come from ``self.metrics`` (subtask metric id -> value, per vertex) at each request."""

    def __init__(self, state: str = "RUNNING") -> None:
        self.state = state
        self.counts = 0
        self.frozen = False
        self.metrics = {"v1": {"busyTimeMsPerSecond": "500.0"},
                        "v2": {"busyTimeMsPerSecond": "NaN"}}

    def answer(self, path: str, query: dict) -> object:
        vertices = [{"id": "v1", "name": "parse", "parallelism": 1},
                    {"id": "v2", "name": "enrich", "parallelism": 1}]
        if path == "/jobs/overview":
            return {"jobs": [{"jid": "j1", "name": "load", "state": self.state}]}
        if path == "/jobs/j1":
            return {"name": "load", "state": self.state, "vertices": vertices}
        if path == "/taskmanagers":
            tm = {"id": "tm-uuid", "path": "pekko://flink/user/rpc/taskmanager_0"}
            return {"taskmanagers": [tm]}
        vid = path.split("/")[4]
        if path.endswith("/metrics"):
            self.counts += 0 if self.frozen else 100
            values = {"numRecordsIn": self.counts, "numRecordsOut": self.counts,
                      **self.metrics[vid]}
            wanted = query["get"][0].split(",")
            return [{"id": w, "value": str(values[w.split(".", 1)[1]])} for w in wanted
                    if w.split(".", 1)[1] in values]
        return {"subtasks": [{"subtask": 0, "taskmanager-id": "tm-uuid"}]}


@pytest.fixture
def fake():
    state = FakeFlink()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            url = urlparse(self.path)
            body = json.dumps(state.answer(url.path, parse_qs(url.query))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.rest = FlinkRest(f"http://127.0.0.1:{server.server_address[1]}")
    yield state
    server.shutdown()
    server.server_close()


def test_unreachable_rest_names_the_url():
    rest = FlinkRest(f"http://127.0.0.1:{free_port()}", timeout_s=1)
    with pytest.raises(FlinkRestError, match=r"127\.0\.0\.1:\d+/jobs/overview unreachable"):
        running_job(rest)


def test_job_not_running_names_the_job_and_state(fake):
    fake.state = "RESTARTING"
    with pytest.raises(JobNotRunningError, match=r"load \(j1\): RESTARTING"):
        running_job(fake.rest)


def test_nan_gauge_and_missing_vertex_are_reported_and_written_as_null(fake, tmp_path):
    path, problems = collect(fake.rest, "app", ["parse", "enrich", "aggregate"], NODE, 0.2,
                             tmp_path)
    text = [str(p) for p in problems]
    assert "job load (j1), vertex enrich[0], metric busy_ms: value nan" in text
    missing = "vertex aggregate, metric parallelism: vertex missing from the running job"
    assert f"job load (j1), {missing}" in text
    assert len(problems) == 2
    records = [json.loads(line) for line in path.read_text().splitlines()]
    ops = {r["operator"]: r for r in records if r["kind"] == "operator"}
    assert ops["enrich"]["busy_ms"] is None  # null: validation quarantines the row
    assert ops["parse"]["busy_ms"] == pytest.approx(500.0 * ops["parse"]["window_s"])
    assert ops["parse"]["records_in"] == 200  # counter delta between the two scrapes
    assert ops["parse"]["node"] == "tm-1"
    deployment = records[-1]
    assert deployment["placement"] == {"parse": [["tm-1", 1]], "enrich": [["tm-1", 1]]}


def test_counters_that_do_not_move_are_a_stale_scrape_written_as_null(fake, tmp_path):
    fake.frozen = True
    path, problems = collect(fake.rest, "app", ["parse"], NODE, 0.1, tmp_path, stale_retries=1)
    assert [str(p) for p in problems] == [
        "job load (j1), vertex *, metric numRecordsIn/numRecordsOut: no counter moved between "
        "the scrapes: metrics not refreshed",
        "job load (j1), vertex parse[0], metric records_in: stale counters",
        "job load (j1), vertex parse[0], metric records_out: stale counters",
    ]
    (parse,) = [json.loads(x) for x in path.read_text().splitlines() if '"operator"' in x]
    assert parse["records_in"] is None and parse["records_out"] is None
    assert parse["window_s"] > 1.0  # one retry a second later widened the window


def test_busy_without_records_is_reported_and_written_as_null(fake, tmp_path):
    fake.metrics["v1"] = {"busyTimeMsPerSecond": "1000.0", "numRecordsIn": 7, "numRecordsOut": 7}
    path, problems = collect(fake.rest, "app", ["parse", "enrich"], NODE, 0.2, tmp_path)
    reasons = [str(p) for p in problems if p.vertex == "parse"]
    assert len(reasons) == 3 and "metric numRecordsIn: busy" in reasons[0]
    assert reasons[0].endswith("ms with no records in")
    ops = {r["operator"]: r for r in map(json.loads, path.read_text().splitlines())
           if r["kind"] == "operator"}
    assert ops["parse"]["records_in"] is None and ops["parse"]["busy_ms"] > 0
    assert ops["enrich"]["records_in"] == 200
