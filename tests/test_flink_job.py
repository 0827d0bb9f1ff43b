"""The real Flink load job: harness, flink-rest and prometheus scrapes (Flink's reporter on
127.0.0.1), a Prometheus window through ingest → validate → fit, parallelism overrides.

One job per module (JVM start ~10 s); every test leaves it running as it found it.
"""

from __future__ import annotations

import json
import time

import pytest

from streamplan.config import load_config
from streamplan.flink.cluster import JOB_JAR, FlinkJob, JobSpec
from streamplan.flink.prometheus import collect_prometheus, flink_label, scrape_prometheus
from streamplan.flink.rest import collect, scrape
from streamplan.settings import REPO_ROOT

COST_US = {"parse": 5000, "enrich": 500}  # parse saturates at 200 records/s per subtask
RATE = 300.0
NODE = {"tm-1": {"type": "local", "leased_at": None, "billing_unit_s": 3600}}
OPS = ["parse", "enrich", "aggregate"]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    if not JOB_JAR.is_file():
        pytest.fail(f"{JOB_JAR} missing: run infra/flink/build.sh (make setup does)")
    spec = JobSpec(rate=RATE, cost_us=COST_US, selectivity={"aggregate": 0.5})
    log = tmp_path_factory.mktemp("flink") / "job.log"
    with FlinkJob(spec, log, prometheus=True) as running:
        time.sleep(4)  # let the metric fetcher see a few seconds of traffic
        yield running


def test_collect_writes_contract_records_consistent_with_the_configured_costs(job, tmp_path):
    path, problems = collect(job.rest, "flinkapp", OPS, NODE, 4.0, tmp_path, job.job_id,
                             attempts=3)
    assert problems == []
    records = [json.loads(line) for line in path.read_text().splitlines()]
    ops = {r["operator"]: r for r in records if r["kind"] == "operator"}
    assert sorted(ops) == sorted(OPS)
    assert {r["node"] for r in ops.values()} == {"tm-1"}
    window = ops["parse"]["window_s"]
    assert 3.5 < window < 6.0
    parse = ops["parse"]
    # saturated: busy nearly the whole window, throughput near 1 / cost (<= 200/s)
    assert parse["busy_ms"] > 0.85 * window * 1000
    assert 120 < parse["records_in"] / window <= 1e6 / COST_US["parse"] * 1.05
    # independent check: busy time (gauge) per record (counter) is the configured cost
    assert parse["busy_ms"] / parse["records_in"] == pytest.approx(COST_US["parse"] / 1000, rel=0.3)
    agg = ops["aggregate"]
    assert abs(agg["records_out"] - 0.5 * agg["records_in"]) <= 0.05 * agg["records_in"] + 2
    (deployment,) = [r for r in records if r["kind"] == "deployment"]
    assert deployment["placement"] == {op: [["tm-1", 1]] for op in OPS}
    assert deployment["nodes"] == NODE


def listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as in /proc/net/tcp{,6}) of sockets listening on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hexport = local.rsplit(":", 1)
            if state == "0A" and int(hexport, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


def test_prometheus_reporter_listens_on_loopback_only(job):
    loopback = {"0100007F", "0000000000000000FFFF00000100007F"}  # 127.0.0.1, ::ffff:127.0.0.1
    addresses = listening_addresses(job.prometheus_port)
    assert addresses and addresses <= loopback, addresses


def test_prometheus_and_rest_see_the_same_job(job):
    rest, prom = scrape(job.rest, job.job_id), scrape_prometheus(job.prometheus_url)
    assert prom.job_id == rest.job_id and prom.job_name == flink_label(rest.job_name)
    assert "Source:_source" in prom.vertices and "Source: source" in rest.vertices
    assert {op: prom.vertices[op] for op in OPS} == {op: rest.vertices[op] for op in OPS}
    assert len(prom.taskmanagers) == len(rest.taskmanagers) == 1
    # the reporter reads counters live, the REST API every second: close, not equal
    for op in OPS:
        a, b = rest.subtasks[op, 0].metrics, prom.subtasks[op, 0].metrics
        assert b["numRecordsIn"] >= a["numRecordsIn"] > 0, op
        assert b["numRecordsIn"] - a["numRecordsIn"] < 3 * RATE, op


def test_a_prometheus_window_is_ingested_validated_and_fitted(job, spark, settings):
    from datetime import UTC, datetime, timedelta

    from streamplan import stages

    config = load_config(REPO_ROOT / "infra" / "flink" / "app.yaml")
    node = {"tm-1": {"type": "minicluster", "leased_at": None, "billing_unit_s": 3600}}
    start = datetime.now(UTC) - timedelta(seconds=1)
    landing = stages.landing_dir(settings, config.app)
    problems = []
    for _ in range(2):
        problems += collect_prometheus(job.prometheus_url, config.app, OPS, node, 4.0,
                                       landing)[1]
    assert problems == []
    interval = stages.Interval(start, datetime.now(UTC) + timedelta(seconds=1))
    stages.run_ingest(spark, settings, config, interval)
    assert stages.run_validate(spark, settings, config, interval).quarantined == 0
    model = stages.run_fit(spark, settings, config, interval)
    parse = model.operators["parse"]
    assert parse.samples == 2
    # saturated parse: busy nearly all the time, service time the configured cost
    assert parse.utilisation > 0.85
    assert parse.service_mean_s == pytest.approx(COST_US["parse"] / 1e6, rel=0.3)
    assert model.deployment.placement["parse"] == [("tm-1", 1)]


def test_restart_with_vertex_overrides_changes_parallelism_and_keeps_vertex_ids(job):
    before = scrape(job.rest, job.job_id)
    parse_id = before.vertices["parse"][0]
    spec = JobSpec(rate=RATE, cost_us=COST_US, selectivity={"aggregate": 0.5},
                   overrides={parse_id: 3})
    downtime = job.restart(spec)
    after = scrape(job.rest, job.job_id)
    assert after.job_id != before.job_id
    assert after.vertices["parse"] == (parse_id, 3)
    assert {n: v for n, v in after.vertices.items() if n != "parse"} == {
        n: v for n, v in before.vertices.items() if n != "parse"}
    assert sorted(i for v, i in after.subtasks if v == "parse") == [0, 1, 2]
    prom = scrape_prometheus([job.prometheus_url])  # one URL per task manager
    assert prom.job_id == after.job_id and prom.vertices["parse"] == (parse_id, 3)
    assert 0 < downtime < 90
