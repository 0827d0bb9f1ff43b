"""The real Flink load job: harness, flink-rest scrape and parallelism overrides.

One job per module (JVM start ~10 s); every test leaves it running as it found it.
"""

from __future__ import annotations

import json
import time

import pytest

from streamplan.flink.cluster import JOB_JAR, FlinkJob, JobSpec
from streamplan.flink.rest import collect, scrape

COST_US = {"parse": 5000, "enrich": 500}  # parse saturates at 200 records/s per subtask
RATE = 300.0
NODE = {"tm-1": {"type": "local", "leased_at": None, "billing_unit_s": 3600}}
OPS = ["parse", "enrich", "aggregate"]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    if not JOB_JAR.is_file():
        pytest.fail(f"{JOB_JAR} missing: run infra/flink/build.sh (make setup does)")
    spec = JobSpec(rate=RATE, cost_us=COST_US, selectivity={"aggregate": 0.5})
    with FlinkJob(spec, tmp_path_factory.mktemp("flink") / "job.log") as running:
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
    assert 0 < downtime < 90
